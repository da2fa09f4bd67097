package attack

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// Class 2: canonical forms. Routes, public paths and resource rules are
// matched on one canonical form of the path, the host and the resource URI;
// a form that readers resolve differently is refused with 400.

// filesHost is served by a strict route; every other host falls to a
// catch-all route without rules.
const filesHost = "files.example.test"

const pathsYAML = `routes:
  - name: files
    hosts: [` + filesHost + `]
    path_prefix: /mcp
    issuers: [hs]
    audiences: [` + audience + `]
    public_paths: [/.well-known/oauth-protected-resource*]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
  - name: catch-all
    default: true
    issuers: [hs, other]
    audiences: [` + audience + `]
    public_paths: [/.well-known/oauth-protected-resource*, /public/*]
`

// TestCanonicalPaths sends a forbidden tools/call under every spelling of
// a path that does not have one reading: none may reach a weaker route or a
// public path; each is refused with 400 and a JSON-RPC error carrying the
// request id.
func TestCanonicalPaths(t *testing.T) {
	s := start(t, pathsYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	tests := []struct{ name, path string }{
		{"dot segments out of a public path", "/.well-known/oauth-protected-resource/../../mcp"},
		{"dot segments out of a public path, one level", "/.well-known/oauth-protected-resource/../mcp"},
		{"encoded dot segments", "/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/mcp"},
		{"encoded dot segments, upper case", "/.well-known/oauth-protected-resource/%2E%2E/%2E%2E/mcp"},
		{"half-encoded dot segments", "/.well-known/oauth-protected-resource/.%2e/%2e./mcp"},
		{"encoded slashes", "/.well-known/oauth-protected-resource%2f..%2f..%2fmcp"},
		{"encoded slash, upper case", "/.well-known/oauth-protected-resource%2F..%2Fmcp"},
		{"dot segment in a public glob", "/public/../mcp"},
		{"single dot segment", "/./mcp"},
		{"trailing dot segment", "/mcp/."},
		{"path parameters", "/mcp;jsessionid=1"},
		{"empty path parameter", "/mcp;"},
		{"path parameter in a segment", "/public;x/../mcp"},
		{"leading double slash", "//mcp"},
		{"triple slash", "///mcp"},
		{"inner double slash", "/public//mcp"},
		{"encoded unreserved letter", "/%6dcp"},
		{"encoded unreserved letter, upper case", "/%6Dcp"},
		{"encoded unreserved letter inside", "/m%63p"},
		{"encoded tilde", "/%7emcp"},
		{"absolute-form http", "http://" + filesHost + "/mcp"},
		{"absolute-form https", "https://" + filesHost + "/mcp"},
		{"asterisk-form", "*"},
		{"relative path", "mcp"},
		{"backslash dot segments", `/public\..\mcp`},
		{"encoded backslash", "/public%5c..%5cmcp"},
		{"encoded NUL", "/mcp%00"},
		{"double-encoded dot segments", "/public/%252e%252e/mcp"},
		{"double-encoded slash", "/public%252f..%252fmcp"},
		{"encoded NUL before an extension", "/public/x%00/../../mcp"},
		{"encoded CR LF", "/mcp%0d%0aX-User-Id:%20admin"},
		{"overlong dot", "/public/%c0%ae%c0%ae/mcp"},
		{"overlong slash", "/public%c0%af..%c0%afmcp"},
		{"three-byte overlong dot", "/public/%e0%80%ae%e0%80%ae/mcp"},
		{"lone continuation byte", "/mcp%80"},
		{"invalid escape", "/mcp%zz"},
		{"truncated escape", "/mcp%6"},
		{"raw non-ASCII byte", "/mc\xc3\xa4p"},
		{"fragment", "/mcp#x"},
		{"fragment hiding dot segments", "/public/x#/../../mcp"},
		{"space", "/mcp x"},
		// An upstream routing regardless of case (Express's default)
		// would serve these as the strict route's paths.
		{"the route's prefix in capitals", "/MCP"},
		{"the prefix capitalised, below it", "/Mcp/tools"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := 100 + i
			v := s.check(t, raw{Path: tt.path, Host: filesHost, Headers: map[string]string{"authorization": "Bearer " + user},
				Body: toolCall(id, "delete_file", `{"path":"/etc/passwd"}`)})
			v.wantDenied(t, 400)
			if e := v.rpc(t); string(e.ID) != fmt.Sprint(id) || e.Error.Code != -32600 {
				t.Fatalf("JSON-RPC error id %s code %d, want %d -32600", e.ID, e.Error.Code, id)
			}
			// Without a token too: no spelling is public.
			v = s.check(t, raw{Path: tt.path, Host: filesHost, Body: toolCall(id, "delete_file", "{}")})
			v.wantDenied(t, 400)
		})
	}
}

