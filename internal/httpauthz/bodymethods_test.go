package httpauthz

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestBodyMethodsWithoutTheirBody: forward-auth proxies send the check no
// body and no Content-Length (nginx clears it, Caddy asks with a GET), so a
// request of a method that carries a body is judged without it. On a route
// with rules that is refused for every such method, not for POST alone: an
// upstream that runs JSON-RPC whatever the method acts on a PUT's call.
// The bodiless methods pass.
func TestBodyMethodsWithoutTheirBody(t *testing.T) {
	for _, conv := range []Convention{Nginx, Forwarded} {
		srv := serve(t, Options{Convention: conv, Now: now})
		tok := token(t, nil)
		for _, tc := range []struct {
			method string
			want   int
		}{
			{"POST", http.StatusBadRequest},
			{"PUT", http.StatusBadRequest},
			{"PATCH", http.StatusBadRequest},
			{"patch", http.StatusBadRequest},
			{"QUERY", http.StatusBadRequest},
			{"PROPFIND", http.StatusBadRequest},
			{"GET", http.StatusOK},
			{"DELETE", http.StatusOK},
			{"OPTIONS", http.StatusOK},
			{"HEAD", http.StatusOK},
		} {
			t.Run(conv.String()+"/"+tc.method, func(t *testing.T) {
				h := http.Header{"Authorization": {"Bearer " + tok}, "Content-Type": {"application/json"},
					"X-Forwarded-Host": {"files.example.com"}}
				if conv == Nginx {
					h["X-Original-Method"], h["X-Original-Uri"] = []string{tc.method}, []string{"/mcp"}
				} else {
					h["X-Forwarded-Method"], h["X-Forwarded-Uri"] = []string{tc.method}, []string{"/mcp"}
				}
				res := ask{path: "/check", host: "extauthz", header: h}.do(t, srv)
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != tc.want {
					t.Fatalf("%s: %d %s, want %d", tc.method, res.StatusCode, b, tc.want)
				}
				if tc.want == http.StatusBadRequest && !strings.Contains(string(b), "-32600") && res.Header.Get("X-Extauthz-Answer") == "" {
					t.Errorf("a refusal names neither its JSON-RPC error nor its answer: %s", b)
				}
			})
		}
	}
}
