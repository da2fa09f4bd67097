package extprocauthz_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const secret = "extproc-test-secret-0123456789abcdef-xyz"

// fixture is the service's gRPC listener as it is served: ext_authz and
// ext_proc on one grpc.Server with the ext_authz wire codec.
type fixture struct {
	authz   *envoyauthz.Server
	conn    *grpc.ClientConn
	pl      *check.Pipeline
	sts     *ststest.Server
	counted *counter
	proc    *extprocauthz.Server
}

type counter struct {
	mu sync.Mutex
	n  map[string]int
	// opened receives a value for every stream that became injectable.
	opened chan struct{}
}

func (c *counter) ResponseProcessed(route, action string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[action]++
	if action == extprocauthz.ActionStreamOpened {
		select {
		case c.opened <- struct{}{}:
		default:
		}
	}
}

func (c *counter) get(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[action]
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, check.Options{})
}

// newFixtureWith is newFixture with the pipeline's options (an audit
// writer).
func newFixtureWith(t *testing.T, opts check.Options) *fixture {
	t.Helper()
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}}})
	doc := fmt.Sprintf(`
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: %s}
exchanges:
  - {name: sts, token_endpoint: %s, client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [corp]
    response_path: true
    rules:
      - {name: writes, methods: [tools/call], names: ["delete_*"], scopes: ["files:write"]}
      - {name: admin prompts, methods: [prompts/get], names: ["admin_*"], claims: {groups: [admins]}}
      - {name: secrets, methods: [resources/read], names: ["file:///secret/*"], scopes: ["files:admin"]}
      - {name: no questions, methods: [elicitation/create], action: deny}
      - {name: writers sample, methods: ["sampling/*"], scopes: ["files:write"]}
  - name: backend
    hosts: [backend.example.com]
    protocol: mcp
    issuers: [corp]
    response_path: true
    exchange: {sts: sts, audience: [https://backend.example.com], methods: [tools/call], authorize_url: "https://idp.example.com/authorize?client_id=backend"}
  - name: peers
    hosts: [peers.example.com]
    protocol: mcp
    issuers: [corp]
    response_path: true
    rules:
      - name: mesh agents only
        methods: ["*"]
        action: deny
        when: '!request.source.address.startsWith("10.") || request.source.principal != "spiffe://mesh/ns/a/sa/agent"'
      - {name: writes, methods: [tools/call], names: ["delete_*"], scopes: ["files:write"]}
  - name: elsewhere
    hosts: [other.example.com]
    protocol: mcp
    issuers: [corp]
    rules:
      - {name: writes, methods: [tools/call], names: ["delete_*"], scopes: ["files:write"]}
`, secret, sts.TokenURL)
	pl := pipelinetest.New(t, doc, check.Deps{Getenv: func(string) string { return "sts-secret" }, HTTPClient: sts.Client()}, opts)
	f := serve(t, pl)
	f.sts = sts
	return f
}

// serve runs ext_authz and ext_proc for pl on one gRPC server listening on
// 127.0.0.1, as Envoy reaches them, and counts what the response path does.
func serve(t *testing.T, pl *check.Pipeline) *fixture {
	t.Helper()
	c := &counter{n: map[string]int{}, opened: make(chan struct{}, 4)}
	f := &fixture{authz: envoyauthz.NewServer(pl), pl: pl, counted: c}
	f.proc = extprocauthz.NewServer(pl, extprocauthz.Options{Observer: c})
	gs := grpc.NewServer(envoyauthz.ServerOptions()...)
	envoyauthz.Register(gs, f.authz)
	extprocauthz.Register(gs, f.proc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	f.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.conn.Close() })
	return f
}

func token(t testing.TB, sub string, claims jwt.MapClaims) string {
	c := jwt.MapClaims{"sub": sub, "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix(), "scope": "files:read"}
	for k, v := range claims {
		c[k] = v
	}
	return testtoken.HMAC(t, "HS256", secret, c)
}

// authorize runs the request through ext_authz first, as Envoy does, and
// returns the metadata Envoy forwards to ext_proc (nil when denied).
func (f *fixture) authorize(t *testing.T, host, tok string, header http.Header, body string) *corev3.Metadata {
	t.Helper()
	return f.authorizeWith(t, host, tok, header, body, envoytest.BuildOptions{})
}

// authorizeWith is authorize with Envoy's view of the peer (opts' source
// address and principal).
func (f *fixture) authorizeWith(t *testing.T, host, tok string, header http.Header, body string, opts envoytest.BuildOptions) *corev3.Metadata {
	t.Helper()
	opts.WithBody, opts.MaxRequestBytes = true, 1<<20
	r, _ := http.NewRequest("POST", "http://"+host+"/mcp", strings.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Content-Type", "application/json")
	resp, err := f.authz.Check(context.Background(), envoytest.BuildCheckRequest(r, []byte(body), opts))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus().GetCode() != 0 {
		return nil
	}
	return metadataOf(resp)
}

// metadataOf is what Envoy forwards to ext_proc of an ext_authz answer.
func metadataOf(resp *authv3.CheckResponse) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpbStruct{extprocauthz.MetadataNamespace: resp.GetDynamicMetadata()}}
}

