package extprocauthz_test

import (
	"context"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

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
// server may answer on it too.
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
