package attack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// Class 4: who may set a header. A single-valued header that arrives with
// two values (Envoy joins repeats with ",") is refused with 400, since the
// upstream may read either; a credential read from another header or a
// cookie never goes upstream; headers the service owns are removed unless
// it sets them.

const headersYAML = `routes:
  - name: mcp
    default: true
    issuers: [hs, other]
    audiences: [` + audience + `]
    credentials: {header: x-api-token, cookie: at}
    public_paths: [/public/*]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
`

// TestHeadersJoined refuses every single-valued header the service reads
// when it holds two values, on a call that would otherwise be allowed.
func TestHeadersJoined(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	other := token(t, issuerHS, "victim", "read")
	tests := []struct {
		name   string
		header string
		value  string
	}{
		{"two session ids", "mcp-session-id", "S,junk"},
		{"two session ids with a space", "mcp-session-id", "S, junk"},
		{"empty first session id", "mcp-session-id", ",S"},
		{"empty second session id", "mcp-session-id", "S,"},
		{"session id with a space", "mcp-session-id", "S junk"},
		{"session id with a tab", "mcp-session-id", "S\tjunk"},
		{"session id with a non-ASCII byte", "mcp-session-id", "S\xc3\xa4"},
		{"two methods", "mcp-method", "tools/list,tools/call"},
		{"two names", "mcp-name", "whoami,delete_file"},
		{"two protocol versions", "mcp-protocol-version", "2025-06-18,2026-07-28"},
		{"two A2A versions", "a2a-version", "0.3,1.0"},
		{"two bearer tokens", "authorization", "Bearer " + user + ",Bearer " + other},
		{"bearer then basic", "authorization", "Bearer " + user + ",Basic dXNlcjpwYXNz"},
		{"basic then bearer", "authorization", "Basic dXNlcjpwYXNz,Bearer " + user},
		{"bearer with a trailing empty value", "authorization", "bearer " + user + ","},
		{"two credential header tokens", "x-api-token", user + "," + other},
		{"two root contexts", "x-root-context-id", "a,b"},
		{"two parent contexts", "x-parent-context-id", "a,b"},
		{"two lineage depths", "x-lineage-depth", "1,2"},
		{"two lineage tokens", "x-lineage-token", "a.b.c,d.e.f"},
		{"partial-body flag joined false first", "x-envoy-auth-partial-body", "false,true"},
		{"partial-body flag joined true first", "x-envoy-auth-partial-body", "true,false"},
		{"partial-body flag not a boolean", "x-envoy-auth-partial-body", "no"},
		{"credential cookie twice", "cookie", "at=" + user + "; at=" + other},
		{"credential cookie twice among others", "cookie", "a=1; at=" + user + "; b=2; at=" + other},
		{"credential cookie twice joined with a comma", "cookie", "at=" + user + ",at=" + other},
		// Go's net/http, Node's cookie and Python read "at =x" as "at".
		{"credential cookie twice, the second name followed by a space", "cookie", "at=" + user + "; at =" + other},
		{"credential cookie twice, the second name followed by a tab", "cookie", "at=" + user + "; at\t=" + other},
		{"credential cookie twice, the first name followed by a space", "cookie", "at =" + user + "; at=" + other},
		// PHP percent-decodes cookie names.
		{"credential cookie twice, the second name percent-encoded", "cookie", "at=" + user + "; a%74=" + other},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := 400 + i
			h := map[string]string{tt.header: tt.value}
			if tt.header != "authorization" && tt.header != "x-api-token" && tt.header != "cookie" {
				h["authorization"] = "Bearer " + user
			}
			r := raw{Headers: h, Body: toolCall(id, "whoami", "")}
			if tt.header == "x-envoy-auth-partial-body" {
				// raw sets the flag itself: send it through the raw list.
				v := s.checkHeaderMap(t, append(baseEntries(), [2]string{"authorization", "Bearer " + user}, [2]string{tt.header, tt.value}), toolCall(id, "whoami", ""))
				v.wantDenied(t, 400)
				return
			}
			v := s.check(t, r)
			v.wantDenied(t, 400)
			if e := v.rpc(t); string(e.ID) != fmt.Sprint(id) || e.Error.Code != -32600 {
				t.Fatalf("JSON-RPC error id %s code %d, want %d -32600", e.ID, e.Error.Code, id)
			}
			if !strings.Contains(v.Body, tt.header) {
				t.Fatalf("the refusal does not name %s: %s", tt.header, v.Body)
			}
		})
	}
}