// recommended is the filter configuration docs/extproc.md ships.
func recommended(md *corev3.Metadata) envoytest.ExtProcConfig {
	return envoytest.ExtProcConfig{
		Mode:              &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_NONE, RequestTrailerMode: filterv3.ProcessingMode_SKIP, ResponseTrailerMode: filterv3.ProcessingMode_SKIP},
		AllowModeOverride: true,
		MessageTimeout:    2 * time.Second,
		Metadata:          md,
	}
}

func mcpRequest(host, body string, header http.Header) envoytest.ExtProcMessage {
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	for k, v := range header {
		h[k] = v
	}
	return envoytest.ExtProcRequest("POST", host, "/mcp", h, body)
}

const toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// toolsResult lists a read tool, a delete tool and a search tool, with a
// cursor and _meta the filter must keep.
const toolsResult = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},{"name":"delete_file","inputSchema":{"type":"object"}},{"name":"search","inputSchema":{"type":"object"}}],"nextCursor":"c2","_meta":{"k":1}}}`

const toolsFiltered = `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},{"name":"search","inputSchema":{"type":"object"}}],"nextCursor":"c2","_meta":{"k":1}}}`

// publicResult is toolsResult as the Go SDK marks lists (cacheScope
// public); whatever the caller, it comes out private.
var (
	publicResult    = strings.Replace(toolsResult, `"nextCursor"`, `"ttlMs":60000,"cacheScope":"public","nextCursor"`, 1)
	privateResult   = strings.Replace(toolsResult, `"nextCursor"`, `"ttlMs":60000,"cacheScope":"private","nextCursor"`, 1)
	privateFiltered = strings.Replace(toolsFiltered, `"nextCursor"`, `"ttlMs":60000,"cacheScope":"private","nextCursor"`, 1)
)

func jsonResponse(body string, extra http.Header) envoytest.ExtProcMessage {
	h := http.Header{"Content-Type": {"application/json"}, "Content-Length": {fmt.Sprint(len(body))}}
	for k, v := range extra {
		h[k] = v
	}
	return envoytest.ExtProcResponse(200, h, body)
}

func sseResponse(chunks ...string) envoytest.ExtProcMessage {
	return envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, chunks...)
}

// filterFailure is the error a list that cannot be filtered is replaced
// by, for toolsList.
const filterFailure = `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`

// utf16le is s encoded in UTF-16, little-endian.
func utf16le(s string) string {
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return string(b)
}

// TestListFiltering: a reader sees the tools it may call, an admin all of
// them, in JSON and in an event stream split anywhere, with everything
// else kept and content-length right.
func TestListFiltering(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	admin := token(t, "root", jwt.MapClaims{"scope": "files:read files:write"})
	event := "event: message\ndata: " + toolsResult + "\n\n"
	tests := []struct {
		name     string
		tok      string
		response envoytest.ExtProcMessage
		want     string
	}{
		{name: "json: reader", tok: reader, response: jsonResponse(toolsResult, nil), want: toolsFiltered},
		{name: "json: admin sees all", tok: admin, response: jsonResponse(toolsResult, nil), want: toolsResult},
		{name: "sse: reader, one chunk", tok: reader, response: sseResponse(event), want: "event: message\ndata: " + toolsFiltered + "\n\n"},
		{name: "sse: reader, split inside the data and the blank line", tok: reader, response: sseResponse(event[:30], event[30:len(event)-1], event[len(event)-1:]),
			want: "event: message\ndata: " + toolsFiltered + "\n\n"},
		{name: "sse: priming event then the result", tok: reader, response: sseResponse("id: p1\ndata:\n\n", event), want: "id: p1\ndata:\n\n" + "event: message\ndata: " + toolsFiltered + "\n\n"},
		{name: "json: admin's full list made private", tok: admin, response: jsonResponse(publicResult, nil), want: privateResult},
		{name: "json: reader's list made private", tok: reader, response: jsonResponse(publicResult, nil), want: privateFiltered},
		{name: "sse: admin's full list made private, split in the scope", tok: admin,
			response: sseResponse("data: "+publicResult[:len(publicResult)-8], publicResult[len(publicResult)-8:]+"\n\n"), want: "data: " + privateResult + "\n\n"},
		{name: "json: an error answer passes", tok: reader, response: jsonResponse(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`, nil),
			want: `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`},
		{name: "json: unreadable list fails closed", tok: reader, response: jsonResponse(`{"jsonrpc":"2.0","id":1,"result":{"tools":"x"}}`, nil),
			want: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`},
		{name: "json: duplicate keys fail closed", tok: reader, response: jsonResponse(`{"jsonrpc":"2.0","id":1,"result":{"tools":[],"tools":[{"name":"delete_file"}]}}`, nil),
			want: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`},
		{name: "compressed list fails closed", tok: reader, response: jsonResponse(toolsResult, http.Header{"Content-Encoding": {"gzip"}}),
			want: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`},
		{name: "compressed event stream fails closed", tok: admin,
			response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}, "Content-Encoding": {"br"}}, event),
			want:     `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`},
		// Clients that strip a byte order mark at the start of the stream
		// (WHATWG, the TypeScript SDK's TextDecoderStream) read the first
		// line as data; a reader that does not sees an unknown field.
		{name: "sse: a byte order mark before the list fails closed", tok: reader, response: sseResponse("\xEF\xBB\xBFdata: " + toolsResult + "\n\n"),
			want: "event: message\ndata: " + filterFailure + "\n\n"},
		// A lone CR ends a line for the WHATWG parser (so the filter saw
		// empty data and an unknown field), not for the Go SDK's line
		// scanner, which reads the list as the data.
		{name: "sse: a lone CR hiding the list fails closed", tok: reader, response: sseResponse("data:\r" + toolsResult + "\n\n"),
			want: "event: message\ndata: " + filterFailure + "\n\n"},
		// A client that decodes the stream by its charset (Python's
		// httpx) reads UTF-16 data lines where the filter, reading UTF-8,
		// saw none.
		{name: "sse: a UTF-16 event stream fails closed", tok: reader,
			response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream; charset=UTF-16LE"}}, utf16le("data: "+toolsResult+"\n\n")),
			want:     filterFailure},
		{name: "sse: charset utf-8 is filtered", tok: reader,
			response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {`text/event-stream; charset="utf-8"`}}, event),
			want:     "event: message\ndata: " + toolsFiltered + "\n\n"},
		{name: "json: another charset fails closed", tok: reader, response: jsonResponse(toolsResult, http.Header{"Content-Type": {"application/json; charset=iso-8859-1"}}),
			want: filterFailure},
		{name: "text/plain list fails closed", tok: reader, response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/plain"}}, toolsResult),
			want: `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := f.authorize(t, "mcp.example.com", tt.tok, nil, toolsList)
			if md == nil {
				t.Fatal("ext_authz denied")
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{Request: mcpRequest("mcp.example.com", toolsList, nil), Response: tt.response})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			got := res.Downstream.Body()
			if string(got) != tt.want {
				t.Fatalf("client got\n%s\nwant\n%s", got, tt.want)
			}
			if cl := res.Downstream.Get("content-length"); cl != "" && cl != fmt.Sprint(len(got)) {
				t.Fatalf("content-length %s for %d bytes", cl, len(got))
			}
		})
	}
}

