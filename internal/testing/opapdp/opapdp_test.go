package opapdp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/opapdp"
)

const policy = `package authzen

default allow := false

allow if {
	input.subject.id == "alice"
	input.action.name == "tools/call"
}

# A non-boolean result for one resource: the adapter must not turn it into a
# decision.
allow := "yes" if input.resource.id == "odd"
`

func start(t *testing.T) *opapdp.PDP {
	t.Helper()
	p, err := opapdp.Start(context.Background(), policy, "data.authzen.allow")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestEvaluation(t *testing.T) {
	p := start(t)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		wantBody   string
	}{
		{"allowed", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"alice"},"action":{"name":"tools/call"},"resource":{"type":"tool","id":"refund"}}`,
			200, `{"decision":true}`},
		{"denied by default", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"bob"},"action":{"name":"tools/call"},"resource":{"type":"tool","id":"refund"}}`,
			200, `{"decision":false}`},
		{"context passes through", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"bob","properties":{"n":1e400}},"action":{"name":"tools/list"},"resource":{"type":"tool","id":"x"},"context":{"a":[1,2]}}`,
			200, `{"decision":false}`},
		{"non-boolean result is a failure", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"bob"},"action":{"name":"tools/call"},"resource":{"type":"tool","id":"odd"}}`,
			500, ""},
		{"not JSON", "POST", opapdp.Path, `{"subject":`, 400, ""},
		{"trailing data", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"a"},"action":{"name":"x"},"resource":{"type":"t","id":"r"}} {}`, 400, ""},
		{"array", "POST", opapdp.Path, `[]`, 400, ""},
		{"no subject", "POST", opapdp.Path, `{"action":{"name":"x"},"resource":{"type":"t","id":"r"}}`, 400, ""},
		{"subject without id", "POST", opapdp.Path,
			`{"subject":{"type":"user"},"action":{"name":"x"},"resource":{"type":"t","id":"r"}}`, 400, ""},
		{"subject id not a string", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":7},"action":{"name":"x"},"resource":{"type":"t","id":"r"}}`, 400, ""},
		{"action without name", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"a"},"action":{},"resource":{"type":"t","id":"r"}}`, 400, ""},
		{"names differ in case", "POST", opapdp.Path,
			`{"Subject":{"type":"user","id":"alice"},"action":{"name":"tools/call"},"resource":{"type":"tool","id":"refund"}}`, 400, ""},
		{"context not an object", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"alice"},"action":{"name":"tools/call"},"resource":{"type":"tool","id":"refund"},"context":[]}`, 400, ""},
		{"resource null", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"a"},"action":{"name":"x"},"resource":null}`, 400, ""},
		{"too large", "POST", opapdp.Path,
			`{"subject":{"type":"user","id":"` + strings.Repeat("a", 2<<20) + `"},"action":{"name":"x"},"resource":{"type":"t","id":"r"}}`, 400, ""},
		{"GET", "GET", opapdp.Path, "", 405, ""},
		{"other path", "POST", "/access/v1/evaluations", `{}`, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, p.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := p.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantBody != "" && strings.TrimSpace(string(body)) != tt.wantBody {
				t.Fatalf("body %s, want %s", body, tt.wantBody)
			}
		})
	}
}

func TestFaults(t *testing.T) {
	p := start(t)
	ok := `{"subject":{"type":"user","id":"alice"},"action":{"name":"tools/call"},"resource":{"type":"tool","id":"r"}}`
	post := func() (int, string) {
		resp, err := p.Client().Post(p.Endpoint(), "application/json", strings.NewReader(ok))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	p.Status.Store(503)
	if s, _ := post(); s != 503 {
		t.Fatalf("status %d, want 503", s)
	}
	p.Status.Store(0)
	garbage := "not json"
	p.Body.Store(&garbage)
	if s, b := post(); s != 200 || b != garbage {
		t.Fatalf("got %d %q, want the garbage verbatim", s, b)
	}
	p.Body.Store(nil)
	s, b := post()
	var d struct{ Decision bool }
	if s != 200 || json.Unmarshal([]byte(b), &d) != nil || !d.Decision {
		t.Fatalf("got %d %q after faults cleared, want an allow", s, b)
	}
	if n := p.Calls.Load(); n != 3 {
		t.Fatalf("Calls = %d, want 3", n)
	}
}

func TestStartRejectsBrokenPolicy(t *testing.T) {
	for name, module := range map[string]string{
		"syntax":          "package authzen\nallow if {",
		"unsafe variable": "package authzen\nallow if { x == 1 }",
	} {
		t.Run(name, func(t *testing.T) {
			if p, err := opapdp.Start(context.Background(), module, "data.authzen.allow"); err == nil {
				p.Close()
				t.Fatal("a broken policy started")
			}
		})
	}
}

// FuzzEvaluation: whatever a request carries, the adapter answers a
// decision, 400 or 500, and a decision only for a well-formed request.
func FuzzEvaluation(f *testing.F) {
	for _, s := range []string{
		`{"subject":{"type":"user","id":"alice"},"action":{"name":"tools/call"},"resource":{"type":"tool","id":"refund"}}`,
		`{"subject":{"type":"user","id":"bob"},"action":{"name":"x"},"resource":{"type":"tool","id":"odd"},"context":{"n":1e999}}`,
		`{"subject":null}`, `[]`, `"x"`, ``, `{"subject":{"type":"user","id":"a"},"action":{"name":"x"},"resource":{"type":"t","id":"r"}}x`,
	} {
		f.Add(s)
	}
	p, err := opapdp.Start(context.Background(), policy, "data.authzen.allow")
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	f.Fuzz(func(t *testing.T, body string) {
		w := httptest.NewRecorder()
		p.Config.Handler.ServeHTTP(w, httptest.NewRequest("POST", opapdp.Path, strings.NewReader(body)))
		switch w.Code {
		case 200:
			var d struct{ Decision *bool }
			if json.Unmarshal(w.Body.Bytes(), &d) != nil || d.Decision == nil {
				t.Fatalf("200 without a decision: %s", w.Body)
			}
			var shape map[string]any
			if json.Unmarshal([]byte(body), &shape) != nil || !isString(member(shape, "subject", "id")) || !isString(member(shape, "action", "name")) {
				t.Fatalf("decided a malformed request %q", body)
			}
		case 400, 500:
		default:
			t.Fatalf("status %d", w.Code)
		}
	})
}

func member(v map[string]any, entity, name string) any {
	e, _ := v[entity].(map[string]any)
	return e[name]
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}