// TestHeadersUnderscoreNames: CGI-style servers (WSGI, PHP, FastCGI
// gateways) read x_user_id as x-user-id. Envoy passes such names on
// unless headers_with_underscores_action drops them, so the pipeline
// refuses a name that, read with "-" for "_", is one the service reads or
// sets, on the merged and the raw header map alike; another underscore
// name passes. (The forward-auth front end: internal/httpauthz
// TestUnderscoreNames and internal/e2e behind Caddy.)
func TestHeadersUnderscoreNames(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	for i, name := range []string{"x_user_id", "x-user_id", "x_session_id", "x_actor_chain", "x_lineage_token",
		"mcp_session_id", "mcp_name", "x_extauthz_dry_run", "x_api_token", "x_forwarded_uri"} {
		t.Run(name, func(t *testing.T) {
			id := 700 + i
			for _, v := range []verdict{
				s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + user, name: "victim"}, Body: toolCall(id, "whoami", "")}),
				s.checkHeaderMap(t, append(baseEntries(), [2]string{"authorization", "Bearer " + user}, [2]string{name, "victim"}), toolCall(id, "whoami", "")),
			} {
				v.wantDenied(t, 400)
				if e := v.rpc(t); string(e.ID) != fmt.Sprint(id) || e.Error.Code != -32600 {
					t.Fatalf("JSON-RPC error id %s code %d, want %d -32600", e.ID, e.Error.Code, id)
				}
				if !strings.Contains(v.Body, name) {
					t.Fatalf("the refusal does not name %s: %s", name, v.Body)
				}
			}
		})
	}
	v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + user, "x_custom_tag": "a"}, Body: toolCall(9, "whoami", "")})
	if !v.Allowed {
		t.Fatalf("an underscore name the service does not read: %d %s", v.Status, v.Body)
	}
}

// TestHeadersListsAccepted: headers that are lists by design, and values
// that only look alike, pass.
func TestHeadersListsAccepted(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	tests := []struct {
		name    string
		headers map[string]string
	}{
		{"actor chain is a list", map[string]string{"x-actor-chain": "agent-a,agent-b"}},
		{"A2A extensions are a list", map[string]string{"a2a-extensions": "https://a.example/x,https://b.example/y"}},
		{"Accept is a list", map[string]string{"accept": "application/json, text/event-stream"}},
		{"a cookie of another case is another cookie", map[string]string{"cookie": "AT=x; At=y"}},
		{"a session id of visible ASCII", map[string]string{"mcp-session-id": "abc-DEF_123.~!$"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"authorization": "Bearer " + user}
			for k, v := range tt.headers {
				h[k] = v
			}
			v := s.check(t, raw{Headers: h, Body: toolCall(1, "whoami", "")})
			if !v.Allowed {
				t.Fatalf("denied %d: %s", v.Status, v.Body)
			}
		})
	}
	// A Digest credential holds commas and is not ours: no bearer token
	// (401), not an ambiguous header (400).
	v := s.check(t, raw{Headers: map[string]string{"authorization": `Digest username="a", realm="r"`}, Body: toolCall(2, "whoami", "")})
	v.wantDenied(t, 401)
}

