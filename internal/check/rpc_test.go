package check

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/extauthz/extauthz/internal/config"
)

// rpcRoutes are routes with a rule denying delete_file, in each protocol,
// and an http route with no rules.
const rpcRoutes = `
  - name: auto
    hosts: [auto.example.com]
    issuers: [dev]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], action: deny}
      - {methods: ["resources/*"], names: ["file:///etc/*"], action: deny}
  - name: mcp
    hosts: [mcp.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], action: deny}
  - name: a2a
    hosts: [a2a.example.com]
    issuers: [dev]
    protocol: a2a
    rules:
      - {methods: ["message/*"], action: deny}
  - name: plain
    hosts: [plain.example.com]
    issuers: [dev]
    protocol: http
`

const deleteCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc/passwd"}}}`

// rpcReq is a request to host with the fixture's token.
func (f *fixture) rpcReq(t *testing.T, method, host, body string, headers Headers) *Request {
	h := Headers{"authorization": "Bearer " + f.hs(t, nil), "content-type": "application/json"}
	for k, v := range headers {
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
	}
	// The fixture's catch-all route comes first: name the route.
	route := strings.TrimSuffix(host, ".example.com")
	return &Request{Method: method, Scheme: "https", Host: host, Path: "/mcp", Headers: h, Body: []byte(body),
		ContextExtensions: map[string]string{"route": route}}
}

// rpcErr decodes a denial body as a JSON-RPC error response.
func rpcErr(t *testing.T, body []byte) (id string, code int) {
	t.Helper()
	var e struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.JSONRPC != "2.0" || e.Error.Code == 0 {
		t.Fatalf("not a JSON-RPC error response: %s", body)
	}
	return string(e.ID), e.Error.Code
}

func utf16Body(s string, bigEndian, bom bool) string {
	var b []byte
	units := utf16.Encode([]rune(s))
	if bom {
		units = append([]uint16{0xfeff}, units...)
	}
	for _, u := range units {
		if bigEndian {
			b = binary.BigEndian.AppendUint16(b, u)
		} else {
			b = binary.LittleEndian.AppendUint16(b, u)
		}
	}
	return string(b)
}

func utf32Body(s string) string {
	var b []byte
	for _, r := range s {
		b = binary.BigEndian.AppendUint32(b, uint32(r))
	}
	return string(b)
}

// unreadableBodies are tools/call delete_file bodies that some mainstream
// parser reads as that call and that the service cannot read unambiguously.
// id is the id the refusal must echo ("null" when it cannot be read).
var unreadableBodies = []struct {
	name, body string
	code       int
	id         string
}{
	{"duplicate jsonrpc", `{"jsonrpc":"2.0","jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"duplicate method", `{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"duplicate id", `{"jsonrpc":"2.0","id":7,"id":8,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "null"},
	{"duplicate name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","name":"delete_file"}}`, -32600, "7"},
	{"duplicate params", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"params":{"name":"delete_file"}}`, -32600, "7"},
	{"duplicate escaped name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","n\u0061me":"delete_file"}}`, -32600, "7"},
	{"duplicate argument", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/tmp/x","path":"/etc/passwd"}}}`, -32600, "7"},
	{"Method key", `{"jsonrpc":"2.0","id":7,"method":"tools/list","Method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"METHOD key alone", `{"jsonrpc":"2.0","id":7,"METHOD":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"long s jsonrpc key", "{\"j\u017fonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\"}}", -32600, "7"},
	{"escaped long s jsonrpc key", `{"j\u017fonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"NAME key", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","NAME":"delete_file"}}`, -32600, "7"},
	{"Params key", `{"jsonrpc":"2.0","id":7,"method":"tools/call","Params":{"name":"delete_file"}}`, -32600, "7"},
	{"batch of one", `[` + deleteCall + `]`, -32600, "null"},
	{"batch of two", `[{"jsonrpc":"2.0","id":1,"method":"ping"},` + deleteCall + `]`, -32600, "null"},
	{"UTF-8 byte order mark", "\xef\xbb\xbf" + deleteCall, -32700, "null"},
	{"invalid UTF-8 in arguments", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc/` + "\xff" + `"}}}`, -32700, "null"},
	{"nesting 200 deep", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}}`, -32600, "null"},
	{"UTF-16LE", utf16Body(deleteCall, false, false), -32700, "null"},
	{"UTF-16BE", utf16Body(deleteCall, true, false), -32700, "null"},
	{"UTF-16LE with BOM", utf16Body(deleteCall, false, true), -32700, "null"},
	{"UTF-16BE with BOM", utf16Body(deleteCall, true, true), -32700, "null"},
	{"UTF-32BE", utf32Body(deleteCall), -32700, "null"},
	{"NUL in name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file\u0000"}}`, -32600, "7"},
	{"NUL in method", `{"jsonrpc":"2.0","id":7,"method":"tools/call\u0000","params":{"name":"delete_file"}}`, -32600, "7"},
	{"trailing data", deleteCall + `x`, -32700, "null"},
	{"two messages", deleteCall + deleteCall, -32700, "null"},
	{"number as method", `{"jsonrpc":"2.0","id":7,"method":1,"params":{"name":"delete_file"}}`, -32600, "7"},
	{"truncated", deleteCall[:len(deleteCall)-1], -32700, "null"},
}

// TestUnreadableBodiesAreRefused: on every route but protocol http, a body
// the service cannot read unambiguously is refused with 400 and a JSON-RPC
// error, whatever the HTTP method and however it is labelled.
func TestUnreadableBodiesAreRefused(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	for _, host := range []string{"auto.example.com", "mcp.example.com", "a2a.example.com"} {
		for _, method := range []string{"POST", "GET", "PUT", "PATCH", "DELETE"} {
			for _, label := range []Headers{{}, {"content-type": "text/plain"}, {"content-type": ""}} {
				for _, tt := range unreadableBodies {
					v := f.pl.Check(t.Context(), f.rpcReq(t, method, host, tt.body, label))
					if v.Outcome != Malformed || v.Status() != 400 {
						t.Errorf("%s %s %s (%v): %v %d, want 400", host, method, tt.name, label, v.Outcome, v.Status())
						continue
					}
					id, code := rpcErr(t, v.Body)
					if code != tt.code || id != tt.id {
						t.Errorf("%s %s %s: code %d id %s, want %d id %s", host, method, tt.name, code, id, tt.code, tt.id)
					}
				}
			}
		}
	}
}

// TestHTTPRouteOptsOut: protocol http reads no body and applies no rules.
func TestHTTPRouteOptsOut(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	for _, tt := range unreadableBodies {
		if v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "plain.example.com", tt.body, nil)); v.Outcome != Allowed {
			t.Errorf("%s: %v, want allowed", tt.name, v.Outcome)
		}
	}
}

