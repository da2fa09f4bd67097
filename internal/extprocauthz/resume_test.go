package extprocauthz_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// getMetadata runs a session's GET through ext_authz, as Envoy does before
// ext_proc, and returns the metadata Envoy forwards.
func getMetadata(t *testing.T, f *fixture, tok string, header http.Header) *corev3.Metadata {
	t.Helper()
	r, _ := http.NewRequest("GET", "http://mcp.example.com/mcp", nil)
	for k, v := range header {
		r.Header[k] = v
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := f.authz.Check(context.Background(), envoytest.BuildCheckRequest(r, nil, envoytest.BuildOptions{}))
	if err != nil || resp.GetStatus().GetCode() != 0 {
		t.Fatalf("ext_authz: %v %v", resp, err)
	}
	return metadataOf(resp)
}

// TestResumedStreamReplaysFiltered is the resumption attack: a reader's
// tools/list was answered on an event stream, the reader interrupts it
// and resumes with GET and Last-Event-ID, and the upstream replays the
// stored response event. The GET carries no JSON-RPC method, so the event
// is recognised by its shape: it reaches the reader filtered, in the
// recommended configuration (the body asked for by mode_override) and on
// the stream's own full-duplex route, with the other events byte for byte.
// A standalone stream (no Last-Event-ID) is filtered the same way, since a
// server may answer on it too. A resumption without Mcp-Session-Id never
// gets here: ext_authz refuses it (TestStateResumeOthersStream).
func TestResumedStreamReplaysFiltered(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	bornSession(t, f, reader, "sess-r")
	resume := http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-r"}, "Last-Event-Id": {"ev-1"}}
	standalone := http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-r"}}
	replayed := "id: ev-2\nevent: message\ndata: " + toolsResult + "\n\n"
	filtered := "id: ev-2\nevent: message\ndata: " + toolsFiltered + "\n\n"
	note := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
	callResult := "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"tools\"}]}}\n\n"
	failure := "event: message\ndata: " + `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}` + "\n\n"
	tests := []struct {
		name   string
		duplex bool
		header http.Header
		chunks []string
		want   string
	}{
		{name: "resumed: replayed tools/list", header: resume, chunks: []string{replayed}, want: filtered},
		{name: "resumed, duplex: replayed tools/list", duplex: true, header: resume, chunks: []string{replayed}, want: filtered},
		{name: "resumed: split anywhere, among other events", header: resume,
			chunks: []string{"id: p\ndata:\n\n" + note[:9], note[9:] + replayed[:40], replayed[40:], callResult},
			want:   "id: p\ndata:\n\n" + note + filtered + callResult},
		{name: "resumed, duplex: split anywhere, among other events", duplex: true, header: resume,
			chunks: []string{"id: p\ndata:\n\n" + note[:9], note[9:] + replayed[:40], replayed[40:], callResult},
			want:   "id: p\ndata:\n\n" + note + filtered + callResult},
		{name: "standalone: a response on it", header: standalone, chunks: []string{replayed}, want: filtered},
		{name: "standalone, duplex: a response on it", duplex: true, header: standalone, chunks: []string{replayed}, want: filtered},
		{name: "resumed: prompts by shape", header: resume,
			chunks: []string{`data: {"jsonrpc":"2.0","id":3,"result":{"prompts":[{"name":"admin_report"},{"name":"summary"}]}}` + "\n\n"},
			want:   `data: {"jsonrpc":"2.0","id":3,"result":{"prompts":[{"name":"summary"}]}}` + "\n\n"},
		{name: "resumed, duplex: resources by shape", duplex: true, header: resume,
			chunks: []string{`data: {"jsonrpc":"2.0","id":3,"result":{"resources":[{"uri":"file:///secret/k","name":"k"},{"uri":"file:///docs/a","name":"a"}]}}` + "\n\n"},
			want:   `data: {"jsonrpc":"2.0","id":3,"result":{"resources":[{"uri":"file:///docs/a","name":"a"}]}}` + "\n\n"},
		{name: "resumed: unreadable event fails closed", header: resume,
			chunks: []string{note, `data: {"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[{"name":"delete_file"}]}}` + "\n\n", replayed},
			want:   note + failure},
		{name: "resumed, duplex: unreadable event fails closed", duplex: true, header: resume,
			chunks: []string{note, `data: {"jsonrpc":"2.0","id":1,"result":{"Tools":[{"name":"delete_file"}]}}` + "\n\n", replayed},
			want:   note + failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := getMetadata(t, f, reader, tt.header)
			cfg := recommended(md)
			if tt.duplex {
				cfg = duplexGET(f, t, reader, "sess-r")
				cfg.Metadata = md
			}
			res := envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{
				Request:  envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", tt.header),
				Response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, tt.chunks...),
			})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			if got := string(res.Downstream.Body()); got != tt.want {
				t.Fatalf("client got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestResumedStreamFailsClosed: what the shape filter cannot read exactly
// on a GET stream is never passed: a compressed stream is replaced by the
// error, an event over the size limit ends the stream (also the duplex
// one, which otherwise passes such an event as it comes), and a list on
// the stream of a request ext_authz did not allow (a dry run's would-be
// denial) ends it too, while its other events pass.
func TestResumedStreamFailsClosed(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	bornSession(t, f, reader, "sess-f")
	resume := http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-f"}, "Last-Event-Id": {"ev-1"}}
	replayed := "id: ev-2\nevent: message\ndata: " + toolsResult + "\n\n"
	note := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
	failure := `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`
	huge := "data: " + strings.Repeat("x", mcpresponse.DefaultMaxEvent) + "\n\n"
	dryRun := metadataFor(t, map[string]any{"outcome": "dry_run", "route": "files", "user": "mallory"})
	tests := []struct {
		name     string
		duplex   bool
		md       *corev3.Metadata // the reader's GET when nil
		encoding string
		charset  string
		chunks   []string
		want     string
	}{
		{name: "compressed", encoding: "gzip", chunks: []string{replayed}, want: failure},
		{name: "compressed, duplex", duplex: true, encoding: "br", chunks: []string{replayed}, want: failure},
		{name: "compressed, coding in capitals", encoding: "GZIP", chunks: []string{replayed}, want: failure},
		{name: "compressed, identity listed first", encoding: "identity, gzip", chunks: []string{replayed}, want: failure},
		{name: "not allowed, compressed", md: dryRun, encoding: "gzip", chunks: []string{note}, want: failure},
		{name: "not allowed, identity coding in capitals", md: dryRun, encoding: "IDENTITY", chunks: []string{note}, want: note},
		{name: "an event over the limit", chunks: []string{note, huge[:len(huge)/2], huge[len(huge)/2:], replayed}, want: note + "event: message\ndata: " + failure + "\n\n"},
		{name: "an event over the limit, duplex", duplex: true, chunks: []string{note, huge[:len(huge)/2], huge[len(huge)/2:], replayed}, want: note + "event: message\ndata: " + failure + "\n\n"},
		// A list only some clients read (after a lone CR, or a byte
		// order mark the stream starts with) ends the stream too.
		{name: "a list behind a lone CR", chunks: []string{note, "data:\r" + toolsResult + "\n\n"}, want: note + "event: message\ndata: " + failure + "\n\n"},
		{name: "a list behind a byte order mark", chunks: []string{"\xEF\xBB", "\xBFdata: " + toolsResult + "\n\n"}, want: "event: message\ndata: " + failure + "\n\n"},
		{name: "not allowed: a list behind a lone CR", md: dryRun, chunks: []string{note, "data:\r" + toolsResult + "\n\n"}, want: note + "event: message\ndata: " + failure + "\n\n"},
		{name: "another charset", charset: "utf-16le", chunks: []string{replayed}, want: failure},
		{name: "not allowed, another charset", md: dryRun, charset: "utf-16le", chunks: []string{note}, want: failure},
		{name: "not allowed: other events pass", md: dryRun, chunks: []string{note}, want: note},
		{name: "not allowed: a list ends the stream", md: dryRun, chunks: []string{note, replayed, note}, want: note + "event: message\ndata: " + failure + "\n\n"},
		{name: "not allowed, duplex: a list ends the stream", duplex: true, md: dryRun, chunks: []string{note, replayed, note}, want: note + "event: message\ndata: " + failure + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := tt.md
			if md == nil {
				md = getMetadata(t, f, reader, resume)
			}
			cfg := recommended(md)
			if tt.duplex {
				cfg = duplexGET(f, t, reader, "sess-f")
				cfg.Metadata = md
			}
			h := http.Header{"Content-Type": {"text/event-stream"}}
			if tt.encoding != "" {
				h.Set("Content-Encoding", tt.encoding)
			}
			if tt.charset != "" {
				h.Set("Content-Type", "text/event-stream;charset="+tt.charset)
			}
			res := envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{
				Request:  envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", resume),
				Response: envoytest.ExtProcResponse(200, h, tt.chunks...),
			})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			if got := string(res.Downstream.Body()); got != tt.want {
				if len(got) > 300 {
					got = got[:300] + "..."
				}
				t.Fatalf("client got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

// TestResumedStreamEveryBodyMode: whatever body modes the filter is
// configured with, a resumed stream's replayed list never leaves
// unfiltered wherever the body reaches the processor, and every message
// is answered as Envoy expects.
func TestResumedStreamEveryBodyMode(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	bornSession(t, f, reader, "sess-m")
	resume := http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-m"}, "Last-Event-Id": {"ev-1"}}
	md := getMetadata(t, f, reader, resume)
	replayed := "id: ev-2\nevent: message\ndata: " + toolsResult + "\n\n"
	modes := []filterv3.ProcessingMode_BodySendMode{
		filterv3.ProcessingMode_NONE, filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_STREAMED,
		filterv3.ProcessingMode_BUFFERED_PARTIAL, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
	}
	for _, respMode := range modes {
		for _, override := range []bool{false, true} {
			duplex := respMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
			t.Run(fmt.Sprintf("%v/override=%v", respMode, override), func(t *testing.T) {
				mode := &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: respMode}
				if duplex {
					mode.ResponseTrailerMode = filterv3.ProcessingMode_SEND
				}
				cfg := envoytest.ExtProcConfig{Mode: mode, AllowModeOverride: override && !duplex, MessageTimeout: 2 * time.Second, StreamIdleTimeout: 10 * time.Second, Metadata: md}
				res := envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{
					Request:  envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", resume),
					Response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, replayed[:25], replayed[25:]),
				})
				if res.Err != nil || res.Reset {
					t.Fatalf("%v (reset %v)", res.Err, res.Reset)
				}
				gets := respMode != filterv3.ProcessingMode_NONE || cfg.AllowModeOverride
				body := res.Downstream.Body()
				if gets && bytes.Contains(body, []byte("delete_file")) {
					t.Fatalf("unfiltered: %s", body)
				}
				if gets && !bytes.Contains(body, []byte("read_file")) {
					t.Fatalf("the reader's tools are missing: %s", body)
				}
			})
		}
	}
}

// TestFilteredStreamInjects: on a route that filters lists the session's
// duplex stream is filtered and still takes completions, at event
// boundaries after the whole events of a chunk.
func TestFilteredStreamInjects(t *testing.T) {
	f := newFixture(t)
	alice := token(t, "alice", nil)
	bornSession(t, f, alice, "sess-i")
	cfg := duplexGET(f, t, alice, "sess-i")
	priming := "id: p0\ndata:\n\n"
	replayed := "id: ev-2\nevent: message\ndata: " + toolsResult + "\n\n"
	filtered := "id: ev-2\nevent: message\ndata: " + toolsFiltered + "\n\n"
	done := make(chan envoytest.ExtProcResult, 1)
	go func() {
		done <- envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{
			Request: envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-i"}, "Last-Event-Id": {"ev-1"}}),
			// The first chunk completes the priming event and starts the
			// list: the completion queued before it follows the priming
			// event, never inside the list.
			Response:       envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, priming+replayed[:30], replayed[30:]),
			FirstByteDelay: time.Second,
		})
	}()
	<-f.counted.opened
	if n := f.proc.ElicitationCompleted(elicit.Pending{ID: "el-1", Subject: "alice", Session: "sess-i"}); n != 1 {
		t.Fatalf("the completion reached %d streams, want 1", n)
	}
	res := <-done
	if res.Err != nil || res.Reset {
		t.Fatalf("%v (reset %v)", res.Err, res.Reset)
	}
	want := priming + string(mcpresponse.ElicitationCompleteEvent("el-1")) + filtered
	if got := string(res.Downstream.Body()); got != want {
		t.Fatalf("client got\n%q\nwant\n%q", got, want)
	}
}

// TestResumedStreamCounted: a GET stream's filtering is counted (and
// audited) per list as it passes, not at the end of a stream that may
// stay open for hours.
func TestResumedStreamCounted(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	bornSession(t, f, reader, "sess-c")
	resume := http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-c"}, "Last-Event-Id": {"ev-1"}}
	replayed := "data: " + toolsResult + "\n\n"
	res := envoytest.ExtProc(t, f.conn, recommended(getMetadata(t, f, reader, resume)), envoytest.ExtProcExchange{
		Request:  envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", resume),
		Response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, replayed, replayed, "data: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\n"),
	})
	if res.Err != nil || res.Reset {
		t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
	}
	if n := f.counted.get(extprocauthz.ActionFiltered); n != 2 {
		t.Fatalf("filtered counted %d times, want 2", n)
	}
}

// TestSDKResumedStreamFiltered is the resumption attack against the MCP Go
// SDK's server with stream resumption on (an event store): a reader lists
// the tools on an event stream (filtered), then resumes that stream with
// GET and Last-Event-ID set to its priming event's id, and the server
// replays the stored tools/list response. The replay reaches the reader
// filtered too.
func TestSDKResumedStreamFiltered(t *testing.T) {
	server := mcp.NewServer(&mcp.Implementation{Name: "resumable", Version: "v1.0.0"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{}, struct{}{}, nil
	}
	mcp.AddTool(server, &mcp.Tool{Name: "read_file"}, noop)
	mcp.AddTool(server, &mcp.Tool{Name: "delete_file"}, noop)
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil), DisableLocalhostProtection: true}))
	t.Cleanup(upstream.Close)
	f := newFixture(t)
	fr := httptest.NewServer(&front{t: t, f: f, upstream: upstream.URL, processGET: true})
	t.Cleanup(fr.Close)
	client := hostClient(token(t, "alice", nil), fr.URL)

	send := func(method, body string, header http.Header) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, fr.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Accept", "application/json, text/event-stream")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	resp, _ := send("POST", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	session := http.Header{"Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {"2025-11-25"}}
	send("POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session)
	resp, listed := send("POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, session)
	if resp.StatusCode != 200 || !strings.Contains(listed, "read_file") || strings.Contains(listed, "delete_file") {
		t.Fatalf("tools/list: %d %q", resp.StatusCode, listed)
	}
	// The priming event's id names the stream and its first event.
	var primed string
	for line := range strings.Lines(listed) {
		if id, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "id: "); ok {
			primed = id
			break
		}
	}
	if primed == "" {
		t.Fatalf("no event id to resume from in %q", listed)
	}
	resume := session.Clone()
	resume.Set("Last-Event-Id", primed)
	resume.Set("Accept", "text/event-stream")
	resp, replayed := send("GET", "", resume)
	if resp.StatusCode != 200 || !strings.Contains(replayed, `"id":1`) || !strings.Contains(replayed, "read_file") {
		t.Fatalf("the resumed stream did not replay the list: %d %q", resp.StatusCode, replayed)
	}
	if strings.Contains(replayed, "delete_file") {
		t.Fatalf("the replayed list reached the reader unfiltered: %q", replayed)
	}
	if !strings.Contains(replayed, `"cacheScope":"private"`) {
		t.Fatalf("the replayed list is not made private: %q", replayed)
	}
}

