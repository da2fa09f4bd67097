package extprocauthz_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// duplexGET is the per-route configuration of the standalone GET stream:
// response bodies in full duplex (Envoy 1.34+), trailers sent.
func duplexGET(f *fixture, t *testing.T, tok, sid string) envoytest.ExtProcConfig {
	t.Helper()
	r, _ := http.NewRequest("GET", "http://mcp.example.com/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("Mcp-Session-Id", sid)
	resp, err := f.authz.Check(context.Background(), envoytest.BuildCheckRequest(r, nil, envoytest.BuildOptions{}))
	if err != nil || resp.GetStatus().GetCode() != 0 {
		t.Fatalf("ext_authz: %v %v", resp, err)
	}
	return envoytest.ExtProcConfig{
		Mode: &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED,
			ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseTrailerMode: filterv3.ProcessingMode_SEND},
		MessageTimeout:    2 * time.Second,
		StreamIdleTimeout: 10 * time.Second,
		Metadata:          metadataOf(resp),
	}
}

// bornSession binds sid to the token's user through an initialize answer.
func bornSession(t *testing.T, f *fixture, tok, sid string) {
	t.Helper()
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	md := f.authorize(t, "mcp.example.com", tok, nil, initialize)
	res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{
		Request:  mcpRequest("mcp.example.com", initialize, nil),
		Response: jsonResponse(`{"jsonrpc":"2.0","id":0,"result":{}}`, http.Header{"Mcp-Session-Id": {sid}}),
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
}

// TestElicitationCompleteInjected: a completion for the session's user is
// injected into the session's open GET stream at an event boundary, after
// the first upstream bytes, with every upstream byte passed on; a
// completion for another user, or announced for the session by another
// replica's bus event, goes only where it belongs.
func TestElicitationCompleteInjected(t *testing.T) {
	f := newFixture(t)
	alice := token(t, "alice", nil)
	bornSession(t, f, alice, "sess-g")
	cfg := duplexGET(f, t, alice, "sess-g")
	priming := "id: p0\ndata:\n\n"
	progress := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n"
	// The upstream's first byte comes late: the completions arrive while
	// the stream is open but before it (Envoy would refuse an injection
	// then), and go out with the reply to the first chunk. That chunk
	// completes no event, so the client is at an event boundary.
	upstream := envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}},
		priming[:5], priming[5:], progress[:20], progress[20:])
	done := make(chan envoytest.ExtProcResult, 1)
	go func() {
		done <- envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{
			Request:        envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-g"}}),
			Response:       upstream,
			FirstByteDelay: time.Second,
		})
	}()
	<-f.counted.opened
	if n := f.proc.ElicitationCompleted(elicit.Pending{ID: "el-other", Subject: "mallory", Session: "sess-g"}); n != 0 {
		t.Fatalf("another user's completion reached %d streams", n)
	}
	if n := f.proc.ElicitationCompleted(elicit.Pending{ID: "el-1", Subject: "alice", Session: "sess-g"}); n != 1 {
		t.Fatalf("the completion reached %d streams, want 1", n)
	}
	if n := f.proc.HandleEvent(extprocauthz.CompletionEvent(elicit.Pending{ID: "el-2", Subject: "alice", Session: "sess-g"})); n != 1 {
		t.Fatalf("the bus event reached %d streams, want 1", n)
	}
	res := <-done
	if res.Err != nil || res.Reset {
		t.Fatalf("%v (reset %v)", res.Err, res.Reset)
	}
	want := string(mcpresponse.ElicitationCompleteEvent("el-1")) + string(mcpresponse.ElicitationCompleteEvent("el-2")) + priming + progress
	if got := string(res.Downstream.Body()); got != want {
		t.Fatalf("client got\n%q\nwant\n%q", got, want)
	}
	if strings.Contains(string(res.Downstream.Body()), "el-other") {
		t.Fatal("another user's completion was injected")
	}
	if n := f.proc.ElicitationCompleted(elicit.Pending{ID: "el-3", Subject: "alice", Session: "sess-g"}); n != 0 {
		t.Fatalf("a completion reached %d streams after the stream ended", n)
	}
}