// TestNotJSONIsNotRead: on an auto route, a body no upstream reads as JSON
// is not JSON-RPC (a form post passes as plain HTTP).
func TestNotJSONIsNotRead(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	for _, body := range []string{"a=1&b=2", "hello", "\x00\x01"} {
		v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "auto.example.com", body, Headers{"content-type": "application/x-www-form-urlencoded"}))
		if v.Outcome != Allowed {
			t.Errorf("%q: %v %s, want allowed", body, v.Outcome, v.Body)
		}
	}
	// The same bodies with a JSON content type or an MCP header are refused.
	for _, h := range []Headers{{"content-type": "application/json"}, {"content-type": "application/vnd.api+JSON; charset=utf-8"},
		{"content-type": "text/plain", "mcp-session-id": "s"}, {"content-type": "text/plain", "mcp-protocol-version": "2025-06-18"},
		{"content-type": "text/plain", "a2a-version": "1.0"}} {
		if v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "auto.example.com", "hello", h)); v.Status() != 400 {
			t.Errorf("hello with %v: %v, want 400", h, v.Outcome)
		}
	}
}

// TestCharsetMustBeUTF8: a content type naming another charset would make
// an upstream that honours it read other characters.
func TestCharsetMustBeUTF8(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	echo := strings.Replace(deleteCall, "delete_file", "echo", 1)
	for ct, want := range map[string]int{
		"application/json":                          200,
		"application/json; charset=utf-8":           200,
		"application/json;charset=UTF-8":            200,
		`application/json; charset="utf8"`:          200,
		"application/json; charset=utf-16":          400,
		"application/json; Charset=UTF-16LE":        400,
		"application/json; charset=iso-8859-1":      400,
		"application/json; charset=utf-8; charset=": 400,
		"text/plain; charset=utf-32":                400,
	} {
		for _, host := range []string{"auto.example.com", "mcp.example.com"} {
			v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", host, echo, Headers{"content-type": ct}))
			if v.Status() != want {
				t.Errorf("%s %q: %d, want %d", host, ct, v.Status(), want)
			}
		}
	}
}

