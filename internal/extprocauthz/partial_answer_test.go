package extprocauthz_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// TestPartialBodyModeNeverLeaksOtherAnswers: TestPartialBodyModeNeverLeaks
// for the answers that are read whole for the lists they carry although
// their call is no list (a tools/call's JSON answer carrying the held-back
// tools/list response, TestListUnderAnotherCallsAnswer), and for the answer
// to a request ext_authz did not allow (read for lists by shape). Under
// BUFFERED_PARTIAL a body larger than Envoy's buffer arrives cut, and the
// rest streams to the client unseen: nothing of a list the caller may not
// use may get out.
func TestPartialBodyModeNeverLeaksOtherAnswers(t *testing.T) {
	f := newFixture(t)
	reader := token(t, "alice", nil)
	for _, tc := range []struct {
		name    string
		allowed bool
		call    string
	}{
		{"an allowed tools/call answered with the list", true, readCall},
		{"a tools/call ext_authz did not allow, answered with the list", false, readCall},
	} {
		for _, limit := range []int{len(readCall) + 8, 1 << 20} {
			t.Run(fmt.Sprintf("%s/limit %d", tc.name, limit), func(t *testing.T) {
				var md = f.authorize(t, "mcp.example.com", reader, nil, tc.call)
				if md == nil {
					t.Fatal("ext_authz denied")
				}
				if !tc.allowed {
					md = nil // no identity forwarded: a dry run, or ext_authz failing open
				}
				mode := &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_BUFFERED_PARTIAL}
				cfg := envoytest.ExtProcConfig{Mode: mode, MessageTimeout: 2 * time.Second, Metadata: md, BufferLimit: limit}
				res := envoytest.ExtProc(t, f.conn, cfg, envoytest.ExtProcExchange{Request: mcpRequest("mcp.example.com", tc.call, nil), Response: jsonResponse(toolsResult, nil)})
				if res.Err != nil || res.Reset {
					t.Fatalf("protocol: %v (reset %v)", res.Err, res.Reset)
				}
				body := res.Downstream.Body()
				if bytes.Contains(body, []byte("delete_file")) {
					t.Fatalf("a tool the caller may not use reaches the client: %q", body)
				}
				if limit < len(toolsResult) && (!bytes.Contains(body, []byte(`"error"`)) || !bytes.Contains(body, []byte(`"id":`))) {
					t.Errorf("the cut answer is not replaced by a JSON-RPC error for the call: %q", body)
				}
			})
		}
	}
}