// TestRoutePrefixAsUpstreamsReadIt: a strict route's prefix ends in a
// slash, and every other path falls to a route without rules. Express (by
// default) routes "/admin" as "/admin/" and "/ADMIN/x" as "/admin/x": a
// path an upstream may take for the strict route's is refused, whatever
// route it would have fallen to, and the strict route's own paths are
// decided by it.
func TestRoutePrefixAsUpstreamsReadIt(t *testing.T) {
	s := start(t, `routes:
  - name: admin
    path_prefix: /admin/
    issuers: [hs]
    audiences: [`+audience+`]
    rules:
      - {methods: ["*"], scopes: [admin]}
  - name: catch-all
    default: true
    issuers: [hs]
    audiences: [`+audience+`]
`, options{})
	auth := map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory", "read")}
	for _, tc := range []struct {
		name, path string
		status     int // 0: allowed
	}{
		{"without the trailing slash", "/admin", 400},
		{"in capitals", "/ADMIN/users", 400},
		{"without the slash, capitalised", "/Admin", 400},
		{"the route's own path", "/admin/users", 403},
		{"another path", "/administrator", 0},
		{"the catch-all's own path", "/mcp", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Path: tc.path, Headers: auth, Body: toolCall(9, "whoami", "")})
			if tc.status == 0 {
				if !v.Allowed {
					t.Fatalf("denied %d: %s", v.Status, v.Body)
				}
				return
			}
			v.wantDenied(t, tc.status)
			if e := v.rpc(t); string(e.ID) != "9" {
				t.Fatalf("refusal %s without the id", v.Body)
			}
			if tc.status == 400 && !strings.Contains(v.Body, "as the route is configured") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}