// TestStreamRequestAnswerMislabelled: an MCP client reads a 2xx answer to
// its GET stream request as an event stream whatever its content type, so
// on a route that filters lists an answer labelled otherwise is refused,
// not passed around the filter; a GET that is no stream request (an
// agent card, a document) passes.
func TestStreamRequestAnswerMislabelled(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	bornSession(t, f, reader, "sess-l")
	replayed := "id: ev-2\nevent: message\ndata: " + toolsResult + "\n\n"
	failure := `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`
	tests := []struct {
		name        string
		header      http.Header
		contentType string
		want        string
		notAllowed  bool // the request of a dry run's would-be denial
	}{
		{"session stream labelled text/plain", http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-l"}}, "text/plain", failure, false},
		{"session stream with no content type", http.Header{"Mcp-Session-Id": {"sess-l"}}, "", failure, false},
		{"event-stream accept, labelled JSON", http.Header{"Accept": {"text/event-stream"}}, "application/json", failure, false},
		{"event-stream accept in other case, labelled JSON", http.Header{"Accept": {"Text/Event-Stream"}}, "application/json", failure, false},
		{"event-stream accept among others, labelled JSON", http.Header{"Accept": {"application/json, text/event-stream;q=0.5"}}, "application/json", failure, false},
		{"stream named only in a parameter of the label", http.Header{"Mcp-Session-Id": {"sess-l"}}, "application/json; profile=text/event-stream", failure, false},
		{"not a stream request", http.Header{"Accept": {"application/json"}}, "application/json", replayed, false},
		// The stream of a request not allowed (a dry run's would-be
		// denial) may carry no list either.
		{"not allowed: session stream labelled text/plain", http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-l"}}, "text/plain", failure, true},
		{"not allowed: session stream with no content type", http.Header{"Mcp-Session-Id": {"sess-l"}}, "", failure, true},
		{"not allowed: not a stream request", http.Header{"Accept": {"application/json"}}, "application/json", replayed, true},
	}
	dryRun := metadataFor(t, map[string]any{"outcome": "dry_run", "route": "files", "user": "mallory"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := dryRun
			if !tt.notAllowed {
				md = getMetadata(t, f, reader, tt.header)
			}
			h := http.Header{}
			if tt.contentType != "" {
				h.Set("Content-Type", tt.contentType)
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
				Request:  envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", tt.header),
				Response: envoytest.ExtProcResponse(200, h, replayed),
			})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			if got := string(res.Downstream.Body()); got != tt.want {
				t.Fatalf("client got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