// TestPeerReachesThePipeline: the downstream peer Envoy names to ext_proc
// (request_attributes source.address and the peer certificate's SAN) is the
// request's source, as ext_authz's Source is: rules reading it decide the
// answer's request as they decided the check.
func TestPeerReachesThePipeline(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	const agent = "spiffe://mesh/ns/a/sa/agent"
	md := f.authorizeWith(t, "peers.example.com", reader, nil, toolsList, envoytest.BuildOptions{
		SourceAddress: netip.MustParseAddrPort("10.1.2.3:5555"), SourcePrincipal: agent,
	})
	if md == nil {
		t.Fatal("ext_authz denied the mesh agent")
	}
	failure := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`
	str := structpb.NewStringValue
	tests := []struct {
		name  string
		attrs map[string]*structpb.Value
		want  string
	}{
		{name: "address and URI SAN", attrs: map[string]*structpb.Value{"source.address": str("10.1.2.3:5555"), "connection.uri_san_peer_certificate": str(agent)}, want: toolsFiltered},
		{name: "principal from the DNS SAN when no URI SAN", attrs: map[string]*structpb.Value{"source.address": str("10.1.2.3:5555"), "connection.uri_san_peer_certificate": str(""), "connection.dns_san_peer_certificate": str(agent)}, want: toolsFiltered},
		{name: "no attributes: the peer is unknown", want: failure},
		{name: "another address", attrs: map[string]*structpb.Value{"source.address": str("192.168.1.1:5555"), "connection.uri_san_peer_certificate": str(agent)}, want: failure},
		{name: "another principal", attrs: map[string]*structpb.Value{"source.address": str("10.1.2.3:5555"), "connection.uri_san_peer_certificate": str("spiffe://mesh/ns/b/sa/x")}, want: failure},
		{name: "an address that is not one", attrs: map[string]*structpb.Value{"source.address": str("10.evil"), "connection.uri_san_peer_certificate": str(agent)}, want: failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := recommended(md)
			cfg.RequestAttributes = tt.attrs
			res := envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{Request: mcpRequest("peers.example.com", toolsList, nil), Response: jsonResponse(toolsResult, nil)})
			if res.Err != nil || res.Reset {
				t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
			}
			if got := string(res.Downstream.Body()); got != tt.want {
				t.Fatalf("client got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestOtherListsFiltered: prompts, resources and templates go through the
// same rules as their calls.
func TestOtherListsFiltered(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	tests := []struct {
		method, result, want string
	}{
		{"prompts/list", `{"prompts":[{"name":"admin_report"},{"name":"summary"}]}`, `{"prompts":[{"name":"summary"}]}`},
		{"resources/list", `{"resources":[{"uri":"file:///secret/k","name":"k"},{"uri":"file:///docs/a","name":"a"}]}`, `{"resources":[{"uri":"file:///docs/a","name":"a"}]}`},
		{"resources/templates/list", `{"resourceTemplates":[{"uriTemplate":"file:///secret/{n}","name":"s"}]}`, `{"resourceTemplates":[{"uriTemplate":"file:///secret/{n}","name":"s"}]}`},
		// A skill stays only for a caller who may read every file of it.
		{"skills/list", `{"skills":[{"uri":"file:///secret/deploy/SKILL.md","name":"deploy"},{"uri":"file:///docs/hello/SKILL.md","name":"hello"}]}`, `{"skills":[{"uri":"file:///docs/hello/SKILL.md","name":"hello"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req := `{"jsonrpc":"2.0","id":5,"method":"` + tt.method + `"}`
			md := f.authorize(t, "mcp.example.com", reader, nil, req)
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
				Request:  mcpRequest("mcp.example.com", req, nil),
				Response: jsonResponse(`{"jsonrpc":"2.0","id":5,"result":`+tt.result+`}`, nil),
			})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if want := `{"jsonrpc":"2.0","id":5,"result":` + tt.want + `}`; string(res.Downstream.Body()) != want {
				t.Fatalf("got %s\nwant %s", res.Downstream.Body(), want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestNotAllowed: without ext_authz's allow (no metadata, a token never
// checked; or a denial's metadata) a list is not passed on, and nothing
// else is done for anybody.
func TestNotAllowed(t *testing.T) {
	f := newFixture(t)
	failure := `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`
	unchecked := token(t, "mallory", nil)
	noID := strings.Replace(failure, `"id":1`, `"id":null`, 1)
	bearer := http.Header{"Authorization": {"Bearer " + unchecked}}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"}}`
	callResult := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	tests := []struct {
		name     string
		md       *corev3.Metadata
		host     string
		request  *envoytest.ExtProcMessage // a tools/list POST when nil
		response *envoytest.ExtProcMessage // toolsResult as JSON when nil
		want     string
	}{
		{name: "no metadata, unchecked token", host: "mcp.example.com", want: failure},
		{name: "a list compressed", host: "mcp.example.com",
			response: ptr(jsonResponse(toolsResult, http.Header{"Content-Encoding": {"gzip"}})), want: failure},
		{name: "a list as text/plain", host: "mcp.example.com",
			response: ptr(envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/plain"}}, toolsResult)), want: failure},
		{name: "a list without a content type", host: "mcp.example.com",
			response: ptr(envoytest.ExtProcResponse(200, nil, toolsResult)), want: failure},
		{name: "a list as an event stream", host: "mcp.example.com",
			response: ptr(sseResponse("data: " + toolsResult + "\n\n")), want: failure},
		{name: "a POST without a body: the call is unknown", host: "mcp.example.com",
			request: ptr(envoytest.ExtProcRequest("POST", "mcp.example.com", "/mcp", bearer, "")), want: noID},
		{name: "a body that is not one call", host: "mcp.example.com",
			request: ptr(mcpRequest("mcp.example.com", `[`+toolsList+`]`, bearer)), want: noID},
		{name: "a call that is not a list passes", host: "mcp.example.com",
			request: ptr(mcpRequest("mcp.example.com", call, bearer)), response: ptr(jsonResponse(callResult, nil)), want: callResult},
		// A client takes a response by its id on whichever answer it
		// comes: the answer to another call may carry a list too.
		{name: "a list answering another call", host: "mcp.example.com",
			request: ptr(mcpRequest("mcp.example.com", call, bearer)), response: ptr(jsonResponse(toolsResult, nil)), want: failure},
		{name: "a list in a batch answering another call", host: "mcp.example.com",
			request: ptr(mcpRequest("mcp.example.com", call, bearer)), response: ptr(jsonResponse("["+callResult+","+toolsResult+"]", nil)), want: failure},
		{name: "an empty list answering another call passes", host: "mcp.example.com",
			request: ptr(mcpRequest("mcp.example.com", call, bearer)), response: ptr(jsonResponse(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, nil)),
			want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`},
		{name: "a list event answering another call ends the stream", host: "mcp.example.com",
			request:  ptr(mcpRequest("mcp.example.com", call, bearer)),
			response: ptr(sseResponse("data: "+callResult+"\n\n", "data: "+toolsResult+"\n\n")),
			want:     "data: " + callResult + "\n\nevent: message\ndata: " + failure + "\n\n"},
		{name: "another call's answer compressed", host: "mcp.example.com",
			request: ptr(mcpRequest("mcp.example.com", call, bearer)), response: ptr(jsonResponse(callResult, http.Header{"Content-Encoding": {"gzip"}})), want: failure},
		{name: "another call's answer as text/plain passes", host: "mcp.example.com",
			request:  ptr(mcpRequest("mcp.example.com", call, bearer)),
			response: ptr(envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/plain"}}, "hello")), want: "hello"},
		{name: "the GET stream passes", host: "mcp.example.com",
			request:  ptr(envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", bearer, "")),
			response: ptr(sseResponse("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")),
			want:     "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"},
		{name: "denial metadata", host: "mcp.example.com", md: &corev3.Metadata{FilterMetadata: map[string]*structpbStruct{
			extprocauthz.MetadataNamespace: mustStruct(t, map[string]any{"outcome": "forbidden", "route": "files", "user": "mallory"})}}, want: failure},
		{name: "an allow on a route since removed", host: "mcp.example.com", md: &corev3.Metadata{FilterMetadata: map[string]*structpbStruct{
			extprocauthz.MetadataNamespace: mustStruct(t, map[string]any{"outcome": "allowed", "route": "removed", "user": "mallory"})}}, want: failure},
		{name: "a dry run's would-be denial", host: "mcp.example.com", md: &corev3.Metadata{FilterMetadata: map[string]*structpbStruct{
			extprocauthz.MetadataNamespace: mustStruct(t, map[string]any{"outcome": "dry_run", "route": "files", "user": "mallory"})}}, want: failure},
		{name: "a route without a response path passes", host: "other.example.com", want: toolsResult},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			request, response := mcpRequest(tt.host, toolsList, bearer), jsonResponse(toolsResult, nil)
			if tt.request != nil {
				request = *tt.request
			}
			if tt.response != nil {
				response = *tt.response
			}
			res := envoytest.ExtProc(t, f.conn, recommended(tt.md), envoytest.ExtProcExchange{Request: request, Response: response})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if string(res.Downstream.Body()) != tt.want {
				t.Fatalf("got %s", res.Downstream.Body())
			}
		})
	}
	// The verdict cache: a token ext_authz allowed, with no metadata.
	reader := token(t, "alice", nil)
	if f.authorize(t, "mcp.example.com", reader, nil, toolsList) == nil {
		t.Fatal("denied")
	}
	res := envoytest.ExtProc(t, f.conn, recommended(nil), envoytest.ExtProcExchange{
		Request:  mcpRequest("mcp.example.com", toolsList, http.Header{"Authorization": {"Bearer " + reader}}),
		Response: jsonResponse(toolsResult, nil),
	})
	if res.Err != nil || string(res.Downstream.Body()) != toolsFiltered {
		t.Fatalf("verdict cache fallback: %v %s", res.Err, res.Downstream.Body())
	}
}

// TestReauthorizationOn401: an upstream 401 (or 403 insufficient_scope) to
// a call on an exchanging route becomes the in-session re-authorization
// answer with the session id kept; the next call exchanges afresh.
func TestReauthorizationOn401(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	tok := token(t, "alice", nil)
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"c","version":"1"}}}`
	// The session is born of the initialize answer, with URL elicitation.
	md := f.authorize(t, "backend.example.com", tok, nil, initialize)
	res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
		Request:  mcpRequest("backend.example.com", initialize, nil),
		Response: jsonResponse(`{"jsonrpc":"2.0","id":0,"result":{}}`, http.Header{"Mcp-Session-Id": {"sess-1"}}),
	})
	if res.Err != nil || f.counted.get(extprocauthz.ActionSessionBound) != 1 {
		t.Fatalf("initialize: %v, bound %d", res.Err, f.counted.get(extprocauthz.ActionSessionBound))
	}
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file"}}`
	sess := http.Header{"Mcp-Session-Id": {"sess-1"}}
	tests := []struct {
		name   string
		status int
		www    string
		want   string
	}{
		{"401", 401, `Bearer error="invalid_token"`, `"code":-32042`},
		{"403 insufficient_scope", 403, `Bearer error="insufficient_scope", scope="x"`, `"code":-32042`},
		{"403 otherwise passes", 403, "", `forbidden`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := f.authorize(t, "backend.example.com", tok, sess, call)
			if md == nil {
				t.Fatal("denied")
			}
			calls := f.sts.Calls()
			h := http.Header{"Content-Type": {"text/plain"}, "Mcp-Session-Id": {"sess-1"}}
			if tt.www != "" {
				h.Set("Www-Authenticate", tt.www)
			}
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
				Request:  mcpRequest("backend.example.com", call, sess),
				Response: envoytest.ExtProcResponse(tt.status, h, "forbidden"),
			})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			body := string(res.Downstream.Body())
			if !strings.Contains(body, tt.want) {
				t.Fatalf("client got %d %s", res.Downstream.Status(), body)
			}
			if tt.want == "forbidden" {
				return
			}
			if res.Downstream.Status() != 200 || res.Downstream.Get("mcp-session-id") != "sess-1" || res.Downstream.Has("www-authenticate") ||
				res.Downstream.Get("content-type") != "application/json" || !strings.Contains(body, `"id":9`) {
				t.Fatalf("re-authorization answer %v %s", res.Downstream.Headers, body)
			}
			// The next call exchanges a new token.
			if f.authorize(t, "backend.example.com", tok, sess, call) == nil {
				t.Fatal("retry denied")
			}
			if f.sts.Calls() != calls+1 {
				t.Fatalf("STS calls %d, want %d", f.sts.Calls(), calls+1)
			}
		})
	}
	_ = ctx
}

// TestSessionsBornAtBirth: the session id of an initialize answer belongs
// to its caller; another user's request with it is refused.
func TestSessionsBornAtBirth(t *testing.T) {
	f := newFixture(t)
	alice, mallory := token(t, "alice", nil), token(t, "mallory", nil)
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	md := f.authorize(t, "mcp.example.com", alice, nil, initialize)
	res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
		Request:  mcpRequest("mcp.example.com", initialize, nil),
		Response: jsonResponse(`{"jsonrpc":"2.0","id":0,"result":{}}`, http.Header{"Mcp-Session-Id": {"born-1"}}),
	})
	if res.Err != nil || res.Downstream.Get("mcp-session-id") != "born-1" {
		t.Fatalf("initialize: %v %v", res.Err, res.Downstream.Headers)
	}
	sess := http.Header{"Mcp-Session-Id": {"born-1"}}
	if f.authorize(t, "mcp.example.com", alice, sess, toolsList) == nil {
		t.Fatal("the owner is refused her session")
	}
	if f.authorize(t, "mcp.example.com", mallory, sess, toolsList) != nil {
		t.Fatal("another user got the session")
	}
	// Mallory's initialize answered with alice's id is refused, not bound.
	md = f.authorize(t, "mcp.example.com", mallory, nil, initialize)
	res = envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
		Request:  mcpRequest("mcp.example.com", initialize, nil),
		Response: jsonResponse(`{"jsonrpc":"2.0","id":0,"result":{}}`, http.Header{"Mcp-Session-Id": {"born-1"}}),
	})
	if res.Err != nil || res.Downstream.Status() != 503 || f.counted.get(extprocauthz.ActionSessionRefused) != 1 {
		t.Fatalf("a taken id: %v %d %s", res.Err, res.Downstream.Status(), res.Downstream.Body())
	}
	if got := res.Downstream.Get("mcp-session-id"); got != "" {
		t.Fatalf("the refused answer still hands mallory the session id %q", got)
	}
}

