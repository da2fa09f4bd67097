package httpauthz

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testclock"
)

// TestAnswerFetch: a refused check names its full answer; the proxy fetches
// it once and gets exactly what Envoy would have answered.
func TestAnswerFetch(t *testing.T) {
	tok := token(t, nil)
	expired := token(t, jwt.MapClaims{"exp": t0.Add(-time.Hour).Unix()})
	nginx := func(uri string, h http.Header) ask {
		hdr := http.Header{"X-Original-Uri": {uri}, "X-Forwarded-Host": {"files.example.com:8080"}, "X-Forwarded-Proto": {"http"}}
		for k, v := range h {
			hdr[k] = v
		}
		return ask{method: "POST", path: "/check", header: hdr, body: echoCall}
	}
	tests := []struct {
		name string
		ask  ask
		// checkStatus is what the proxy sees; status, headers and body what
		// the fetch returns.
		checkStatus, status int
		headers             map[string]string
		body                string
	}{
		{
			name:        "protected resource metadata",
			ask:         ask{path: "/check", header: http.Header{"X-Original-Uri": {"/.well-known/oauth-protected-resource/mcp"}, "X-Forwarded-Host": {"files.example.com:8080"}}},
			checkStatus: 403, status: 200,
			headers: map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=300"},
			body:    `{"resource":"http://files.example.com:8080/mcp","scopes_supported":["files:read"],"bearer_methods_supported":["header"],"dpop_signing_alg_values_supported":["ES256","ES384","ES512","EdDSA","PS256","PS384","PS512","RS256","RS384","RS512"]}`,
		},
		{
			name:        "expired token: 401 with the challenge and the JSON-RPC error",
			ask:         nginx("/mcp", http.Header{"Authorization": {"Bearer " + expired}}),
			checkStatus: 401, status: 401,
			headers: map[string]string{"Www-Authenticate": `Bearer error="invalid_token", error_description="token is expired", scope="files:read", resource_metadata="http://files.example.com:8080/.well-known/oauth-protected-resource/mcp"`},
			body:    `"id":8`,
		},
		{
			// nginx never sets X-Forwarded-Port: behind it, it is a client's.
			name:        "a client's X-Forwarded-Port is ignored",
			ask:         nginx("/mcp", http.Header{"X-Forwarded-Port": {"6666"}}),
			checkStatus: 401, status: 401,
			headers: map[string]string{"Www-Authenticate": `Bearer scope="files:read", resource_metadata="http://files.example.com:8080/.well-known/oauth-protected-resource/mcp"`},
			body:    `"error":"missing_token"`,
		},
		{
			name:        "malformed call: 400 with the JSON-RPC error nginx would turn into 500",
			ask:         ask{method: "POST", path: "/check", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"},"method":"x"}`, header: http.Header{"X-Original-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"}, "Authorization": {"Bearer " + tok}}},
			checkStatus: 400, status: 400,
			headers: map[string]string{"Content-Type": "application/json"},
			body:    `"jsonrpc":"2.0"`,
		},
		{
			name:        "a request the handler refuses itself",
			ask:         ask{path: "/check"},
			checkStatus: 400, status: 400,
			headers: map[string]string{"Content-Type": "application/json"},
			body:    "X-Original-URI",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, Options{Convention: Nginx})
			res := tt.ask.do(t, srv)
			readAll(t, res.Body)
			if res.StatusCode != tt.checkStatus {
				t.Fatalf("check status %d, want %d", res.StatusCode, tt.checkStatus)
			}
			if ch := res.Header.Get("Www-Authenticate"); ch != "" {
				// nginx would send it next to the fetched answer's.
				t.Errorf("the nginx check answer carries the challenge %q", ch)
			}
			id := res.Header.Get(AnswerHeader)
			if len(id) < 26 {
				t.Fatalf("%s = %q: not an unguessable id", AnswerHeader, id)
			}
			got := ask{path: AnswerPath + id}.do(t, srv)
			body := readAll(t, got.Body)
			if got.StatusCode != tt.status {
				t.Fatalf("fetched status %d, want %d: %s", got.StatusCode, tt.status, body)
			}
			for k, v := range tt.headers {
				if g := got.Header.Values(k); len(g) != 1 || g[0] != v {
					t.Errorf("fetched %s = %q, want %q", k, g, v)
				}
			}
			for _, k := range []string{AnswerHeader, RemoveHeader} {
				if v := got.Header.Get(k); v != "" {
					t.Errorf("fetched answer leaks %s: %q", k, v)
				}
			}
			if !json.Valid([]byte(body)) || !strings.Contains(body, tt.body) {
				t.Errorf("fetched body %s, want %s", body, tt.body)
			}
			again := ask{path: AnswerPath + id}.do(t, srv)
			readAll(t, again.Body)
			if again.StatusCode != http.StatusServiceUnavailable || again.Header.Get("Retry-After") == "" {
				t.Errorf("second fetch: %d, want 503 with Retry-After (one fetch only)", again.StatusCode)
			}
		})
	}
}

// TestAnswerFetchRefusals: answers are for trusted proxies, expire, are
// bounded, and a miss is never a 2xx.
func TestAnswerFetchRefusals(t *testing.T) {
	metadata := ask{path: "/check", header: http.Header{"X-Original-Uri": {"/.well-known/oauth-protected-resource/mcp"}, "X-Forwarded-Host": {"files.example.com"}}}
	newServer := func(t *testing.T, o Options) *httptest.Server {
		o.Convention = Nginx
		return serve(t, o)
	}
	t.Run("unknown id", func(t *testing.T) {
		srv := newServer(t, Options{})
		res := ask{path: AnswerPath + "AAAAAAAAAAAAAAAAAAAAAAAAAA"}.do(t, srv)
		readAll(t, res.Body)
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", res.StatusCode)
		}
	})
	t.Run("expired", func(t *testing.T) {
		clock := testclock.New(t0)
		srv := newServer(t, Options{Now: clock.Now, AnswerTTL: time.Second})
		res := metadata.do(t, srv)
		clock.Advance(2 * time.Second)
		got := ask{path: AnswerPath + res.Header.Get(AnswerHeader)}.do(t, srv)
		readAll(t, got.Body)
		if got.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503", got.StatusCode)
		}
	})
	t.Run("bounded: the oldest goes first", func(t *testing.T) {
		srv := newServer(t, Options{MaxAnswers: 2})
		var ids []string
		for range 3 {
			ids = append(ids, metadata.do(t, srv).Header.Get(AnswerHeader))
		}
		for i, id := range ids {
			res := ask{path: AnswerPath + id}.do(t, srv)
			readAll(t, res.Body)
			if want := map[bool]int{true: 503, false: 200}[i == 0]; res.StatusCode != want {
				t.Errorf("answer %d: status %d, want %d", i, res.StatusCode, want)
			}
		}
	})
	t.Run("untrusted peers get no answer id and cannot fetch", func(t *testing.T) {
		srv := newServer(t, Options{TrustedProxies: []netip.Prefix{}})
		res := metadata.do(t, srv)
		readAll(t, res.Body)
		if id := res.Header.Get(AnswerHeader); id != "" {
			t.Errorf("an untrusted peer got an answer id")
		}
		if res.StatusCode/100 == 2 {
			t.Errorf("status %d", res.StatusCode)
		}
	})
	t.Run("the envoy convention has no answer path", func(t *testing.T) {
		srv := serve(t, Options{Convention: Envoy})
		res := ask{path: AnswerPath + "x", host: "files.example.com"}.do(t, srv)
		readAll(t, res.Body)
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %d, want the check's 401", res.StatusCode)
		}
	})
}