// TestHeadersRawHeaderMap: with encode_raw_headers the repeats come as
// separate entries; they are refused the same way.
func TestHeadersRawHeaderMap(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	other := token(t, issuerHS, "victim", "read")
	tests := []struct {
		name    string
		entries [][2]string
	}{
		{"two Mcp-Session-Id entries", [][2]string{{"authorization", "Bearer " + user}, {"mcp-session-id", "S"}, {"mcp-session-id", "junk"}}},
		{"Mcp-Session-Id in two spellings", [][2]string{{"authorization", "Bearer " + user}, {"Mcp-Session-Id", "S"}, {"mcp-session-id", "junk"}}},
		{"two Authorization entries", [][2]string{{"authorization", "Bearer " + user}, {"authorization", "Bearer " + other}}},
		{"two Mcp-Method entries", [][2]string{{"authorization", "Bearer " + user}, {"mcp-method", "tools/call"}, {"mcp-method", "tools/list"}}},
		{"two credential cookies in two Cookie entries", [][2]string{{"cookie", "at=" + user}, {"cookie", "at=" + other}}},
		{"two credential header entries", [][2]string{{"x-api-token", user}, {"x-api-token", other}}},
		// Envoy's raw header map keeps bytes its header map writes as "!":
		// the upstream gets them, so "S!" is not the session it serves.
		{"a session id with an invalid UTF-8 byte", [][2]string{{"authorization", "Bearer " + user}, {"mcp-session-id", "S\xff"}}},
		{"a session id with a stray continuation byte", [][2]string{{"authorization", "Bearer " + user}, {"mcp-session-id", "S\x80junk"}}},
		{"a session id in UTF-8 beyond ASCII", [][2]string{{"authorization", "Bearer " + user}, {"mcp-session-id", "S\xc3\xa4"}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := 500 + i
			v := s.checkHeaderMap(t, append(baseEntries(), tt.entries...), toolCall(id, "whoami", ""))
			v.wantDenied(t, 400)
			if e := v.rpc(t); string(e.ID) != fmt.Sprint(id) {
				t.Fatalf("JSON-RPC error id %s, want %d", e.ID, id)
			}
		})
	}

	// A credential cookie in its own Cookie entry is found, and stripped
	// from the rest.
	v := s.checkHeaderMap(t, append(baseEntries(), [2]string{"cookie", "theme=dark"}, [2]string{"cookie", "at=" + user}), toolCall(9, "whoami", ""))
	if !v.Allowed || v.Upstream["cookie"] != "theme=dark" {
		t.Fatalf("allowed %v (%d %s), upstream cookie %q", v.Allowed, v.Status, v.Body, v.Upstream["cookie"])
	}
}