// TestTaskBound: a tools/call answer that creates a task binds it to the
// caller, in MCP 2025-11-25's shape (result.task) and the 2026-07-28 tasks
// extension's (result.resultType "task", result.taskId).
func TestTaskBound(t *testing.T) {
	for _, tc := range []struct{ name, answer string }{
		{"2025-11-25", `{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"task-1","status":"working"}}}`},
		{"2026-07-28", `{"jsonrpc":"2.0","id":4,"result":{"resultType":"task","taskId":"task-1","status":"working","ttlMs":60000}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			alice := token(t, "alice", nil)
			call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","task":{}}}`
			md := f.authorize(t, "mcp.example.com", alice, nil, call)
			res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
				Request:  mcpRequest("mcp.example.com", call, nil),
				Response: jsonResponse(tc.answer, nil),
			})
			if res.Err != nil || f.pl.TaskCount() != 1 || f.counted.get(extprocauthz.ActionTaskBound) != 1 {
				t.Fatalf("%v: %d tasks", res.Err, f.pl.TaskCount())
			}
			for _, get := range []string{
				`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"task-1"}}`,
				`{"jsonrpc":"2.0","id":6,"method":"tasks/update","params":{"taskId":"task-1","inputResponses":{}}}`,
			} {
				if f.authorize(t, "mcp.example.com", token(t, "mallory", nil), nil, get) != nil {
					t.Fatalf("another user acts on the task: %s", get)
				}
			}
		})
	}
}