// TestRulesApplyWhateverTheHTTPMethod: a tools/call body is authorized on
// every method; a method that is not upper case is refused with it.
func TestRulesApplyWhateverTheHTTPMethod(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	for _, host := range []string{"auto.example.com", "mcp.example.com"} {
		for _, method := range []string{"POST", "GET", "PUT", "PATCH", "DELETE", "OPTIONS", "FOO"} {
			v := f.pl.Check(t.Context(), f.rpcReq(t, method, host, deleteCall, nil))
			if v.Outcome != Forbidden {
				t.Errorf("%s %s delete_file: %v, want forbidden", host, method, v.Outcome)
			}
			v = f.pl.Check(t.Context(), f.rpcReq(t, method, host, strings.Replace(deleteCall, "delete_file", "echo", 1), nil))
			if v.Outcome != Allowed {
				t.Errorf("%s %s echo: %v %s, want allowed", host, method, v.Outcome, v.Body)
			}
		}
		for _, method := range []string{"post", "Post", "pOST", "get", "delete", "Patch"} {
			v := f.pl.Check(t.Context(), f.rpcReq(t, method, host, deleteCall, nil))
			if v.Status() != 400 {
				t.Errorf("%s %s: %v, want 400", host, method, v.Outcome)
				continue
			}
			if id, code := rpcErr(t, v.Body); code != -32600 || id != "null" {
				t.Errorf("%s %s: code %d id %s", host, method, code, id)
			}
		}
	}
	// An A2A call too.
	send := `{"jsonrpc":"2.0","id":"x","method":"SendMessage","params":{"message":{"contextId":"c"}}}`
	for _, method := range []string{"POST", "GET", "PUT"} {
		if v := f.pl.Check(t.Context(), f.rpcReq(t, method, "a2a.example.com", send, nil)); v.Outcome != Forbidden {
			t.Errorf("a2a %s SendMessage: %v, want forbidden", method, v.Outcome)
		}
	}
}

// TestCompressedBodiesAreRefused: a Content-Encoding other than identity
// makes the body unreadable as the upstream reads it once inflated,
// whatever the Content-Type and the bytes: 400 / -32700, id null, on every
// route but protocol http.
func TestCompressedBodiesAreRefused(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	echo := strings.Replace(deleteCall, "delete_file", "echo", 1)
	for _, host := range []string{"auto.example.com", "mcp.example.com", "a2a.example.com"} {
		for _, enc := range []string{"gzip", "deflate", "br", "zstd", "compress", "x-gzip", "GZIP", "gzip, identity", "identity,gzip"} {
			for _, ct := range []string{"application/json", "text/plain", "application/octet-stream", ""} {
				for _, body := range []string{"\x1f\x8b\x08\x00\x00\x00\x00\x00", echo, "hello"} {
					v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", host, body, Headers{"content-encoding": enc, "content-type": ct}))
					if v.Status() != 400 {
						t.Errorf("%s %q %q %q: %v %d, want 400", host, enc, ct, body, v.Outcome, v.Status())
						continue
					}
					if id, code := rpcErr(t, v.Body); code != -32700 || id != "null" {
						t.Errorf("%s %q %q: code %d id %s, want -32700 id null", host, enc, ct, code, id)
					}
				}
			}
		}
	}
	for _, enc := range []string{"identity", "IDENTITY", " identity", ""} {
		if v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "auto.example.com", echo, Headers{"content-encoding": enc})); v.Outcome != Allowed {
			t.Errorf("content-encoding %q: %v %s, want allowed", enc, v.Outcome, v.Body)
		}
	}
	// Without the body there is nothing to read: the headers decide.
	if v := f.pl.Check(t.Context(), f.rpcReq(t, "GET", "auto.example.com", "", Headers{"content-encoding": "gzip", "content-type": ""})); v.Outcome != Allowed {
		t.Errorf("GET with content-encoding and no body: %v %s, want allowed", v.Outcome, v.Body)
	}
	// protocol http reads no body.
	if v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "plain.example.com", "\x1f\x8b", Headers{"content-encoding": "gzip"})); v.Outcome != Allowed {
		t.Errorf("protocol http: %v, want allowed", v.Outcome)
	}
}