// TestHeadersSessionHijackEndToEnd: the victim's session id next to a junk
// one, sent as two headers through the Envoy-like proxy (merged and raw),
// is refused and the stateful MCP server runs nothing in the victim's
// session.
func TestHeadersSessionHijackEndToEnd(t *testing.T) {
	for _, rawHeaders := range []bool{false, true} {
		t.Run(fmt.Sprintf("encode_raw_headers=%v", rawHeaders), func(t *testing.T) {
			s := start(t, headersYAML, options{Stateful: true, Build: &envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20, EncodeRawHeaders: rawHeaders}})
			victim := token(t, issuerHS, "victim", "read", "admin")
			attacker := token(t, issuerHS, "mallory", "read", "admin")
			init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"victim","version":"1"}}}`
			status, hdr, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(victim), init)
			session := hdr.Get("Mcp-Session-Id")
			if status != 200 || session == "" {
				t.Fatalf("initialize: status %d, session %q, body %s", status, session, body)
			}
			h := bearer(victim)
			h.Set("Mcp-Session-Id", session)
			h.Set("Mcp-Protocol-Version", "2025-06-18")
			s.viaEnvoy(t, http.MethodPost, "/mcp", h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			// The victim's own call binds the session to the victim.
			if status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", h, toolCall(2, "whoami", "")); status != 200 {
				t.Fatalf("victim's call: %d %s", status, body)
			}

			a := bearer(attacker)
			a["Mcp-Session-Id"] = []string{session, "junk-" + session}
			a.Set("Mcp-Protocol-Version", "2025-06-18")
			status, _, body = s.viaEnvoy(t, http.MethodPost, "/mcp", a, toolCall(3, "delete_file", `{"path":"/victim/data"}`))
			if status != 400 || !strings.Contains(body, "mcp-session-id has more than one value") || s.ran("delete_file") != 0 {
				t.Fatalf("hijack: status %d, body %s, delete_file ran %d times", status, body, s.ran("delete_file"))
			}
			a["Mcp-Session-Id"] = []string{"junk-" + session, session}
			status, _, body = s.viaEnvoy(t, http.MethodPost, "/mcp", a, toolCall(4, "delete_file", `{"path":"/victim/data"}`))
			if status != 400 || s.ran("delete_file") != 0 {
				t.Fatalf("hijack, junk first: status %d, body %s, delete_file ran %d times", status, body, s.ran("delete_file"))
			}
		})
	}
}

// wantRefusedSaying fails the test unless v is a 400 whose body says why
// (holds why), when refused; an allow, when not.
func (v verdict) wantRefusedSaying(t *testing.T, refused bool, why string) {
	t.Helper()
	if !refused {
		if !v.Allowed {
			t.Fatalf("denied %d: %s", v.Status, v.Body)
		}
		return
	}
	v.wantDenied(t, 400)
	if !strings.Contains(v.Body, why) {
		t.Fatalf("the refusal does not say why (%s): %s", why, v.Body)
	}
}

// TestHeadersUpgradeOverHTTP2: HTTP/2 carries a WebSocket as an extended
// CONNECT (RFC 8441: :method CONNECT, :protocol websocket), which Envoy
// forwards upstream as an HTTP/1.1 upgrade without buffering its body, as
// it does an Upgrade header. On a JSON-RPC route it is refused like one;
// so is any CONNECT. A route that declares protocol: http serves them.
func TestHeadersUpgradeOverHTTP2(t *testing.T) {
	s := start(t, strings.Replace(headersYAML, "routes:\n", "routes:\n  - name: sockets\n    path_prefix: /ws\n    protocol: http\n    issuers: [hs]\n    audiences: ["+audience+"]\n", 1), options{})
	user := token(t, issuerHS, "mallory", "read")
	tests := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		refused bool
	}{
		{"extended CONNECT for a WebSocket", "CONNECT", "/mcp", map[string]string{":protocol": "websocket"}, true},
		{"extended CONNECT for another protocol", "CONNECT", "/mcp", map[string]string{":protocol": "connect-udp"}, true},
		{"a :protocol without CONNECT", "POST", "/mcp", map[string]string{":protocol": "websocket"}, true},
		{"a plain CONNECT", "CONNECT", "/mcp", nil, true},
		{"extended CONNECT on a route that serves WebSockets", "CONNECT", "/ws/chat", map[string]string{":protocol": "websocket"}, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"authorization": "Bearer " + user}
			for k, v := range tt.headers {
				h[k] = v
			}
			v := s.check(t, raw{Method: tt.method, Path: tt.path, Headers: h, Body: toolCall(600+i, "whoami", "")})
			v.wantRefusedSaying(t, tt.refused, "upgrade")
		})
	}
}

// TestHeadersQueryToken: a token in the query (RFC 6750 section 2.3) is
// never read, and no forward-auth proxy can take it off the request: an
// upstream reading it would act on a token nobody checked, so a request
// carrying one is refused, beside a valid Authorization and on a public
// path alike, unless the route forwards credentials.
func TestHeadersQueryToken(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	other := token(t, issuerHS, "victim", "read")
	tests := []struct {
		name, path string
		refused    bool
	}{
		{"beside Authorization", "/mcp?access_token=" + other, true},
		{"in another case", "/mcp?Access_Token=" + other, true},
		{"percent-encoded", "/mcp?access%5Ftoken=" + other, true},
		{"after a semicolon", "/mcp?x=1;access_token=" + other, true},
		{"among other parameters", "/mcp?a=1&access_token=" + other + "&b=2", true},
		{"on a public path", "/public/x?access_token=" + other, true},
		{"another parameter naming a token", "/mcp?token_type=bearer", false},
		{"a value holding the name", "/mcp?q=access_token", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := raw{Path: tt.path, Headers: map[string]string{"authorization": "Bearer " + user}, Body: toolCall(700+i, "whoami", "")}
			if strings.HasPrefix(tt.path, "/public/") {
				r = raw{Method: "GET", Path: tt.path}
			}
			s.check(t, r).wantRefusedSaying(t, tt.refused, "access_token")
		})
	}
	t.Run("a route that forwards credentials", func(t *testing.T) {
		s := start(t, strings.Replace(headersYAML, "    public_paths:", "    forward_authorization: true\n    public_paths:", 1), options{})
		v := s.check(t, raw{Path: "/mcp?access_token=" + other, Headers: map[string]string{"authorization": "Bearer " + user}, Body: toolCall(1, "whoami", "")})
		if !v.Allowed {
			t.Fatalf("denied %d: %s", v.Status, v.Body)
		}
	})
}

// TestHeadersCredentialNotForwarded: a token read from the credential
// header or cookie is removed upstream, the cookie by rewriting Cookie
// without it (names are case-sensitive), and so is the credential header
// on a public path.
func TestHeadersCredentialNotForwarded(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	other := token(t, issuerHS, "victim", "read")
	tests := []struct {
		name       string
		headers    map[string]string
		path       string
		method     string
		wantCookie string // "" means the cookie header is removed
		keepCookie bool   // no credential cookie: Cookie left alone
	}{
		{name: "token from the credential header", headers: map[string]string{"x-api-token": user}, keepCookie: true},
		{name: "bearer token in the credential header", headers: map[string]string{"x-api-token": "Bearer " + user}, keepCookie: true},
		{name: "token from the only cookie", headers: map[string]string{"cookie": "at=" + user}},
		{name: "token from a cookie among others", headers: map[string]string{"cookie": "theme=dark; at=" + user + "; lang=en"}, wantCookie: "theme=dark; lang=en"},
		{name: "token cookie first", headers: map[string]string{"cookie": "at=" + user + ";theme=dark"}, wantCookie: "theme=dark"},
		{name: "quoted token cookie", headers: map[string]string{"cookie": `at="` + user + `"; x=1`}, wantCookie: "x=1"},
		{name: "cookies of another case stay", headers: map[string]string{"cookie": "AT=1; at=" + user + "; At=2"}, wantCookie: "AT=1; At=2"},
		{name: "cookie stripped even when Authorization was used", headers: map[string]string{"authorization": "Bearer " + user, "cookie": "at=other; x=1"}, wantCookie: "x=1"},
		{name: "credential header stripped even when Authorization was used", headers: map[string]string{"authorization": "Bearer " + user, "x-api-token": "other"}, keepCookie: true},
		{name: "credential header stripped on a public path", headers: map[string]string{"x-api-token": user}, path: "/public/x", method: "GET", keepCookie: true},
		{name: "credential cookie stripped on a public path", headers: map[string]string{"cookie": "at=" + user + "; x=1"}, path: "/public/x", method: "GET", wantCookie: "x=1"},
		{name: "a spelling of the credential cookie beside a token header", headers: map[string]string{"x-api-token": user, "cookie": "theme=dark; at =" + other}, wantCookie: "theme=dark"},
		{name: "a percent-encoded spelling beside a token header", headers: map[string]string{"x-api-token": user, "cookie": "a%74=" + other + "; theme=dark"}, wantCookie: "theme=dark"},
		{name: "the only cookie, a spelling of the credential, on a public path", headers: map[string]string{"cookie": "at\t=" + user}, path: "/public/x", method: "GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := raw{Headers: tt.headers, Path: tt.path, Method: tt.method}
			if tt.method == "" {
				r.Body = toolCall(1, "whoami", "")
			}
			v := s.check(t, r)
			if !v.Allowed {
				t.Fatalf("denied %d: %s", v.Status, v.Body)
			}
			for _, name := range []string{"authorization", "x-api-token"} {
				if !slices.Contains(v.Removed, name) {
					t.Errorf("%s is not removed upstream (removed %v)", name, v.Removed)
				}
			}
			got, set := v.Upstream["cookie"]
			switch {
			case tt.keepCookie:
				if set || slices.Contains(v.Removed, "cookie") {
					t.Errorf("Cookie touched: set %q, removed %v", got, v.Removed)
				}
			case tt.wantCookie == "":
				if set || !slices.Contains(v.Removed, "cookie") {
					t.Errorf("Cookie not removed: set %q, removed %v", got, v.Removed)
				}
			default:
				if got != tt.wantCookie || strings.Contains(got, user) {
					t.Errorf("Cookie upstream %q, want %q", got, tt.wantCookie)
				}
			}
		})
	}
}

// TestHeadersCredentialEndToEnd: through the Envoy-like proxy, the MCP
// server never sees the credential header or cookie.
func TestHeadersCredentialEndToEnd(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, tt := range []struct {
		name   string
		header http.Header
	}{
		{"credential header", http.Header{"X-Api-Token": {user}}},
		{"credential cookie", http.Header{"Cookie": {"theme=dark; at=" + user}}},
		{"credential cookie, its name followed by a space", http.Header{"X-Api-Token": {user}, "Cookie": {"theme=dark; at =" + user}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", tt.header, toolCall(1, "whoami", ""))
			if status != 200 {
				t.Fatalf("status %d, body %s", status, body)
			}
			seen := observation(t, body)
			if seen.APIToken || slices.Contains(seen.Cookies, "at") || seen.Authorization {
				t.Fatalf("the credential reached the MCP server: %+v", seen)
			}
			if tt.header.Get("Cookie") != "" && !slices.Contains(seen.Cookies, "theme") {
				t.Fatalf("the other cookies were lost: %v", seen.Cookies)
			}
		})
	}
}

// TestHeadersCredentialForwarded: forward_authorization keeps them.
func TestHeadersCredentialForwarded(t *testing.T) {
	s := start(t, strings.Replace(headersYAML, "    credentials:", "    forward_authorization: true\n    credentials:", 1), options{})
	user := token(t, issuerHS, "mallory", "read")
	v := s.check(t, raw{Headers: map[string]string{"x-api-token": user, "cookie": "at=" + user + "; x=1"}, Body: toolCall(1, "whoami", "")})
	if !v.Allowed || slices.Contains(v.Removed, "x-api-token") || slices.Contains(v.Removed, "cookie") || v.Upstream["cookie"] != "" {
		t.Fatalf("allowed %v, removed %v, upstream %v", v.Allowed, v.Removed, v.Upstream)
	}
}

// TestHeadersDryRunOwned: x-extauthz-dry-run is the service's: removed on
// every request of a route that is not dry-run (allowed or public), and set
// (overwriting the client's) on a dry-run route.
func TestHeadersDryRunOwned(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	forged := map[string]string{"authorization": "Bearer " + user, "x-extauthz-dry-run": "allowed"}
	for _, tt := range []struct {
		name string
		r    raw
	}{
		{"allowed call", raw{Headers: forged, Body: toolCall(1, "whoami", "")}},
		{"public path", raw{Method: "GET", Path: "/public/x", Headers: map[string]string{"x-extauthz-dry-run": "allowed"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := s.check(t, tt.r)
			if !v.Allowed || !slices.Contains(v.Removed, "x-extauthz-dry-run") {
				t.Fatalf("allowed %v, removed %v", v.Allowed, v.Removed)
			}
		})
	}

	status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", http.Header{"Authorization": {"Bearer " + user}, "X-Extauthz-Dry-Run": {"allowed"}}, toolCall(2, "whoami", ""))
	if seen := observation(t, body); status != 200 || seen.Headers.Get("X-Extauthz-Dry-Run") != "" {
		t.Fatalf("status %d, the forged header reached the MCP server: %+v", status, seen)
	}

	dry := start(t, strings.Replace(headersYAML, "    default: true\n", "    default: true\n    dry_run: true\n", 1), options{})
	v := dry.check(t, raw{Headers: forged, Body: toolCall(3, "delete_file", "{}")})
	if !v.Allowed || !strings.HasPrefix(v.Upstream["x-extauthz-dry-run"], "would deny") || slices.Contains(v.Removed, "x-extauthz-dry-run") {
		t.Fatalf("dry run: allowed %v, upstream %v, removed %v", v.Allowed, v.Upstream, v.Removed)
	}
}

// observation reads the whoami tool's reply.
func observation(t *testing.T, body string) testpeers.Observation {
	t.Helper()
	var resp struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || len(resp.Result.Content) == 0 {
		t.Fatalf("not a tool result: %s", body)
	}
	o, err := testpeers.ParseObservation(resp.Result.Content[0].Text)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// baseEntries are the pseudo-headers of a raw header map request.
func baseEntries() [][2]string {
	return [][2]string{{":method", "POST"}, {":path", "/mcp"}, {":authority", host}, {":scheme", "http"}, {"content-type", "application/json"}}
}

// checkHeaderMap sends a CheckRequest as Envoy does with
// encode_raw_headers: header_map entries, unmerged, in order.
func (s *suite) checkHeaderMap(t *testing.T, entries [][2]string, body string) verdict {
	t.Helper()
	hm := &corev3.HeaderMap{}
	for _, e := range entries {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: e[0], RawValue: []byte(e[1])})
	}
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "1", Method: "POST", Path: "/mcp", Host: host, Scheme: "http", Protocol: "HTTP/1.1",
			HeaderMap: hm, Body: body, Size: int64(len(body)),
		}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.grpc.Check(ctx, req)
	if err != nil {
		t.Fatalf("Check returned a gRPC error: %v", err)
	}
	return readVerdict(resp)
}

// viaEnvoyHost is viaEnvoy with another Host and a raw path.
func (s *suite) viaEnvoyHost(t *testing.T, reqHost, path string, header http.Header, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.proxy.URL+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(path, "//") {
		req.URL.Path = path // an Opaque "//x" would be sent as "http://x"
	} else {
		req.URL.Opaque = path // sent exactly as written
	}
	req.Host = reqHost
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.proxy.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestHeadersForwardAuth: the forward-auth front end joins repeated header
// lines as Envoy does, and refuses or strips the same way.
func TestHeadersForwardAuth(t *testing.T) {
	s := start(t, headersYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	other := token(t, issuerHS, "victim", "read")
	auth := func(extra http.Header) http.Header {
		h := http.Header{"Authorization": {"Bearer " + user}}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	refused := []struct {
		name string
		hdr  http.Header
	}{
		{"two Mcp-Session-Id lines", auth(http.Header{"Mcp-Session-Id": {"S", "junk"}})},
		{"two Authorization lines", http.Header{"Authorization": {"Bearer " + user, "Bearer " + other}}},
		{"two Mcp-Method lines", auth(http.Header{"Mcp-Method": {"tools/call", "tools/list"}})},
		{"two credential cookies on two lines", http.Header{"Cookie": {"at=" + user, "at=" + other}}},
		{"two credential header lines", http.Header{"X-Api-Token": {user, other}}},
	}
	for i, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := s.forwardAuth(t, fwd{Header: tt.hdr, Body: toolCall(600+i, "whoami", "")})
			if status != 400 || !strings.Contains(body, fmt.Sprintf(`"id":%d`, 600+i)) {
				t.Fatalf("status %d, body %s", status, body)
			}
		})
	}

	t.Run("credential cookie rewritten in the answer", func(t *testing.T) {
		status, hdr, body := s.forwardAuth(t, fwd{Header: auth(http.Header{"Cookie": {"theme=dark; at=" + other}, "X-Api-Token": {other}}), Body: toolCall(1, "whoami", "")})
		if status != 200 || hdr.Get("Cookie") != "theme=dark" {
			t.Fatalf("status %d, Cookie %q, body %s", status, hdr.Get("Cookie"), body)
		}
		removed := hdr.Get("X-Envoy-Auth-Headers-To-Remove")
		for _, name := range []string{"authorization", "x-api-token", "x-extauthz-dry-run"} {
			if !strings.Contains(removed, name) {
				t.Errorf("%s not in the removal list %q", name, removed)
			}
		}
	})
}