// TestRequestBodyOverTheLimit: streamed to the service, a request body over
// the limit it reads is cut, so nothing it may hold (a list call, a task
// operation) is known: the answer does not pass, and no task is bound.
func TestRequestBodyOverTheLimit(t *testing.T) {
	f := newFixture(t)
	alice := token(t, "alice", nil)
	pad := func(call string) string {
		return strings.TrimSuffix(call, "}") + `,"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	}
	failure := `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}`
	streamed := recommended(nil)
	streamed.Mode.RequestBodyMode = filterv3.ProcessingMode_STREAMED
	for _, tc := range []struct{ name, call, answer string }{
		{"a list call", toolsList, toolsResult},
		{"a call creating a task", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","task":{}}}`,
			`{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"task-1","status":"working"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := envoytest.ExtProc(t, f.conn, streamed, envoytest.ExtProcExchange{
				Request:  mcpRequest("mcp.example.com", pad(tc.call), http.Header{"Authorization": {"Bearer " + alice}}),
				Response: jsonResponse(tc.answer, nil),
			})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := string(res.Downstream.Body()); got != failure {
				t.Fatalf("got %s", got)
			}
			if n := f.pl.TaskCount(); n != 0 {
				t.Fatalf("%d tasks bound from a cut body", n)
			}
		})
	}
}

// TestTaskBoundFromEventStream: a task created in an event stream's
// response is bound, wherever Envoy's frames split the stream; the
// stream passes unchanged, and events before the response (progress, a
// server request) bind nothing.
func TestTaskBoundFromEventStream(t *testing.T) {
	f := newFixture(t)
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","task":{}}}`
	stream := func(id string) string {
		return "id: p\ndata:\n\n" +
			"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"task\":{\"taskId\":\"not-this\"}}}\r\n\r\n" +
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\n" +
			"data: \"result\":{\"task\":{\"taskId\":\"" + id + "\",\"status\":\"working\"}}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{\"task\":{\"taskId\":\"nor-this\"}}}\n\n"
	}
	n := len(stream("task-000"))
	for cut := 0; cut <= n; cut++ {
		// Two frames cut at every place, and for a few a frame per byte.
		// A user per stream: each may hold only so many tasks.
		md := f.authorize(t, "mcp.example.com", token(t, fmt.Sprintf("user-%03d", cut), nil), nil, call)
		id := fmt.Sprintf("task-%03d", cut)
		body := stream(id)
		chunks := []string{body[:cut], body[cut:]}
		if cut%50 == 0 {
			chunks = strings.Split(body, "")
		}
		res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
			Request:  mcpRequest("mcp.example.com", call, nil),
			Response: sseResponse(chunks...),
		})
		if res.Err != nil || res.Reset {
			t.Fatalf("cut %d: %v (reset %v)", cut, res.Err, res.Reset)
		}
		if got := string(res.Downstream.Body()); got != body {
			t.Fatalf("cut %d: the stream changed:\n%q\nwant\n%q", cut, got, body)
		}
		if f.pl.TaskCount() != cut+1 {
			t.Fatalf("cut %d: %d tasks bound", cut, f.pl.TaskCount())
		}
	}
	// Each stream bound its response's task to its user, and nothing else.
	// (A task never seen created is one of any tool: only a token that may
	// call every tool reaches it.)
	for _, tc := range []struct {
		id, user string
		allowed  bool
	}{{"task-007", "user-008", false}, {"task-007", "user-007", true}, {"not-this", "user-008", true}, {"nor-this", "user-008", true}} {
		get := `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"` + tc.id + `"}}`
		if md := f.authorize(t, "mcp.example.com", token(t, tc.user, jwt.MapClaims{"scope": "files:read files:write"}), nil, get); (md != nil) != tc.allowed {
			t.Errorf("%s reads %s: %v, want %v", tc.user, tc.id, md != nil, tc.allowed)
		}
	}
	if got := f.counted.get(extprocauthz.ActionTaskBound); got != n+1 {
		t.Errorf("%d tasks counted bound, want %d", got, n+1)
	}
}

