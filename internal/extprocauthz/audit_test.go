package extprocauthz_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/extauthz/extauthz/internal/audit"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestResponseAudit: every action of the response path writes one record
// (phase response) through the checks' audit writer, with the request's
// decision id, the caller and the call, valid against the schema; an
// answer passed unchanged writes none.
func TestResponseAudit(t *testing.T) {
	out := &lockedBuffer{}
	w, err := audit.New(context.Background(), audit.Config{Sink: audit.SinkStdout, SampleAllowed: 1}, audit.Options{Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, check.Options{Audit: w})
	reader, admin := token(t, "alice", nil), token(t, "root", jwt.MapClaims{"scope": "files:read files:write"})
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"c","version":"1"}}}`
	toolCall := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file"}}`
	taskCall := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","task":{}}}`
	id := func(v string) http.Header { return http.Header{"X-Request-Id": {v}} }
	with := func(h http.Header, k, v string) http.Header { h = h.Clone(); h.Set(k, v); return h }
	type want struct {
		outcome, route, method, target string
		delivered                      bool
		status, dropped                int
	}
	steps := []struct {
		name, host, tok, body string
		header                http.Header
		response              envoytest.ExtProcMessage
		want                  *want // nil: no record
	}{
		{"list filtered", "mcp.example.com", reader, toolsList, id("r-1"), jsonResponse(toolsResult, nil),
			&want{outcome: extprocauthz.ActionFiltered, route: "files", method: "tools/list", delivered: true, status: 200, dropped: 1}},
		{"list kept whole", "mcp.example.com", admin, toolsList, id("r-2"), jsonResponse(toolsResult, nil), nil},
		{"compressed list", "mcp.example.com", reader, toolsList, id("r-3"), jsonResponse(toolsResult, http.Header{"Content-Encoding": {"gzip"}}),
			&want{outcome: extprocauthz.ActionFilterFailure, route: "files", method: "tools/list", status: 200}},
		{"session bound", "backend.example.com", reader, initialize, id("r-4"), jsonResponse(`{"jsonrpc":"2.0","id":0,"result":{}}`, http.Header{"Mcp-Session-Id": {"sess-a"}}),
			&want{outcome: extprocauthz.ActionSessionBound, route: "backend", method: "initialize", delivered: true, status: 200}},
		{"re-authorization", "backend.example.com", reader, toolCall, with(id("r-5"), "Mcp-Session-Id", "sess-a"),
			envoytest.ExtProcResponse(401, http.Header{"Content-Type": {"text/plain"}, "Www-Authenticate": {`Bearer error="invalid_token"`}}, "no"),
			&want{outcome: extprocauthz.ActionReauthorized, route: "backend", method: "tools/call", target: "read_file", status: 200}},
		{"task bound", "mcp.example.com", reader, taskCall, id("r-6"), jsonResponse(`{"jsonrpc":"2.0","id":4,"result":{"task":{"taskId":"task-1","status":"working"}}}`, nil),
			&want{outcome: extprocauthz.ActionTaskBound, route: "files", method: "tools/call", target: "read_file", delivered: true, status: 200}},
		{"server's request dropped", "mcp.example.com", reader, toolCall, id("r-7"), sseResponse(elicitEvent + samplingEvent + callDoneEvent),
			&want{outcome: extprocauthz.ActionRequestDropped, route: "files", method: "tools/call", target: "read_file", delivered: true, status: 200, dropped: 2}},
		{"server's request as a JSON answer", "mcp.example.com", reader, toolCall, id("r-8"), jsonResponse(`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{}}`, nil),
			&want{outcome: extprocauthz.ActionRequestDropped, route: "files", method: "tools/call", target: "read_file", status: 200, dropped: 1}},
	}
	for _, s := range steps {
		md := f.authorize(t, s.host, s.tok, s.header, s.body)
		if md == nil {
			t.Fatalf("%s: ext_authz denied", s.name)
		}
		res := envoytest.ExtProc(t, f.conn, recommended(md), envoytest.ExtProcExchange{Request: mcpRequest(s.host, s.body, s.header), Response: s.response})
		if res.Err != nil {
			t.Fatalf("%s: %v", s.name, res.Err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	schema := responseAuditSchema(t)
	got := map[string]audit.Record{}
	sc := bufio.NewScanner(bytes.NewReader(out.b.Bytes()))
	for sc.Scan() {
		var raw any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(raw); err != nil {
			t.Errorf("record does not match the schema: %v\n%s", err, sc.Bytes())
		}
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Phase == "" {
			continue // the check's own record
		}
		if _, dup := got[r.DecisionID]; dup || r.Phase != audit.PhaseResponse {
			t.Errorf("a second or odd response record: %s", sc.Bytes())
		}
		got[r.DecisionID] = r
	}
	for _, s := range steps {
		rid := s.header.Get("X-Request-Id")
		r, ok := got[rid]
		t.Run(s.name, func(t *testing.T) {
			if s.want == nil {
				if ok {
					t.Fatalf("a record for an answer passed unchanged: %+v", r)
				}
				return
			}
			w := s.want
			if !ok {
				t.Fatal("no record")
			}
			if r.Outcome != w.outcome || r.Route != w.route || r.Method != w.method || r.Target != w.target ||
				r.Allowed != w.delivered || r.Status != w.status || r.Dropped != w.dropped ||
				r.Subject == "" || r.Issuer != "corp" || r.Protocol != "mcp" || r.Time.IsZero() {
				t.Errorf("record %+v, want %+v", r, *w)
			}
			if !w.delivered && r.Reason == "" {
				t.Error("a replaced answer without its reason")
			}
		})
	}
}

func responseAuditSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	b, err := os.ReadFile("../../docs/audit.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