// TestCanonicalPathsControl: the canonical spellings are decided as usual,
// so the refusals above are about the spelling, not the request.
func TestCanonicalPathsControl(t *testing.T) {
	s := start(t, pathsYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	auth := map[string]string{"authorization": "Bearer " + user}
	tests := []struct {
		name   string
		r      raw
		status int
	}{
		{"the strict route refuses the forbidden tool", raw{Host: filesHost, Headers: auth, Body: toolCall(1, "delete_file", "{}")}, 403},
		{"the strict route allows another tool", raw{Host: filesHost, Headers: auth, Body: toolCall(2, "whoami", "")}, 200},
		{"upper-case escapes of reserved characters pass", raw{Path: "/mcp/a%3Bb", Host: filesHost, Headers: auth, Body: toolCall(3, "delete_file", "{}")}, 403},
		{"lower-case escapes are canonicalised, not refused", raw{Path: "/mcp/a%3bb%c3%a4", Host: filesHost, Headers: auth, Body: toolCall(4, "delete_file", "{}")}, 403},
		{"a query string may hold anything encoded", raw{Path: "/mcp?x=%2e%2e/..//", Host: filesHost, Headers: auth, Body: toolCall(5, "delete_file", "{}")}, 403},
		{"below the prefix, case is the route's", raw{Path: "/mcp/Tools", Host: filesHost, Headers: auth, Body: toolCall(6, "delete_file", "{}")}, 403},
		{"another host may use the prefix in any case", raw{Path: "/MCP", Host: "other.example.test", Headers: auth, Body: toolCall(7, "delete_file", "{}")}, 200},
		{"a public path without a call needs no token", raw{Method: "GET", Path: "/public/readme", Host: "other.example.test"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := s.check(t, tt.r)
			if tt.status == 200 {
				if !v.Allowed {
					t.Fatalf("denied %d: %s", v.Status, v.Body)
				}
				return
			}
			v.wantDenied(t, tt.status)
		})
	}
}

// TestCanonicalPublicPathWithCall: a public path carrying a JSON-RPC call
// is not public, since an MCP server that serves every path would run it.
func TestCanonicalPublicPathWithCall(t *testing.T) {
	s := start(t, pathsYAML, options{})
	tests := []struct {
		name, path string
		headers    map[string]string
		body       string
		status     int // 401 (no token) unless the body is refused first
	}{
		{"tools/call posted to the metadata path", "/.well-known/oauth-protected-resource", nil, toolCall(1, "delete_file", "{}"), 0},
		{"tools/call posted below the metadata path", "/.well-known/oauth-protected-resource/mcp", nil, toolCall(2, "delete_file", "{}"), 0},
		{"tools/call posted to a public glob", "/public/x", nil, toolCall(3, "delete_file", "{}"), 0},
		{"batch posted to a public glob", "/public/x", nil, "[" + toolCall(4, "delete_file", "{}") + "]", 400}, // batches are refused outright
		{"Mcp-Method header alone on a public path", "/public/x", map[string]string{"mcp-method": "tools/call", "mcp-name": "delete_file"}, "", 0},
		{"Mcp-Session-Id alone on a public path", "/public/x", map[string]string{"mcp-session-id": "s-1"}, "", 0},
		// A body the service was not given may be a call.
		{"POST with a body not given, text/plain", "/public/x", map[string]string{"content-type": "text/plain", "content-length": "120"}, "", 0},
		{"POST with a body not given, json", "/.well-known/oauth-protected-resource", map[string]string{"content-type": "application/json", "content-length": "120"}, "", 0},
		{"POST with a body not given, no length", "/public/x", map[string]string{"content-type": "text/plain"}, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := s.check(t, raw{Path: tt.path, Host: filesHost, Headers: tt.headers, Body: tt.body})
			if v.Allowed {
				t.Fatalf("a call on a public path passed without a token (upstream %v)", v.Upstream)
			}
			v.wantDenied(t, cmp.Or(tt.status, 401))
		})
	}

	// A compressed call labelled text/plain: an upstream that inflates it
	// reads the call, so it is not public, and it is refused as unreadable.
	gz := s.checkBytes(t, raw{Path: "/public/x", Headers: map[string]string{"content-type": "text/plain", "content-encoding": "gzip"}, Body: compress(toolCall(5, "delete_file", "{}"), false)})
	gz.wantDenied(t, 400)
	// So is a call some upstream reads as JSON though it does not start
	// with '{' (Python's json.loads decodes UTF-16 and skips a BOM).
	for name, body := range map[string]string{
		"UTF-16LE":              encodeUTF16(toolCall(6, "delete_file", "{}"), false, false),
		"UTF-16BE with BOM":     encodeUTF16(toolCall(6, "delete_file", "{}"), true, true),
		"UTF-8 byte order mark": "\xef\xbb\xbf" + toolCall(6, "delete_file", "{}"),
	} {
		v := s.checkBytes(t, raw{Path: "/public/x", Headers: map[string]string{"content-type": "text/plain"}, Body: body})
		if v.Allowed {
			t.Errorf("%s call on a public path passed without a token", name)
		}
	}

	// End to end: the MCP server answers on every path.
	status, _, body := s.viaEnvoy(t, http.MethodPost, "/.well-known/oauth-protected-resource", nil, toolCall(9, "delete_file", `{"path":"/etc/passwd"}`))
	if status != 401 || s.ran("delete_file") != 0 {
		t.Fatalf("status %d body %s, delete_file ran %d times", status, body, s.ran("delete_file"))
	}
}

// TestCanonicalHosts: host case and port are canonicalised onto the route
// they name; a trailing dot, which Envoy's virtual hosts do not match to
// the name without it, and anything that is not a host, are refused.
func TestCanonicalHosts(t *testing.T) {
	s := start(t, pathsYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	tests := []struct {
		name, host string
		status     int
	}{
		{"upper case goes to the strict route", "FILES.EXAMPLE.TEST", 403},
		{"mixed case with a port goes to the strict route", "Files.Example.Test:8443", 403},
		{"a port goes to the strict route", filesHost + ":443", 403},
		{"trailing dot", filesHost + ".", 400},
		{"trailing dot with a port", filesHost + ".:443", 400},
		{"upper case with a trailing dot", "FILES.EXAMPLE.TEST.", 400},
		{"joined hosts", filesHost + ",other.example.test", 400},
		{"userinfo", "mallory@" + filesHost, 400},
		{"empty label", "files..example.test", 400},
		{"encoded dot", "files%2eexample.test", 400},
		{"a path in the host", filesHost + "/mcp", 400},
		{"empty port", filesHost + ":", 400},
		{"port zero", filesHost + ":0", 400},
		{"port out of range", filesHost + ":65536", 400},
		{"unclosed IPv6 literal", "[::1", 400},
		{"IPv6 zone", "[fe80::1%25eth0]", 400},
		{"control byte", "files.example.test\x00", 400},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := 200 + i
			v := s.check(t, raw{Host: tt.host, Headers: map[string]string{"authorization": "Bearer " + user}, Body: toolCall(id, "delete_file", "{}")})
			v.wantDenied(t, tt.status)
			if e := v.rpc(t); string(e.ID) != fmt.Sprint(id) {
				t.Fatalf("JSON-RPC error id %s, want %d", e.ID, id)
			}
		})
	}
}