// TestEveryBodyMode: whatever body modes the filter is configured with,
// the processor answers every message exactly once with a reply Envoy
// accepts (never a spurious one), for every kind of exchange.
func TestEveryBodyMode(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file"}}`
	event := "event: message\ndata: " + toolsResult + "\n\n"
	taskCall := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file","task":{}}}`
	taskEvents := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"task\":{\"taskId\":\"every-mode\"}}}\n\n"
	exchanges := map[string]struct {
		body     string
		response envoytest.ExtProcMessage
	}{
		"json list":      {toolsList, jsonResponse(toolsResult, nil)},
		"sse list":       {toolsList, sseResponse(event[:17], event[17:])},
		"call":           {call, jsonResponse(`{"jsonrpc":"2.0","id":9,"result":{"content":[]}}`, nil)},
		"401":            {call, envoytest.ExtProcResponse(401, http.Header{"Www-Authenticate": {"Bearer"}}, "no")},
		"empty response": {call, envoytest.ExtProcResponse(202, nil)},
		"sse task":       {taskCall, sseResponse(taskEvents[:30], taskEvents[30:])},
	}
	modes := []filterv3.ProcessingMode_BodySendMode{
		filterv3.ProcessingMode_NONE, filterv3.ProcessingMode_BUFFERED, filterv3.ProcessingMode_STREAMED,
		filterv3.ProcessingMode_BUFFERED_PARTIAL, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED,
	}
	for name, ex := range exchanges {
		for _, reqMode := range modes {
			for _, respMode := range modes {
				for _, override := range []bool{false, true} {
					duplex := reqMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED || respMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
					t.Run(fmt.Sprintf("%s/%v/%v/override=%v", name, reqMode, respMode, override), func(t *testing.T) {
						md := f.authorize(t, "mcp.example.com", reader, nil, ex.body)
						mode := &filterv3.ProcessingMode{RequestBodyMode: reqMode, ResponseBodyMode: respMode}
						if reqMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
							mode.RequestTrailerMode = filterv3.ProcessingMode_SEND
						}
						if respMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
							mode.ResponseTrailerMode = filterv3.ProcessingMode_SEND
						}
						cfg := envoytest.ExtProcConfig{Mode: mode, AllowModeOverride: override && !duplex, MessageTimeout: 2 * time.Second, Metadata: md}
						res := envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{Request: mcpRequest("mcp.example.com", ex.body, nil), Response: ex.response})
						if res.Err != nil {
							t.Fatalf("%v (sent %d, received %d)", res.Err, len(res.Sent), len(res.Received))
						}
						// Wherever the processor gets the body, a list never
						// leaves unfiltered. (With response_body_mode NONE and
						// no allow_mode_override Envoy never sends it: the
						// configuration docs/extproc.md requires prevents that.)
						// Without the request body the call is unknown: a
						// list is refused whole.
						gets := respMode != filterv3.ProcessingMode_NONE || cfg.AllowModeOverride
						known := reqMode != filterv3.ProcessingMode_NONE
						body := res.Downstream.Body()
						if strings.HasSuffix(name, "list") && gets && bytes.Contains(body, []byte("delete_file")) {
							t.Fatalf("unfiltered: %s", body)
						}
						if strings.HasSuffix(name, "list") && gets && known != bytes.Contains(body, []byte("read_file")) {
							t.Fatalf("request body known %v, listed: %s", known, body)
						}
						if name == "sse task" && known && string(body) != taskEvents {
							t.Fatalf("the task's stream changed: %q", body)
						}
					})
				}
			}
		}
	}
}