// TestBodyNotGivenFailsClosed: a request that carries a body the proxy did
// not send is refused where rules apply, whatever its Content-Type says,
// unless Mcp-Method names it. Requests without a body pass.
func TestBodyNotGivenFailsClosed(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	for _, tt := range []struct {
		name    string
		method  string
		headers Headers
		partial bool
		want    int
	}{
		{"POST, JSON, no body", "POST", nil, false, 400},
		{"GET with Content-Length", "GET", Headers{"content-length": "120"}, false, 400},
		{"PUT chunked", "PUT", Headers{"transfer-encoding": "chunked"}, false, 400},
		{"partial body", "POST", nil, true, 400},
		{"partial body on GET", "GET", nil, true, 400},
		{"GET without body", "GET", Headers{"content-type": ""}, false, 200},
		{"Mcp-Method names the call", "POST", Headers{"mcp-method": "tools/call", "mcp-name": "delete_file"}, false, 403},
		{"POST, text/plain, no body", "POST", Headers{"content-type": "text/plain"}, false, 400},
		{"POST, no content type, no body", "POST", Headers{"content-type": ""}, false, 400},
		{"POST, form, Content-Length", "POST", Headers{"content-type": "application/x-www-form-urlencoded", "content-length": "20"}, false, 400},
		{"PATCH, octet-stream, Content-Length", "PATCH", Headers{"content-type": "application/octet-stream", "content-length": "20"}, false, 400},
		{"DELETE, text/plain, chunked", "DELETE", Headers{"content-type": "text/plain", "transfer-encoding": "chunked"}, false, 400},
		{"partial text/plain body", "POST", Headers{"content-type": "text/plain"}, true, 400},
		{"POST, text/plain, Content-Length 0", "POST", Headers{"content-type": "text/plain", "content-length": "0"}, false, 200},
		{"DELETE without body", "DELETE", Headers{"content-type": "", "mcp-session-id": "s-not-given"}, false, 200},
		{"OPTIONS without body", "OPTIONS", Headers{"content-type": ""}, false, 200},
		{"GET of an event stream", "GET", Headers{"content-type": "", "accept": "text/event-stream"}, false, 200},
	} {
		req := f.rpcReq(t, tt.method, "auto.example.com", "", tt.headers)
		if tt.partial {
			req.Body, req.BodyPartial = []byte(deleteCall[:20]), true
		}
		if v := f.pl.Check(t.Context(), req); v.Status() != tt.want {
			t.Errorf("%s: %v %d, want %d", tt.name, v.Outcome, v.Status(), tt.want)
		}
	}
}

// TestRuleNameIsFixedPerMethod: resource rules see params.uri, tool rules
// params.name, whatever else the params carry.
func TestRuleNameIsFixedPerMethod(t *testing.T) {
	f := newFixture(t, rpcRoutes)
	tests := []struct {
		name, body string
		want       Outcome
	}{
		{"subscribe to /etc with a harmless name", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///etc/passwd","name":"readme"}}`, Forbidden},
		{"unsubscribe from /etc with a harmless name", `{"jsonrpc":"2.0","id":1,"method":"resources/unsubscribe","params":{"name":"readme","uri":"file:///etc/passwd"}}`, Forbidden},
		{"read /etc with a harmless name", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///etc/passwd","name":"x"}}`, Forbidden},
		{"a harmless uri with an /etc name", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///tmp/x","name":"file:///etc/passwd"}}`, Allowed},
		{"tools/call with a harmless uri", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","uri":"echo"}}`, Forbidden},
		{"tools/call with a delete uri", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","uri":"delete_file"}}`, Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := f.pl.Check(t.Context(), f.rpcReq(t, "POST", "auto.example.com", tt.body, nil)); v.Outcome != tt.want {
				t.Errorf("%v (%s), want %v", v.Outcome, v.Body, tt.want)
			}
		})
	}
}

// TestRulesOnHTTPRouteAreAConfigError: protocol http is the opt-out, so a
// rule on it could never apply.
func TestRulesOnHTTPRouteAreAConfigError(t *testing.T) {
	_, err := config.Parse([]byte("issuers: [{name: a, secret: s}]\nroutes:\n  - name: r\n    issuers: [a]\n    protocol: http\n    rules:\n      - {methods: [tools/call], action: deny}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 5") || !strings.Contains(err.Error(), "protocol") {
		t.Fatalf("error %v, want one naming line 5 and protocol", err)
	}
}

// TestContainsFold: containsFold finds a word in any ASCII case and
// agrees with EqualFold over every window, Unicode folds included (a
// Kelvin sign or a long s is not the letter it folds to).
func TestContainsFold(t *testing.T) {
	windows := func(s, sub string) bool {
		for i := 0; i+len(sub) <= len(s); i++ {
			if strings.EqualFold(s[i:i+len(sub)], sub) {
				return true
			}
		}
		return false
	}
	tests := []struct {
		name, s, sub string
		want         bool
	}{
		{"lower", "text/plain; charset=utf-8", "charset", true},
		{"upper", "TEXT/PLAIN; CHARSET=UTF-8", "charset", true},
		{"mixed", "application/Json", "json", true},
		{"at the end", "Bearer a,bearer", "bearer", true},
		{"absent", "application/xml", "json", false},
		{"cut short", "application/jso", "json", false},
		{"long s", "application/j\u017fon", "json", false},
		{"kelvin sign", "bearer \u212a", "k", false},
		{"empty word", "x", "", true},
		{"empty text", "", "json", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := containsFold(tt.s, tt.sub); got != tt.want || got != windows(tt.s, tt.sub) {
				t.Fatalf("containsFold(%q, %q) = %v, want %v", tt.s, tt.sub, got, tt.want)
			}
		})
	}
}
