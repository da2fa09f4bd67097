package extprocauthz

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

const benchConfig = `
issuers: [{name: a, secret: bench-secret-bench-secret-bench-secret-0123}]
routes:
  - name: files
    default: true
    protocol: mcp
    issuers: [a]
    response_path: true
    rules:
      - {name: writes, methods: [tools/call], names: ["delete_*", "drop_*"], scopes: ["files:write"]}
      - {name: admin, methods: [tools/call], names: ["admin_*"], claims: {groups: [admins]}}
`

func headersMsg(eos bool, kv ...string) *corev3.HeaderMap {
	h := &corev3.HeaderMap{}
	for i := 0; i < len(kv); i += 2 {
		h.Headers = append(h.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return h
}

// benchStream is one list exchange's messages, as Envoy sends them with
// the recommended configuration (the metadata on each).
func benchStream(b testing.TB, contentType string, body [][]byte) []*extprocv3.ProcessingRequest {
	return benchExchange(b, false, contentType, body)
}

// benchExchange is benchStream, or with resumed the resumption of an
// event stream: a GET with Last-Event-ID, without a body.
func benchExchange(b testing.TB, resumed bool, contentType string, body [][]byte) []*extprocv3.ProcessingRequest {
	md, err := structpb.NewStruct(map[string]any{"route": "files", "outcome": "allowed", "user": "alice", "issuer": "a", "scope": "files:read"})
	if err != nil {
		b.Fatal(err)
	}
	meta := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{MetadataNamespace: md}}
	req := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	msgs := []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headersMsg(false,
			":method", "POST", ":path", "/mcp", ":authority", "mcp.example.com", ":scheme", "https", "content-type", "application/json",
			"accept", "application/json, text/event-stream", "mcp-protocol-version", "2025-11-25", "x-request-id", "r-1")}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(req), EndOfStream: true}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headersMsg(false,
			":status", "200", "content-type", contentType)}}},
	}
	if resumed {
		msgs = []*extprocv3.ProcessingRequest{
			{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{EndOfStream: true, Headers: headersMsg(true,
				":method", "GET", ":path", "/mcp", ":authority", "mcp.example.com", ":scheme", "https",
				"accept", "text/event-stream", "mcp-protocol-version", "2025-11-25", "last-event-id", "ev-1", "x-request-id", "r-1")}}},
			msgs[2],
		}
	}
	for i, c := range body {
		msgs = append(msgs, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: c, EndOfStream: i == len(body)-1}}})
	}
	for _, m := range msgs {
		m.MetadataContext = meta
	}
	return msgs
}

func hundredTools() []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := range 100 {
		if i > 0 {
			b.WriteByte(',')
		}
		name := fmt.Sprintf("read_%d", i)
		switch i % 4 {
		case 1:
			name = fmt.Sprintf("delete_%d", i)
		case 2:
			name = fmt.Sprintf("admin_%d", i)
		}
		fmt.Fprintf(&b, `{"name":%q,"description":"Tool number %d does one thing well.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},"annotations":{"readOnlyHint":true}}`, name, i)
	}
	b.WriteString(`],"nextCursor":"page-2"}}`)
	return []byte(b.String())
}

// run processes msgs as one stream, checking the list was filtered.
func run(b *testing.B, s *Server, msgs []*extprocv3.ProcessingRequest) *exchange {
	st := &exchange{s: s, ctx: context.Background(), req: check.Request{Headers: check.Headers{}}}
	for _, m := range msgs {
		out, err := st.handle(m)
		if err != nil || out == nil {
			b.Fatalf("%v %v", out, err)
		}
	}
	if st.x == nil || st.handling == passThrough {
		b.Fatalf("not processed as an allowed list: %v", st.xerr)
	}
	return st
}

// BenchmarkFilterList100: one tools/list exchange of 100 tools (half of
// them hidden from the caller) through the processor, request headers to
// filtered body, without the gRPC transport: decode, identity and rules,
// filtering, replies.
func BenchmarkFilterList100(b *testing.B) {
	s := NewServer(pipelinetest.New(b, benchConfig, check.Deps{}, check.Options{}), Options{})
	body := hundredTools()
	for _, tc := range []struct {
		name, contentType string
		body              [][]byte
	}{
		{"json", "application/json", [][]byte{body}},
		{"sse", "text/event-stream", [][]byte{append(append([]byte("event: message\ndata: "), body...), "\n\n"...)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			msgs := benchStream(b, tc.contentType, tc.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				run(b, s, msgs)
			}
		})
	}
}

// BenchmarkSSEPerEvent: a list answered as an event stream of 1,000 small
// events (progress notifications, then the result), each in its own
// chunk; reported per event. list: the answer to a tools/list POST;
// resumed: the same events replayed to a GET with Last-Event-ID, each
// read by its shape.
func BenchmarkSSEPerEvent(b *testing.B) {
	s := NewServer(pipelinetest.New(b, benchConfig, check.Deps{}, check.Options{}), Options{})
	const n = 1000
	chunks := make([][]byte, 0, n)
	for i := range n - 1 {
		chunks = append(chunks, fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":%d}}\n\n", i))
	}
	chunks = append(chunks, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"read_1\"},{\"name\":\"delete_1\"}]}}\n\n"))
	for _, resumed := range []bool{false, true} {
		name := "list"
		if resumed {
			name = "resumed"
		}
		b.Run(name, func(b *testing.B) {
			msgs := benchExchange(b, resumed, "text/event-stream", chunks)
			b.ReportAllocs()
			for b.Loop() {
				st := run(b, s, msgs)
				if st.sse.Removed != 1 {
					b.Fatalf("%d removed", st.sse.Removed)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
		})
	}
}

// BenchmarkSSERequestsPerEvent: the answer to a tools/call, 1,000 small
// events (progress notifications, an elicitation the rules refuse, the
// result), each in its own chunk, on a route whose rules refuse the
// server's elicitation/create: every event is read for it. Reported per
// event, beside BenchmarkSSEPerEvent's list streams.
func BenchmarkSSERequestsPerEvent(b *testing.B) {
	config := strings.Replace(benchConfig, "    rules:\n", "    rules:\n      - {name: no questions, methods: [elicitation/create], action: deny}\n", 1)
	s := NewServer(pipelinetest.New(b, config, check.Deps{}, check.Options{}), Options{})
	const n = 1000
	chunks := make([][]byte, 0, n)
	for i := range n - 2 {
		chunks = append(chunks, fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":%d}}\n\n", i))
	}
	chunks = append(chunks, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"elicitation/create\",\"params\":{\"message\":\"?\"}}\n\n"),
		[]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n"))
	msgs := benchExchange(b, false, "text/event-stream", chunks)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_1","arguments":{}}}`
	msgs[1] = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(call), EndOfStream: true}}}
	b.ReportAllocs()
	for b.Loop() {
		st := run(b, s, msgs)
		if st.sse.Dropped != 1 {
			b.Fatalf("%d dropped", st.sse.Dropped)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
}