type structpbStruct = structpb.Struct

// metadataFor is forwarded ext_authz metadata with the given fields.
func metadataFor(t *testing.T, m map[string]any) *corev3.Metadata {
	return &corev3.Metadata{FilterMetadata: map[string]*structpbStruct{extprocauthz.MetadataNamespace: mustStruct(t, m)}}
}

func mustStruct(t *testing.T, m map[string]any) *structpbStruct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOutOfOrder: a stream that breaks the protocol (request headers
// twice, a response body before its headers) is ended with an error,
// which Envoy answers by failing the request closed.
func TestOutOfOrder(t *testing.T) {
	f := newFixture(t)
	headers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte("/mcp")}}}}}}
	body := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte("x"), EndOfStream: true}}}
	for name, msgs := range map[string][]*extprocv3.ProcessingRequest{
		"request headers twice":          {headers, headers},
		"a response body before headers": {headers, body},
	} {
		t.Run(name, func(t *testing.T) {
			stream, err := extprocv3.NewExternalProcessorClient(f.conn).Process(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if err := stream.Send(m); err != nil {
					break
				}
			}
			replies := 0
			for range len(msgs) + 1 {
				if _, err = stream.Recv(); err != nil {
					break
				}
				replies++
			}
			if err == nil || err == io.EOF || replies != len(msgs)-1 {
				t.Fatalf("after %d replies: %v, want the stream failed", replies, err)
			}
		})
	}
}