// filesRulesYAML is the documented resource rule (docs/mcp-a2a.md): /etc/* needs the admins
// group, everything else is allowed.
const filesRulesYAML = `routes:
  - name: files
    default: true
    issuers: [hs]
    audiences: [` + audience + `]
    protocol: mcp
    rules:
      - name: admin resources
        methods: [resources/read, resources/subscribe, resources/unsubscribe]
        names: ["file:///etc/*"]
        claims: {groups: [admins]}
`

// resourceCall is a resources/* body for uri (a JSON string literal, so
// that escapes can be sent as they are).
func resourceCall(id int, method, uriJSON string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"uri":%s}}`, id, method, uriJSON)
}

// TestCanonicalResourceURIs: every spelling of a URI under /etc meets the
// rule (403), and a URI without a canonical form is refused (400, -32602).
func TestCanonicalResourceURIs(t *testing.T) {
	s := start(t, filesRulesYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	tests := []struct {
		name, method, uri string // uri as a JSON string literal
		status            int
	}{
		{"the canonical URI", "resources/read", `"file:///etc/passwd"`, 403},
		{"encoded letter", "resources/read", `"file:///%65tc/passwd"`, 403},
		{"every letter encoded", "resources/read", `"file:///%65%74%63/passwd"`, 403},
		{"localhost authority", "resources/read", `"file://localhost/etc/passwd"`, 403},
		{"upper-case localhost", "resources/read", `"file://LOCALHOST/etc/passwd"`, 403},
		{"upper-case scheme", "resources/read", `"FILE:///etc/passwd"`, 403},
		{"mixed-case scheme", "resources/read", `"File:///etc/passwd"`, 403},
		{"no authority", "resources/read", `"file:/etc/passwd"`, 403},
		{"four slashes", "resources/read", `"file:////etc/passwd"`, 403},
		{"five slashes", "resources/read", `"file://///etc/passwd"`, 403},
		{"inner double slash", "resources/read", `"file:///etc//passwd"`, 403},
		{"everything at once", "resources/read", `"FILE://LocalHost//%65tc//passwd"`, 403},
		{"JSON-escaped slash", "resources/read", `"file:\/\/\/etc\/passwd"`, 403},
		{"subscribe with an upper-case scheme", "resources/subscribe", `"FILE:///etc/passwd"`, 403},
		{"unsubscribe with an encoded letter", "resources/unsubscribe", `"file:///%65tc/passwd"`, 403},
		{"dot segments through a symbolic link", "resources/read", `"file:///var/run/../etc/shadow"`, 400}, // /var/run is often ../run: the server reads /etc/shadow
		{"encoded dot segments through a symbolic link", "resources/read", `"file:///var/run/%2e%2E/etc/shadow"`, 400},
		{"dot segments", "resources/read", `"file:///tmp/../etc/passwd"`, 400},
		{"encoded dot segments", "resources/read", `"file:///tmp/%2e%2e/etc/passwd"`, 400},
		{"half-encoded dot segments", "resources/read", `"file:///tmp/.%2E/etc/passwd"`, 400},
		{"single dot segments", "resources/read", `"file:///./etc/./passwd"`, 400},
		{"no authority and dot segments", "resources/read", `"file:/tmp/../etc/shadow"`, 400},
		{"JSON-escaped slash and dot segments", "resources/read", `"file:\/\/\/tmp\/..\/etc\/passwd"`, 400},
		{"subscribe with dot segments", "resources/subscribe", `"file:///tmp/../etc/passwd"`, 400},
		{"unsubscribe with dot segments", "resources/unsubscribe", `"file:///etc/x/../../etc/passwd"`, 400},
		{"dot segments above the root", "resources/read", `"file:///../etc/passwd"`, 400},
		{"dot segments above the root later", "resources/read", `"file:///tmp/../../etc/passwd"`, 400},
		{"encoded slash", "resources/read", `"file:///etc%2fpasswd"`, 400},
		{"encoded NUL", "resources/read", `"file:///etc/passwd%00.txt"`, 400},
		{"double-encoded dot segments", "resources/read", `"file:///tmp/%252e%252e/etc/passwd"`, 400},
		{"raw NUL", "resources/read", `"file:///etc/passwd\u0000"`, 400}, // the reader refuses control bytes first: -32600
		{"invalid escape", "resources/read", `"file:///%zz/etc/passwd"`, 400},
		{"overlong dot segments", "resources/read", `"file:///tmp/%c0%ae%c0%ae/etc/passwd"`, 400},
		{"remote host", "resources/read", `"file://etc/passwd"`, 400},
		{"relative file URI", "resources/read", `"file:etc/passwd"`, 400},
		{"fragment", "resources/read", `"file:///etc/passwd#x"`, 400},
		{"query on a file URI", "resources/read", `"file:///etc/passwd?x=1"`, 400},
		{"backslashes", "resources/read", `"file:///tmp\\..\\etc\\passwd"`, 400},
		{"space", "resources/read", `"file:///etc/pass wd"`, 400},
		{"no scheme", "resources/read", `"/etc/passwd"`, 400},
		{"empty URI", "resources/read", `""`, 400},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := 300 + i
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + user}, Body: resourceCall(id, tt.method, tt.uri)})
			v.wantDenied(t, tt.status)
			e := v.rpc(t)
			if string(e.ID) != fmt.Sprint(id) {
				t.Fatalf("JSON-RPC error id %s, want %d", e.ID, id)
			}
			if tt.status == 400 && e.Error.Code != -32602 && (tt.name != "raw NUL" || e.Error.Code != -32600) {
				t.Fatalf("JSON-RPC error code %d, want -32602", e.Error.Code)
			}
		})
	}
}

// TestCanonicalResourceURIsControl: URIs outside /etc pass, an admin reads
// /etc, and a URI named only by the Mcp-Name header is canonicalised too.
func TestCanonicalResourceURIsControl(t *testing.T) {
	s := start(t, filesRulesYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	admin := tokenWith(t, map[string]any{"iss": issuerHS, "sub": "root", "groups": []string{"admins"}})
	tests := []struct {
		name    string
		tok     string
		headers map[string]string
		body    string
		status  int
	}{
		{"another directory", user, nil, resourceCall(1, "resources/read", `"file:///tmp/x"`), 200},
		{"a sibling that only starts like etc", user, nil, resourceCall(2, "resources/read", `"file:///etcetera/x"`), 200},
		{"a dot segment that stays outside etc is refused all the same", user, nil, resourceCall(3, "resources/read", `"file:///etc/../tmp/x"`), 400},
		{"an admin reads etc", admin, nil, resourceCall(4, "resources/read", `"file:///%65tc/passwd"`), 200},
		{"an admin's dot segments are refused too", admin, nil, resourceCall(5, "resources/read", `"file:///tmp/../etc/passwd"`), 400},
		{"Mcp-Name alone, dot segments", user, map[string]string{"mcp-method": "resources/read", "mcp-name": "file:///tmp/../etc/passwd"}, "", 400},
		{"Mcp-Name alone, encoded dot segments through a symbolic link", user, map[string]string{"mcp-method": "resources/read", "mcp-name": "file:///var/run/%2e%2e/etc/shadow"}, "", 400},
		{"Mcp-Name alone, upper-case scheme", user, map[string]string{"mcp-method": "resources/read", "mcp-name": "FILE:///etc/passwd"}, "", 403},
		{"Mcp-Name alone, no canonical form", user, map[string]string{"mcp-method": "resources/read", "mcp-name": "file:///../etc/passwd"}, "", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"authorization": "Bearer " + tt.tok}
			for k, v := range tt.headers {
				h[k] = v
			}
			v := s.check(t, raw{Headers: h, Body: tt.body})
			if tt.status == 200 {
				if !v.Allowed {
					t.Fatalf("denied %d: %s", v.Status, v.Body)
				}
				return
			}
			v.wantDenied(t, tt.status)
		})
	}
}

// TestCanonicalResourceReadEndToEnd reads files through the Envoy-like
// proxy from a go-sdk MCP server that serves file:///{+path}: the server
// would read every one of these URIs, and none under /etc is read.
func TestCanonicalResourceReadEndToEnd(t *testing.T) {
	s := start(t, filesRulesYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	for i, uri := range []string{
		"file:///tmp/../etc/passwd",
		"file:///%65tc/passwd",
		"file:////etc/passwd",
		"file:///etc/./passwd",
		"file:///etc//passwd",
		"file:///tmp/../../etc/passwd",
		"file:///var/run/../etc/passwd",
	} {
		t.Run(uri, func(t *testing.T) {
			b, _ := json.Marshal(uri)
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), resourceCall(i+1, "resources/read", string(b)))
			if status != 403 && status != 400 {
				t.Fatalf("status %d, body %s", status, body)
			}
		})
	}
	if n := s.ran(testpeers.ReadResource); n != 0 {
		t.Fatalf("the MCP server read %d forbidden resources", n)
	}
	// Control: the server does read what the rule allows.
	status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), resourceCall(9, "resources/read", `"file:///tmp/notes"`))
	if status != 200 || s.ran(testpeers.ReadResource) != 1 || !strings.Contains(body, "contents of file:///tmp/notes") {
		t.Fatalf("allowed read: status %d, body %s, read %d times", status, body, s.ran(testpeers.ReadResource))
	}
}

// TestCanonicalPathsEndToEnd sends the path spellings through the
// Envoy-like proxy to an MCP server that serves every path: refused, and
// delete_file never runs.
func TestCanonicalPathsEndToEnd(t *testing.T) {
	s := start(t, pathsYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	for i, path := range []string{
		"/.well-known/oauth-protected-resource/../../mcp",
		"/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/mcp",
		"/.well-known/oauth-protected-resource%2f..%2f..%2fmcp",
		"/mcp;jsessionid=1",
		"//mcp",
		"/%6dcp",
	} {
		t.Run(path, func(t *testing.T) {
			status, _, body := s.viaEnvoyHost(t, filesHost, path, bearer(user), toolCall(i+1, "delete_file", `{"path":"/etc/passwd"}`))
			if status != 400 {
				t.Fatalf("status %d, body %s", status, body)
			}
		})
	}
	if n := s.ran("delete_file"); n != 0 {
		t.Fatalf("delete_file ran %d times", n)
	}
}

// TestCanonicalForwardAuth: the forward-auth front end refuses the same
// spellings through the same package.
func TestCanonicalForwardAuth(t *testing.T) {
	s := start(t, pathsYAML, options{})
	user := token(t, issuerHS, "mallory", "read")
	tests := []struct{ name, uri, host string }{
		{"dot segments out of a public path", "/.well-known/oauth-protected-resource/../../mcp", filesHost},
		{"encoded dot segments", "/.well-known/oauth-protected-resource/%2e%2e/%2e%2e/mcp", filesHost},
		{"encoded slashes", "/.well-known/oauth-protected-resource%2f..%2fmcp", filesHost},
		{"path parameters", "/mcp;jsessionid=1", filesHost},
		{"double slash", "//mcp", filesHost},
		{"encoded letter", "/%6dcp", filesHost},
		{"absolute-form", "http://" + filesHost + "/mcp", filesHost},
		{"backslash", `/public\..\mcp`, filesHost},
		{"encoded NUL", "/mcp%00", filesHost},
		{"overlong dot", "/public/%c0%ae%c0%ae/mcp", filesHost},
		{"trailing host dot", "/mcp", filesHost + "."},
		{"trailing host dot with a port", "/mcp", filesHost + ".:443"},
		{"the route's prefix in capitals", "/MCP", filesHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := s.forwardAuth(t, fwd{URI: tt.uri, Host: tt.host, Header: bearer(user), Body: toolCall(1, "delete_file", "{}")})
			if status != 400 {
				t.Fatalf("status %d, body %s", status, body)
			}
		})
	}
	// Control: upper-case host and lower-case escapes are canonicalised onto
	// the strict route, which refuses the tool.
	status, _, body := s.forwardAuth(t, fwd{URI: "/mcp/a%3bb", Host: "FILES.EXAMPLE.TEST:443", Header: bearer(user), Body: toolCall(1, "delete_file", "{}")})
	if status != 403 {
		t.Fatalf("status %d, body %s", status, body)
	}
}
