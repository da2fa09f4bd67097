package httpauthz

import (
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

const (
	deleteCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc"}}}`
	echoCall   = `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
)

// TestConventions drives the handler the way each proxy calls it.
func TestConventions(t *testing.T) {
	tok := token(t, nil)
	noScope := token(t, jwt.MapClaims{"scope": nil})
	expired := token(t, jwt.MapClaims{"exp": t0.Add(-time.Hour).Unix()})
	noSession := token(t, jwt.MapClaims{"session_id": nil})
	bearer := func(tok string) string { return "Bearer " + tok }
	untrusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}

	tests := []struct {
		name   string
		opts   Options
		ask    ask
		status int
		// headers must be in the answer with these values; "" means absent.
		headers map[string]string
		remove  []string // must be listed in RemoveHeader
		body    string   // substring of the body
		golden  string   // testdata/golden file name
	}{
		// nginx auth_request.
		{
			name: "nginx: identity and lineage in the answer, forgeries listed for removal",
			ask: ask{path: "/check", header: http.Header{
				"X-Original-Uri": {"/mcp"}, "X-Original-Method": {"GET"}, "X-Forwarded-Host": {"files.example.com"},
				"X-Forwarded-Proto": {"https"}, "Authorization": {bearer(tok)},
				"X-User-Id": {"mallory"}, "X-Parent-Context-Id": {"forged"},
			}},
			status:  200,
			headers: map[string]string{"X-User-Id": "alice", "X-Session-Id": "sess-42", "X-Root-Context-Id": "sess-42", "X-Lineage-Depth": "0", "X-Parent-Context-Id": ""},
			remove:  []string{"authorization", "x-parent-context-id"},
			golden:  "nginx-allowed.txt",
		},
		{
			name: "nginx: the auth subrequest keeps the original method",
			ask: ask{method: "POST", path: "/check", header: http.Header{
				"X-Original-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"}, "Authorization": {bearer(tok)},
			}},
			status: 400,
			body:   "Mcp-Method",
		},
		{
			name: "nginx: host from Host without X-Forwarded-Host",
			ask: ask{path: "/check", host: "files.example.com", header: http.Header{
				"X-Original-Uri": {"/mcp"}, "Authorization": {bearer(noScope)},
			}},
			status:  403,
			headers: map[string]string{"X-User-Id": ""},
			body:    "insufficient_scope",
		},
		{
			name: "nginx: missing token gets the challenge",
			ask: ask{path: "/check", header: http.Header{
				"X-Original-Uri": {"/mcp"}, "X-Original-Method": {"GET"}, "X-Forwarded-Host": {"files.example.com"}, "X-Forwarded-Proto": {"https"},
			}},
			status:  401,
			headers: map[string]string{"Www-Authenticate": `Bearer scope="files:read", resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp"`},
			golden:  "nginx-missing-token.txt",
		},
		{
			name: "nginx: expired token",
			ask: ask{path: "/check", header: http.Header{
				"X-Original-Uri": {"/a2a"}, "X-Forwarded-Host": {"agent.example.com"}, "Authorization": {bearer(expired)},
			}},
			status: 401,
			body:   "token is expired",
		},
		{
			name: "nginx: forged identity without a session claim",
			ask: ask{path: "/check", header: http.Header{
				"X-Original-Uri": {"/a2a"}, "X-Forwarded-Host": {"agent.example.com"}, "Authorization": {bearer(noSession)},
				"X-User-Id": {"mallory"}, "X-Session-Id": {"evil"},
			}},
			status:  200,
			headers: map[string]string{"X-User-Id": "alice", "X-Session-Id": ""},
			remove:  []string{"x-session-id", "authorization"},
		},
		{
			name: "ingress-nginx: X-Original-URL",
			ask: ask{path: "/check", header: http.Header{
				"X-Original-Url": {"https://files.example.com/mcp?x=1"}, "X-Original-Method": {"GET"}, "Authorization": {bearer(noScope)},
			}},
			status:  403,
			headers: map[string]string{"Www-Authenticate": `Bearer error="insufficient_scope", error_description="the token lacks a required scope", scope="files:read", resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp"`},
		},

		// Traefik ForwardAuth (forwardBody) and Caddy forward_auth.
		{
			name: "traefik: forwarded body with a denied tool",
			ask: ask{path: "/", body: deleteCall, header: http.Header{
				"X-Forwarded-Method": {"POST"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"X-Forwarded-Proto": {"https"}, "Authorization": {bearer(tok)}, "Content-Type": {"application/json"},
			}},
			status: 403,
			body:   `"id":7`,
			golden: "traefik-denied-tool.txt",
		},
		{
			name: "traefik: forwarded body with an allowed tool",
			ask: ask{path: "/", body: echoCall, header: http.Header{
				"X-Forwarded-Method": {"POST"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"Authorization": {bearer(tok)},
			}},
			status:  200,
			headers: map[string]string{"X-User-Id": "alice"},
		},
		{
			name: "caddy: Mcp-Method and Mcp-Name name a denied tool",
			ask: ask{path: "/", header: http.Header{
				"X-Forwarded-Method": {"POST"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"Mcp-Method": {"tools/call"}, "Mcp-Name": {"delete_file"}, "Authorization": {bearer(tok)},
			}},
			status: 403,
			body:   "forbidden",
		},
		{
			// The headers are the client's claim; the upstream does not
			// check them against the body on this route.
			name: "caddy: Mcp-Method and Mcp-Name alone never allow on a route with rules",
			ask: ask{path: "/", header: http.Header{
				"X-Forwarded-Method": {"POST"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}, "Authorization": {bearer(tok)},
			}},
			status:  400,
			headers: map[string]string{"X-User-Id": ""},
			body:    "upstream_validates_mcp_headers",
		},
		{
			name: "caddy: Mcp-Method and Mcp-Name allow where the upstream checks them",
			ask: ask{path: "/", header: http.Header{
				"X-Forwarded-Method": {"POST"}, "X-Forwarded-Uri": {"/validated"}, "X-Forwarded-Host": {"files.example.com"},
				"Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}, "Mcp-Protocol-Version": {"2026-07-28"}, "Authorization": {bearer(tok)},
			}},
			status:  200,
			headers: map[string]string{"X-User-Id": "alice"},
		},
		{
			name: "forwarded: X-Forwarded-Port keeps the port in the challenge",
			opts: Options{Convention: Forwarded},
			ask: ask{path: "/", header: http.Header{
				"X-Forwarded-Method": {"GET"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"X-Forwarded-Proto": {"https"}, "X-Forwarded-Port": {"8443"},
			}},
			status:  401,
			headers: map[string]string{"Www-Authenticate": `Bearer scope="files:read", resource_metadata="https://files.example.com:8443/.well-known/oauth-protected-resource/mcp"`},
		},
		{
			name: "forwarded: a port in X-Forwarded-Host wins over X-Forwarded-Port",
			opts: Options{Convention: Forwarded},
			ask: ask{path: "/", header: http.Header{
				"X-Forwarded-Method": {"GET"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com:9000"}, "X-Forwarded-Port": {"8443"},
			}},
			status:  401,
			headers: map[string]string{"Www-Authenticate": `Bearer scope="files:read", resource_metadata="http://files.example.com:9000/.well-known/oauth-protected-resource/mcp"`},
		},
		{
			name: "forwarded: the default port is left out",
			opts: Options{Convention: Forwarded},
			ask: ask{path: "/check", header: http.Header{
				"X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Port": {"443"},
			}},
			status:  401,
			headers: map[string]string{"Www-Authenticate": `Bearer scope="files:read", resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp"`},
		},
		{
			name:   "a malformed X-Forwarded-Port is refused",
			opts:   Options{Convention: Forwarded},
			ask:    ask{path: "/", header: http.Header{"X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"}, "X-Forwarded-Port": {"80x"}}},
			status: 400,
			body:   "X-Forwarded-Port",
		},
		{
			// Traefik's forwardBody sends the whole body or refuses; only
			// Envoy marks a body partial.
			name: "traefik: a client's X-Envoy-Auth-Partial-Body does not switch off the body",
			opts: Options{Convention: Forwarded},
			ask: ask{path: "/", body: deleteCall, header: http.Header{
				"X-Forwarded-Method": {"POST"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}, "Authorization": {bearer(tok)}, "X-Envoy-Auth-Partial-Body": {"true"},
			}},
			status: 400,
			body:   "Mcp-Name header does not match the body",
		},
		{
			name: "envoy: X-Envoy-Auth-Partial-Body from an untrusted peer is ignored",
			opts: Options{PathPrefix: "/authz", TrustedProxies: []netip.Prefix{}},
			ask: ask{method: "POST", path: "/authz/mcp", host: "files.example.com", body: deleteCall,
				header: http.Header{"Authorization": {bearer(tok)}, "X-Envoy-Auth-Partial-Body": {"true"}}},
			status: 403,
			body:   `"id":7`,
		},
		{
			name: "caddy: a POST nobody can name fails closed on a route with rules",
			ask: ask{path: "/", header: http.Header{
				"X-Forwarded-Method": {"POST"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"}, "Authorization": {bearer(tok)},
			}},
			status: 400,
		},

		// Envoy http_service: the request itself.
		{
			name:   "envoy: path prefix stripped, body read",
			opts:   Options{PathPrefix: "/authz"},
			ask:    ask{method: "POST", path: "/authz/mcp", host: "files.example.com", body: deleteCall, header: http.Header{"Authorization": {bearer(tok)}}},
			status: 403,
			body:   `"id":7`,
		},
		{
			name:    "envoy: allowed tool",
			opts:    Options{PathPrefix: "/authz/"},
			ask:     ask{method: "POST", path: "/authz/mcp", host: "files.example.com", body: echoCall, header: http.Header{"Authorization": {bearer(tok)}}},
			status:  200,
			headers: map[string]string{"X-User-Id": "alice", "X-Session-Id": "sess-42"},
		},
		{
			name:    "envoy: a path that only starts like the prefix is kept",
			opts:    Options{PathPrefix: "authz"},
			ask:     ask{path: "/authzpublic/x", host: "agent.example.com"},
			status:  401,
			headers: map[string]string{"Www-Authenticate": `Bearer resource_metadata="http://agent.example.com/.well-known/oauth-protected-resource"`},
		},
		{
			name:    "untrusted peer: X-Forwarded-Proto is ignored",
			opts:    Options{TrustedProxies: []netip.Prefix{}},
			ask:     ask{path: "/a2a", host: "agent.example.com", header: http.Header{"X-Forwarded-Proto": {"https"}}},
			status:  401,
			headers: map[string]string{"Www-Authenticate": `Bearer resource_metadata="http://agent.example.com/.well-known/oauth-protected-resource"`},
		},
		{
			name: "envoy: a partial body is not trusted",
			opts: Options{PathPrefix: "/authz"},
			ask: ask{method: "POST", path: "/authz/mcp", host: "files.example.com", body: echoCall,
				header: http.Header{"Authorization": {bearer(tok)}, "X-Envoy-Auth-Partial-Body": {"true"}}},
			status: 400,
			body:   "max_request_bytes",
		},
		{
			name:   "a body over the limit is partial",
			opts:   Options{MaxBodyBytes: 16},
			ask:    ask{method: "POST", path: "/mcp", host: "files.example.com", body: echoCall, header: http.Header{"Authorization": {bearer(tok)}}},
			status: 400,
			body:   "max_request_bytes",
		},
		{
			name:   "a negative limit never reads the body",
			opts:   Options{MaxBodyBytes: -1},
			ask:    ask{method: "POST", path: "/mcp", host: "files.example.com", body: echoCall, header: http.Header{"Authorization": {bearer(tok)}}},
			status: 400,
		},
		{
			name:    "envoy: public path strips every owned header",
			opts:    Options{PathPrefix: "/authz"},
			ask:     ask{path: "/authz/public/x?y=1", host: "agent.example.com", header: http.Header{"X-User-Id": {"mallory"}}},
			status:  200,
			headers: map[string]string{"X-User-Id": ""},
			remove:  []string{"x-user-id", "x-session-id", "authorization"},
		},

		// Trust.
		{
			name:   "trusted peer: forwarding headers describe the request",
			ask:    ask{path: "/a2a", header: http.Header{"X-Forwarded-Uri": {"/public/x"}}},
			status: 200,
		},
		{
			name:   "untrusted peer: forwarding headers are ignored",
			opts:   Options{TrustedProxies: untrusted},
			ask:    ask{path: "/a2a", header: http.Header{"X-Forwarded-Uri": {"/public/x"}, "X-Original-Uri": {"/public/x"}}},
			status: 401,
		},
		{
			// A proxy missing from the trusted list: its checks would all be
			// of GET /check, on whatever route that matches.
			name: "forwarded: a check from a proxy that is not trusted is refused",
			opts: Options{Convention: Forwarded, TrustedProxies: untrusted},
			ask: ask{path: "/check", host: "files.example.com", header: http.Header{"X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Method": {"POST"},
				"X-Forwarded-Host": {"files.example.com"}, "Authorization": {bearer(noScope)}}},
			status:  400,
			headers: map[string]string{AnswerHeader: ""},
			body:    "not a trusted proxy",
		},
		{
			name: "nginx: a check from a proxy that is not trusted is refused",
			opts: Options{Convention: Nginx, TrustedProxies: untrusted},
			ask: ask{path: "/check", host: "files.example.com", header: http.Header{"X-Original-Uri": {"/mcp"},
				"Authorization": {bearer(noScope)}}},
			status:  400,
			headers: map[string]string{AnswerHeader: ""},
			body:    "not a trusted proxy",
		},
		{
			name:   "envoy convention ignores forwarding headers",
			opts:   Options{Convention: Envoy},
			ask:    ask{path: "/a2a", header: http.Header{"X-Forwarded-Uri": {"/public/x"}}},
			status: 401,
		},
		{
			name:   "auto: URIs that disagree are refused",
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/public/x"}, "X-Original-Uri": {"/a2a"}}},
			status: 400,
			body:   "different URIs",
		},
		{
			name:   "auto: X-Original-URL and X-Original-URI disagree",
			ask:    ask{path: "/check", header: http.Header{"X-Original-Url": {"https://a.example.com/public/x"}, "X-Original-Uri": {"/a2a"}}},
			status: 400,
		},
		{
			name:   "a repeated forwarding header with two values is refused",
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/a2a", "/public/x"}}},
			status: 400,
			body:   "repeated",
		},
		{
			name: "auto: methods that disagree are refused",
			ask: ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/a2a"}, "X-Forwarded-Method": {"GET"},
				"X-Original-Uri": {"/a2a"}, "X-Original-Method": {"POST"}}},
			status: 400,
			body:   "different methods",
		},
		{
			name: "auto: a stray X-Forwarded-Method does not replace nginx's method",
			ask: ask{method: "POST", path: "/check", header: http.Header{"X-Original-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"X-Forwarded-Method": {"GET"}, "Authorization": {bearer(tok)}}},
			status: 400,
			body:   "Mcp-Method",
		},
		{
			name:   "auto: hosts that disagree are refused",
			ask:    ask{path: "/check", header: http.Header{"X-Original-Url": {"https://files.example.com/mcp"}, "X-Forwarded-Host": {"other.example.com"}}},
			status: 400,
			body:   "different hosts",
		},
		{
			// nginx and Caddy accept a Host with a comma and pass it on
			// whole (nginx then picks its default server, the upstream gets
			// all of it): the first element is not the host it serves.
			name: "nginx: a client's Host with a comma is refused, not cut",
			opts: Options{Convention: Nginx},
			ask: ask{path: "/check", header: http.Header{"X-Original-Uri": {"/mcp"}, "X-Forwarded-Host": {"agent.example.com,files.example.com"},
				"Authorization": {bearer(noScope)}}},
			status: 400,
			body:   "host is malformed",
		},
		{
			name: "forwarded: X-Forwarded-Host repeated with different values is refused",
			opts: Options{Convention: Forwarded},
			ask: ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"agent.example.com", "files.example.com"},
				"Authorization": {bearer(noScope)}}},
			status: 400,
			body:   "X-Forwarded-Host is repeated",
		},
		{
			name:   "nginx convention ignores X-Forwarded-Uri",
			opts:   Options{Convention: Nginx},
			ask:    ask{path: "/check", header: http.Header{"X-Original-Uri": {"/a2a"}, "X-Forwarded-Uri": {"/public/x"}}},
			status: 401,
		},
		{
			name:   "forwarded convention ignores X-Original-URI",
			opts:   Options{Convention: Forwarded},
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/a2a"}, "X-Original-Uri": {"/public/x"}}},
			status: 401,
		},
		{
			name:   "nginx convention requires X-Original-URI",
			opts:   Options{Convention: Nginx},
			ask:    ask{path: "/public/x"},
			status: 400,
			body:   "X-Original-URI",
		},
		{
			name:   "dot segments are refused",
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/public/../a2a"}}},
			status: 400,
			body:   "dot segments",
		},
		{
			name:   "encoded dot segments are refused",
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/public/%2E%2e%2fa2a"}}},
			status: 400,
		},
		{
			name:   "a URI that is not a path is refused",
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"a2a"}}},
			status: 400,
		},
		{
			name:   "a malformed method is refused",
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/a2a"}, "X-Forwarded-Method": {"GE(T"}}},
			status: 400,
		},
		{
			name:   "a malformed host is refused",
			ask:    ask{path: "/check", header: http.Header{"X-Forwarded-Uri": {"/a2a"}, "X-Forwarded-Host": {"evil.example.com/x"}}},
			status: 400,
		},
		{
			name: "the route query parameter names the route",
			ask: ask{path: "/check?route=files", header: http.Header{"X-Original-Uri": {"/elsewhere"}, "X-Forwarded-Host": {"other.example.com"},
				"Authorization": {bearer(noScope)}}},
			status: 403,
			body:   "insufficient_scope",
		},
		{
			// Caddy's forward_auth (and the documented Caddyfile before it
			// cleared the query) keeps the client's query on the check URL:
			// the client would pick a route without files' scope and rules.
			name: "caddy: a route named in the client's own query is refused",
			opts: Options{Convention: Forwarded},
			ask: ask{path: "/check?route=agent", header: http.Header{"X-Forwarded-Uri": {"/mcp?route=agent"}, "X-Forwarded-Method": {"POST"},
				"X-Forwarded-Host": {"files.example.com"}, "Authorization": {bearer(noScope)}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"delete_file"}}},
			status: 400,
			body:   "route",
		},
		{
			name: "the client's query cannot add a route behind a proxy that names none",
			opts: Options{Convention: Forwarded},
			ask: ask{path: "/check?x=1&route=agent", header: http.Header{"X-Forwarded-Uri": {"/mcp?x=1&route=agent"},
				"X-Forwarded-Host": {"files.example.com"}, "Authorization": {bearer(noScope)}}},
			status: 400,
			body:   "route",
		},
		{
			// nginx sets the check URL itself: a client's own route
			// parameter is its business, and the proxy's route decides.
			name: "nginx: the proxy's route stands when the client's query names another",
			opts: Options{Convention: Nginx},
			ask: ask{path: "/check?route=files", header: http.Header{"X-Original-Uri": {"/elsewhere?route=agent"}, "X-Forwarded-Host": {"other.example.com"},
				"Authorization": {bearer(noScope)}}},
			status: 403,
			body:   "insufficient_scope",
		},
		{
			name: "the proxy's route stands when the client's query names none",
			opts: Options{Convention: Nginx},
			ask: ask{path: "/check?route=files", header: http.Header{"X-Original-Uri": {"/elsewhere?x=1"}, "X-Forwarded-Host": {"other.example.com"},
				"Authorization": {bearer(noScope)}}},
			status: 403,
			body:   "insufficient_scope",
		},

		// Protected resource metadata.
		{
			name:    "metadata asked of the service itself, outside the check prefix",
			opts:    Options{Convention: Envoy, PathPrefix: "/authz"},
			ask:     ask{path: "/.well-known/oauth-protected-resource/mcp", host: "files.example.com"},
			status:  200,
			headers: map[string]string{"Content-Type": "application/json", RemoveHeader: ""},
			body:    `"resource":"http://files.example.com/mcp"`,
			golden:  "metadata.txt",
		},
		{
			name:    "forwarded: metadata routed to the service itself (Traefik)",
			opts:    Options{Convention: Forwarded},
			ask:     ask{path: "/.well-known/oauth-protected-resource/mcp", host: "files.example.com:8443", header: http.Header{"X-Forwarded-Proto": {"https"}}},
			status:  200,
			headers: map[string]string{RemoveHeader: "", AnswerHeader: ""},
			body:    `"resource":"https://files.example.com:8443/mcp"`,
		},
		{
			name:   "forwarded: any other path without X-Forwarded-Uri is refused",
			opts:   Options{Convention: Forwarded},
			ask:    ask{path: "/mcp", host: "files.example.com"},
			status: 400,
			body:   "X-Forwarded-Uri is required",
		},
		{
			name:    "envoy http_service: metadata is never a 2xx check answer",
			opts:    Options{Convention: Envoy, PathPrefix: "/authz"},
			ask:     ask{path: "/authz/.well-known/oauth-protected-resource/mcp", host: "files.example.com"},
			status:  403,
			headers: map[string]string{RemoveHeader: "", AnswerHeader: ""},
			body:    `"resource":"http://files.example.com/mcp"`,
		},
		{
			name:    "auto: metadata without a prefix is never a 2xx check answer",
			ask:     ask{path: "/.well-known/oauth-protected-resource/mcp", host: "files.example.com"},
			status:  403,
			headers: map[string]string{RemoveHeader: "", AnswerHeader: ""},
		},
		{
			name: "nginx: metadata through auth_request is refused with an answer to fetch",
			opts: Options{Convention: Nginx},
			ask: ask{path: "/check", header: http.Header{"X-Original-Uri": {"/.well-known/oauth-protected-resource/mcp"},
				"X-Forwarded-Host": {"files.example.com"}, "X-Forwarded-Proto": {"https"}}},
			status:  403,
			headers: map[string]string{"X-User-Id": "", RemoveHeader: ""},
			body:    `"resource":"https://files.example.com/mcp"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, tt.opts)
			res := tt.ask.do(t, srv)
			var body string
			if tt.golden != "" {
				got := dump(t, res)
				matchGolden(t, tt.golden, got)
				body = string(got)
			} else {
				body = readAll(t, res.Body)
			}
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", res.StatusCode, tt.status, body)
			}
			for k, want := range tt.headers {
				got, ok := res.Header[k]
				switch {
				case want == "" && ok:
					t.Errorf("%s = %q, want absent", k, got)
				case want != "" && (len(got) != 1 || got[0] != want):
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			rm := removed(res)
			for _, name := range tt.remove {
				if !slices.Contains(rm, name) {
					t.Errorf("%s not in %s: %v", name, RemoveHeader, rm)
				}
			}
			for _, name := range rm {
				if res.Header.Get(name) != "" {
					t.Errorf("%s both set and listed for removal", name)
				}
			}
			if !strings.Contains(body, tt.body) {
				t.Errorf("body %s does not contain %s", body, tt.body)
			}
			if (tt.opts.Convention == Nginx || tt.opts.Convention == Forwarded) && tt.opts.TrustedProxies == nil && res.StatusCode >= 400 && res.Header.Get(AnswerHeader) == "" {
				t.Errorf("refusal without %s", AnswerHeader)
			}
			if res.StatusCode >= 400 && res.Header.Get("Content-Type") != "application/json" {
				t.Errorf("denial content-type %q", res.Header.Get("Content-Type"))
			}
		})
	}
}

func matchGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got)
}

// TestRepeatedChecks: the second check of a token comes from the verdict
// cache and the memoized rendering of its grant, yet the per-request
// lineage still follows each request.
func TestRepeatedChecks(t *testing.T) {
	srv := serve(t, Options{})
	tok := token(t, nil)
	for _, session := range []string{"mcp-1", "mcp-2", "mcp-1"} {
		res := ask{path: "/check", header: http.Header{
			"X-Original-Uri": {"/mcp"}, "X-Original-Method": {"GET"}, "X-Forwarded-Host": {"files.example.com"},
			"Authorization": {"Bearer " + tok}, "Mcp-Session-Id": {session},
		}}.do(t, srv)
		if res.StatusCode != 200 {
			t.Fatalf("session %s: status %d: %s", session, res.StatusCode, readAll(t, res.Body))
		}
		if got := res.Header.Values("X-User-Id"); len(got) != 1 || got[0] != "alice" {
			t.Errorf("session %s: X-User-Id %q", session, got)
		}
		if got := res.Header.Get("X-Root-Context-Id"); got != session {
			t.Errorf("session %s: X-Root-Context-Id %q", session, got)
		}
	}
}