// TestTaskToolRules: a task is bound with the tool its creating answer was
// for, so that the route's rules for that tool apply to the task's later
// operations: tasks/result of a delete_* task needs what tools/call of
// delete_* needs, whoever's token asks (here the creator's, down-scoped).
func TestTaskToolRules(t *testing.T) {
	f := newFixture(t)
	writer := token(t, "alice", jwt.MapClaims{"scope": "files:read files:write"})
	reader := token(t, "alice", nil) // the same user, without files:write
	create := func(tool, taskID string) {
		t.Helper()
		call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"` + tool + `","task":{}}}`
		md := f.authorize(t, "mcp.example.com", writer, nil, call)
		if md == nil {
			t.Fatalf("creating a %s task was denied", tool)
		}
		res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
			Request:  mcpRequest("mcp.example.com", call, nil),
			Response: jsonResponse(`{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"`+taskID+`","status":"working"}}}`, nil),
		})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	create("delete_old", "task-delete")
	create("read_file", "task-read")
	result := func(taskID string) string {
		return `{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"` + taskID + `"}}`
	}
	tests := []struct {
		name    string
		tok     string
		taskID  string
		allowed bool
	}{
		{"the delete task's result with files:write", writer, "task-delete", true},
		{"the delete task's result without files:write", reader, "task-delete", false},
		{"the read task's result without files:write", reader, "task-read", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.authorize(t, "mcp.example.com", tt.tok, nil, result(tt.taskID)) != nil; got != tt.allowed {
				t.Fatalf("allowed %v, want %v", got, tt.allowed)
			}
		})
	}
}

// TestPartialBodyModeNeverLeaks: with response_body_mode BUFFERED_PARTIAL a
// list larger than Envoy's buffer reaches the processor cut short and the
// rest would stream to the client unseen; the processor answers with the
// filter failure instead, so no entry the caller may not use gets out. A
// list that fits is filtered as in BUFFERED.
func TestPartialBodyModeNeverLeaks(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	event := "event: message\ndata: " + toolsResult + "\n\n"
	for name, resp := range map[string]envoytest.ExtProcMessage{
		"json": jsonResponse(toolsResult, nil),
		"sse":  sseResponse(event),
	} {
		// 64 bytes: the request fits (Envoy's buffer limit applies to it
		// too), the list does not.
		for _, limit := range []int{64, 1 << 20} {
			t.Run(fmt.Sprintf("%s/limit %d", name, limit), func(t *testing.T) {
				md := f.authorize(t, "mcp.example.com", reader, nil, toolsList)
				mode := &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_BUFFERED_PARTIAL}
				cfg := envoytest.ExtProcConfig{Mode: mode, MessageTimeout: 2 * time.Second, Metadata: md, BufferLimit: limit}
				res := envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{Request: mcpRequest("mcp.example.com", toolsList, nil), Response: resp})
				if res.Err != nil || res.Downstream.Status() != 200 {
					t.Fatalf("%v: %d %s", res.Err, res.Downstream.Status(), res.Downstream.Body())
				}
				body := res.Downstream.Body()
				if bytes.Contains(body, []byte("delete_file")) {
					t.Fatalf("unfiltered: %s", body)
				}
				if fits := limit > len(event); fits != bytes.Contains(body, []byte("read_file")) {
					t.Fatalf("fits %v, got %s", fits, body)
				}
			})
		}
	}
}

// TestRevokedUserLogsInAgain: a user revoked a moment ago who comes back
// with a token issued after the revocation gets her new session bound on
// the response path too: the forwarded identity says when the token was
// issued, so the response path judges revocation as the check did.
func TestRevokedUserLogsInAgain(t *testing.T) {
	f := newFixture(t)
	f.pl.RevokeSubject(t.Context(), "alice")
	fresh := token(t, "alice", jwt.MapClaims{"iat": time.Now().Add(2 * time.Second).Unix()})
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	md := f.authorize(t, "mcp.example.com", fresh, nil, initialize)
	if md == nil {
		t.Fatal("the check refused the token issued after the revocation")
	}
	res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
		Request:  mcpRequest("mcp.example.com", initialize, nil),
		Response: jsonResponse(`{"jsonrpc":"2.0","id":0,"result":{}}`, http.Header{"Mcp-Session-Id": {"after-revocation"}}),
	})
	if res.Err != nil || res.Downstream.Get("mcp-session-id") != "after-revocation" {
		t.Fatalf("the new session was not passed on: %v %d %v", res.Err, res.Downstream.Status(), res.Downstream.Headers)
	}
	if f.authorize(t, "mcp.example.com", fresh, http.Header{"Mcp-Session-Id": {"after-revocation"}}, toolsList) == nil {
		t.Fatal("the session was not bound at birth: her next request is refused")
	}
}
