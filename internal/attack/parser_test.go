package attack

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// Class 1: parser differentials. Each body below is a tools/call of
// delete_file that a mainstream parser (Go's encoding/json, the SDKs'
// decoders, Python's json, JSON.parse) reads as that call, but that the
// service cannot read unambiguously. On every route but protocol: http it
// must be refused with 400 and a JSON-RPC error (-32700 or -32600, the id
// when every reader agrees on it, else null), over gRPC, through the proxy
// (where delete_file must not run) and on the forward-auth front end.

// parserRoutes: an auto route (the default) and a protocol: mcp route, each
// denying delete_* to everyone without the admin scope.
const parserRoutes = `routes:
  - name: auto
    default: true
    path_prefix: /mcp
    issuers: [hs, other]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
  - name: strict
    path_prefix: /strict
    protocol: mcp
    issuers: [hs, other]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
`

const deleteBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc/passwd"}}}`

func encodeUTF16(s string, bigEndian, bom bool) string {
	units := utf16.Encode([]rune(s))
	if bom {
		units = append([]uint16{0xfeff}, units...)
	}
	var b []byte
	for _, u := range units {
		if bigEndian {
			b = binary.BigEndian.AppendUint16(b, u)
		} else {
			b = binary.LittleEndian.AppendUint16(b, u)
		}
	}
	return string(b)
}

func encodeUTF32(s string, bom bool) string {
	var b []byte
	if bom {
		b = binary.BigEndian.AppendUint32(b, 0xfeff)
	}
	for _, r := range s {
		b = binary.BigEndian.AppendUint32(b, uint32(r))
	}
	return string(b)
}

// deep nests n arrays in the arguments of a delete_file call.
func deep(n int) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc/passwd","x":` +
		strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`
}

// parserCases: name, body, JSON-RPC code and the id the refusal echoes.
var parserCases = []struct {
	name, body string
	code       int
	id         string
}{
	// Duplicate keys: the common parsers take the last.
	{"duplicate jsonrpc", `{"jsonrpc":"1.0","jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"duplicate method", `{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"duplicate method, escaped key", `{"jsonrpc":"2.0","id":7,"method":"tools/list","m\u0065thod":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"duplicate id", `{"jsonrpc":"2.0","id":7,"id":8,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "null"},
	{"duplicate name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","name":"delete_file"}}`, -32600, "7"},
	{"duplicate name, escaped key", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","n\u0061me":"delete_file"}}`, -32600, "7"},
	{"duplicate params", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"params":{"name":"delete_file"}}`, -32600, "7"},
	{"duplicate arguments", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{},"arguments":{"path":"/etc/passwd"}}}`, -32600, "7"},
	{"duplicate key inside arguments", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/tmp/x","path":"/etc/passwd"}}}`, -32600, "7"},
	{"duplicate _meta key", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","_meta":{"progressToken":1,"progressToken":2}}}`, -32600, "7"},
	// Keys Go's encoding/json matches case-insensitively (and by Unicode
	// folding), the go-sdk's decoder does not.
	{"Method key beside method", `{"jsonrpc":"2.0","id":7,"method":"tools/list","Method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"METHOD key alone", `{"jsonrpc":"2.0","id":7,"METHOD":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"JSONRPC key", `{"JSONRPC":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"long s in jsonrpc (raw UTF-8)", "{\"j\u017fonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\"}}", -32600, "7"},
	{"long s in jsonrpc (escaped)", `{"j\u017fonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "7"},
	{"Kelvin sign in params key", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"Params":{"name":"delete_file"}}`, -32600, "7"},
	{"NAME key beside name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","NAME":"delete_file"}}`, -32600, "7"},
	{"Name key alone", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"Name":"delete_file"}}`, -32600, "7"},
	{"ID key beside id", `{"jsonrpc":"2.0","id":7,"ID":8,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "null"},
	// Batches, of any length.
	{"batch of one", `[` + deleteBody + `]`, -32600, "null"},
	{"batch of two", `[{"jsonrpc":"2.0","id":1,"method":"ping"},` + deleteBody + `]`, -32600, "null"},
	{"batch after whitespace", " \n\t[" + deleteBody + `]`, -32600, "null"},
	// Encodings.
	{"UTF-8 byte order mark", "\xef\xbb\xbf" + deleteBody, -32700, "null"},
	{"invalid UTF-8 in arguments", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/etc/passwd` + "\xff" + `"}}}`, -32700, "null"},
	{"overlong UTF-8 in arguments", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"` + "\xc0\xaf" + `etc"}}}`, -32700, "null"},
	{"UTF-8 encoded surrogate in a key", "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"delete_file\",\"\xed\xa0\x80\":1}}", -32700, "null"},
	{"UTF-16LE", encodeUTF16(deleteBody, false, false), -32700, "null"},
	{"UTF-16BE", encodeUTF16(deleteBody, true, false), -32700, "null"},
	{"UTF-16LE with BOM", encodeUTF16(deleteBody, false, true), -32700, "null"},
	{"UTF-16BE with BOM", encodeUTF16(deleteBody, true, true), -32700, "null"},
	{"UTF-32BE with BOM", encodeUTF32(deleteBody, true), -32700, "null"},
	// Nesting.
	{"nesting 200 deep", deep(200), -32600, "null"},
	{"nesting 1000 deep", deep(1000), -32600, "null"},
	// Escapes and types in the names.
	{"NUL after the tool name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file\u0000"}}`, -32600, "7"},
	{"NUL after the method", `{"jsonrpc":"2.0","id":7,"method":"tools/call\u0000","params":{"name":"delete_file"}}`, -32600, "7"},
	{"newline in the tool name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file\n"}}`, -32600, "7"},
	{"unpaired surrogate in the tool name", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete_file\ud800"}}`, -32600, "7"},
	{"method as a number", `{"jsonrpc":"2.0","id":7,"method":1,"params":{"name":"delete_file"}}`, -32600, "7"},
	{"name as an array", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":["delete_file"]}}`, -32600, "7"},
	{"params by position", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["delete_file",{"path":"/etc/passwd"}]}`, -32600, "7"},
	{"fractional id", `{"jsonrpc":"2.0","id":7.5,"method":"tools/call","params":{"name":"delete_file"}}`, -32600, "null"},
	// Trailing data: stream decoders (the SDKs') stop after the first value.
	{"trailing garbage", deleteBody + `x`, -32700, "null"},
	{"two messages", deleteBody + `{"jsonrpc":"2.0","id":8,"method":"ping"}`, -32700, "null"},
	{"trailing NUL", deleteBody + "\x00", -32700, "null"},
	{"comment", `/* x */` + deleteBody, -32700, "null"},
}

// checkBytes sends r over ext_authz gRPC with the body in raw_body, as
// Envoy does with pack_as_bytes: true (the shipped configurations). Only
// then does the service see the bytes the upstream gets: in the string
// field body, Envoy replaces every byte that is not UTF-8 with '!'.
func (s *suite) checkBytes(t *testing.T, r raw) verdict {
	t.Helper()
	if r.Method == "" {
		r.Method = "POST"
	}
	if r.Path == "" {
		r.Path = "/mcp"
	}
	h := map[string]string{":method": r.Method, ":path": r.Path, ":authority": host, ":scheme": "http",
		"x-request-id": "attack-1", "x-envoy-auth-partial-body": "false"}
	for k, v := range r.Headers {
		h[k] = v
	}
	if _, ok := h["content-type"]; !ok {
		h["content-type"] = "application/json"
	}
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "1", Method: r.Method, Path: r.Path, Host: host, Scheme: "http", Protocol: "HTTP/1.1",
			Headers: h, RawBody: []byte(r.Body), Size: int64(len(r.Body)),
		}},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := s.grpc.Check(ctx, req)
	if err != nil {
		t.Fatalf("Check returned a gRPC error (Envoy may fail open on it): %v", err)
	}
	return readVerdict(resp)
}

// packAsBytes is the proxy as the shipped Envoy configurations set it up.
var packAsBytes = options{Build: &envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20, PackAsBytes: true}}

// TestParserDifferentials sends every case over gRPC to both routes.
func TestParserDifferentials(t *testing.T) {
	s := start(t, parserRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, path := range []string{"/mcp", "/strict/mcp"} {
		for _, tc := range parserCases {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				v := s.checkBytes(t, raw{Path: path, Headers: map[string]string{"authorization": "Bearer " + user}, Body: tc.body})
				v.wantDenied(t, 400)
				e := v.rpc(t)
				if e.Error.Code != tc.code || string(e.ID) != tc.id {
					t.Fatalf("JSON-RPC error %d id %s, want %d id %s", e.Error.Code, e.ID, tc.code, tc.id)
				}
			})
		}
	}
}

// TestRoutesOfTheFamily: the two routes are what the family needs: on the
// auto route a body no parser reads as JSON is plain HTTP, on the mcp route
// every body must be JSON-RPC.
func TestRoutesOfTheFamily(t *testing.T) {
	s := start(t, parserRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	h := map[string]string{"authorization": "Bearer " + user, "content-type": "text/plain"}
	if v := s.check(t, raw{Path: "/mcp", Headers: h, Body: "hello"}); !v.Allowed {
		t.Fatalf("auto route refused a plain text body: %d %s", v.Status, v.Body)
	}
	v := s.check(t, raw{Path: "/strict/mcp", Headers: h, Body: "hello"})
	v.wantDenied(t, 400)
	if e := v.rpc(t); e.Error.Code != -32700 {
		t.Fatalf("mcp route: code %d, want -32700", e.Error.Code)
	}
}

// TestParserDifferentialsLabelled: a body is refused however it is labelled:
// a content type that does not say JSON, none at all, or only an MCP header.
func TestParserDifferentialsLabelled(t *testing.T) {
	s := start(t, parserRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	labels := map[string]map[string]string{
		"text/plain":                  {"content-type": "text/plain"},
		"form":                        {"content-type": "application/x-www-form-urlencoded"},
		"octet-stream":                {"content-type": "application/octet-stream"},
		"json with charset utf-16":    {"content-type": "application/json; charset=utf-16"},
		"text/plain with MCP version": {"content-type": "text/plain", "mcp-protocol-version": "2025-06-18"},
	}
	for name, h := range labels {
		for _, tc := range parserCases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				h := map[string]string{"authorization": "Bearer " + user, "content-type": h["content-type"], "mcp-protocol-version": h["mcp-protocol-version"]}
				if h["mcp-protocol-version"] == "" {
					delete(h, "mcp-protocol-version")
				}
				v := s.checkBytes(t, raw{Headers: h, Body: tc.body})
				v.wantDenied(t, 400)
				v.rpc(t)
			})
		}
	}
}

// TestParserDifferentialsEndToEnd sends every case through the proxy to the
// go-sdk server: delete_file never runs. (The SDK refuses some bodies
// itself; what is asserted is the service's refusal.)
func TestParserDifferentialsEndToEnd(t *testing.T) {
	s := start(t, parserRoutes, packAsBytes)
	user := token(t, issuerHS, "mallory", "read")
	for _, tc := range parserCases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), tc.body)
			if status != 400 || !strings.Contains(body, `"jsonrpc":"2.0"`) {
				t.Fatalf("status %d body %s, want 400 with a JSON-RPC error", status, body)
			}
			if n := s.ran("delete_file"); n != 0 {
				t.Fatalf("delete_file ran %d times", n)
			}
		})
	}
	// The control: the same user's well-formed calls pass and run.
	if status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), toolCall(1, "echo", `{"text":"hi"}`)); status != 200 || s.ran("echo") != 1 {
		t.Fatalf("echo: status %d body %s", status, body)
	}
}

// TestInvalidUTF8WithoutPackAsBytes: when the proxy sends the body as a
// string, Envoy turns bytes that are not UTF-8 into '!' and the service
// reads the call the upstream rejects or reads the same way (the structure
// is kept); delete_file still does not run.
func TestInvalidUTF8WithoutPackAsBytes(t *testing.T) {
	s := start(t, parserRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, tc := range parserCases {
		if !strings.Contains(tc.name, "UTF-8") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), tc.body)
			if status < 400 || status > 403 || s.ran("delete_file") != 0 {
				t.Fatalf("status %d body %s, ran %d", status, body, s.ran("delete_file"))
			}
		})
	}
}

// TestParserDifferentialsForwardAuth: the forward-auth front end, given the
// body (Traefik forwardBody), refuses every case with 400, never 2xx.
func TestParserDifferentialsForwardAuth(t *testing.T) {
	s := start(t, parserRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	h := bearer(user)
	for _, tc := range parserCases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := s.forwardAuth(t, fwd{Header: h, Body: tc.body})
			if status != 400 || !strings.Contains(body, `"jsonrpc":"2.0"`) {
				t.Fatalf("status %d body %s, want 400 with a JSON-RPC error", status, body)
			}
		})
	}
	if status, _, body := s.forwardAuth(t, fwd{Header: h, Body: toolCall(1, "echo", "")}); status != 200 {
		t.Fatalf("control echo: status %d body %s", status, body)
	}
	if status, _, _ := s.forwardAuth(t, fwd{Header: h, Body: deleteBody}); status != 403 {
		t.Fatalf("control delete_file: status %d, want 403", status)
	}
}

// TestLabelsThatChangeTheReading: a charset other than UTF-8 tells an
// upstream that honours it to read other characters, and a compressed body
// is read by upstreams that inflate requests (Express's body parser does):
// neither is readable as sent, so both are refused.
func TestLabelsThatChangeTheReading(t *testing.T) {
	s := start(t, parserRoutes, packAsBytes)
	user := token(t, issuerHS, "mallory", "read")
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte(deleteBody))
	_ = w.Close()
	echo := toolCall(5, "echo", `{"text":"hi"}`)
	for _, tc := range []struct {
		name, body string
		headers    map[string]string
	}{
		{"charset utf-16", echo, map[string]string{"content-type": "application/json; charset=utf-16"}},
		{"charset iso-8859-1", echo, map[string]string{"content-type": "application/json; charset=ISO-8859-1"}},
		{"charset utf-32 on text/plain", echo, map[string]string{"content-type": "text/plain; charset=utf-32"}},
		{"gzip body", gz.String(), map[string]string{"content-type": "application/json", "content-encoding": "gzip"}},
		{"gzip body with an MCP header", gz.String(), map[string]string{"content-type": "application/octet-stream", "content-encoding": "gzip", "mcp-protocol-version": "2025-06-18"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{"authorization": "Bearer " + user}
			for k, v := range tc.headers {
				h[k] = v
			}
			v := s.checkBytes(t, raw{Headers: h, Body: tc.body})
			v.wantDenied(t, 400)
			v.rpc(t)
			hh := bearer(user)
			for k, v := range tc.headers {
				hh.Set(k, v)
			}
			status, _, _ := s.viaEnvoy(t, http.MethodPost, "/mcp", hh, tc.body)
			if status != 400 || s.ran("echo") != 0 || s.ran("delete_file") != 0 {
				t.Fatalf("through the proxy: status %d, echo ran %d, delete_file ran %d", status, s.ran("echo"), s.ran("delete_file"))
			}
		})
	}
}

// TestPartialBodyFailsClosed: a body the proxy cut short cannot be read; on
// a route with rules its call is unknown and refused (400), as is a JSON
// request whose body the proxy did not send at all.
func TestPartialBodyFailsClosed(t *testing.T) {
	s := start(t, parserRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	auth := map[string]string{"authorization": "Bearer " + user}
	for _, tc := range []struct {
		name string
		r    raw
	}{
		{"partial tools/call", raw{Headers: auth, Body: deleteBody[:40], Partial: true}},
		{"partial body on GET", raw{Method: "GET", Headers: auth, Body: deleteBody[:40], Partial: true}},
		{"no body, JSON content length", raw{Headers: map[string]string{"authorization": "Bearer " + user, "content-type": "application/json", "content-length": "118"}}},
		{"no body on PUT, chunked", raw{Method: "PUT", Headers: map[string]string{"authorization": "Bearer " + user, "content-type": "application/json", "transfer-encoding": "chunked"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, tc.r)
			v.wantDenied(t, 400)
			v.rpc(t)
		})
	}
}

// argumentRoutes: rules that read tool arguments inside lists and nested
// objects; everything they do not allow is denied.
const argumentRoutes = `routes:
  - name: mcp
    default: true
    path_prefix: /mcp
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    default_action: deny
    rules:
      - {name: copy inside /tmp, methods: [tools/call], names: [copy_files], when: 'mcp.arguments.files.all(f, f.path.startsWith("/tmp/"))'}
      - {name: move inside /tmp, methods: [tools/call], names: [move_file], when: 'mcp.arguments.files[0].path.startsWith("/tmp/")'}
      - {name: write inside /tmp, methods: [tools/call], names: [write_file], when: 'mcp.arguments.opts.path.startsWith("/tmp/")'}
      - {name: no forced sync, methods: [tools/call], names: [sync], when: 'mcp.arguments.items.all(i, !has(i.force))'}
`

// TestArgumentKeysInAnotherCase: Go's encoding/json binds a struct field to
// a key in any case (Unicode folding), the last one winning, inside lists
// as at the top level: a tool decoding []struct{Path string} copies
// /etc/passwd from {"path": "/tmp/a", "PATH": "/etc/passwd"}. A rule
// reading such arguments fails, and the call is denied (403, the request's
// id); the same arguments without the other key pass.
func TestArgumentKeysInAnotherCase(t *testing.T) {
	s := start(t, argumentRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	auth := map[string]string{"authorization": "Bearer " + user}
	for _, tc := range []struct {
		name, tool, args string
		allowed          bool
	}{
		{"control: list inside /tmp", "copy_files", `{"files":[{"path":"/tmp/a"},{"path":"/tmp/b"}]}`, true},
		{"control: list outside /tmp", "copy_files", `{"files":[{"path":"/etc/passwd"}]}`, false},
		{"list, PATH after path", "copy_files", `{"files":[{"path":"/tmp/a","PATH":"/etc/passwd"}]}`, false},
		{"list, PATH before path", "copy_files", `{"files":[{"PATH":"/etc/passwd","path":"/tmp/a"}]}`, false},
		{"list, pAth", "copy_files", `{"files":[{"path":"/tmp/a","pAth":"/etc/shadow"}]}`, false},
		{"list, escaped upper case", "copy_files", `{"files":[{"path":"/tmp/a","p\u0041th":"/etc/shadow"}]}`, false},
		{"list, deeper than read", "copy_files", `{"files":[{"path":"/tmp/a","meta":{"mode":1,"MODE":2}}]}`, false},
		{"list in the second element", "copy_files", `{"files":[{"path":"/tmp/a"},{"path":"/tmp/b","Path":"/etc/passwd"}]}`, false},
		{"indexed list, PATH after path", "move_file", `{"files":[{"path":"/tmp/a","PATH":"/etc/passwd"}]}`, false},
		{"nested object, PATH after path", "write_file", `{"opts":{"path":"/tmp/a","PATH":"/etc/passwd"}}`, false},
		{"control: list without force", "sync", `{"items":[{"id":1},{"id":2}]}`, true},
		{"list, only Force", "sync", `{"items":[{"id":1,"Force":true}]}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: auth, Body: toolCall(7, tc.tool, tc.args)})
			if tc.allowed {
				if !v.Allowed {
					t.Fatalf("refused: %d %s", v.Status, v.Body)
				}
				return
			}
			v.wantDenied(t, 403)
			if e := v.rpc(t); string(e.ID) != "7" {
				t.Fatalf("JSON-RPC error id %s, want 7", e.ID)
			}
		})
	}
}

// inflating is request decompression as an upstream may run it after the
// service (an Envoy decompressor after ext_authz, Echo's Decompress): a
// gzip or deflate body is inflated whatever its Content-Type.
func inflating(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rd io.ReadCloser
		var err error
		switch strings.ToLower(r.Header.Get("Content-Encoding")) {
		case "gzip":
			rd, err = gzip.NewReader(r.Body)
		case "deflate":
			rd, err = zlib.NewReader(r.Body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if rd != nil {
			r.Body = rd
			r.Header.Del("Content-Encoding")
			r.Header.Del("Content-Length")
			r.ContentLength = -1
		}
		next.ServeHTTP(w, r)
	})
}

// a2aUpstream replaces the suite's MCP server with an A2A agent (a2a-go,
// which reads a body whatever its Content-Type), behind wrap, counting the
// calls it answered with a result.
func a2aUpstream(results *atomic.Int32, wrap func(http.Handler) http.Handler) func(http.Handler) http.Handler {
	agent := wrap(testpeers.NewA2AAgent(testpeers.A2AOptions{}))
	return func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			agent.ServeHTTP(rec, r)
			if strings.Contains(rec.Body.String(), `"result"`) {
				results.Add(1)
			}
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	}
}

const messageSend = `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`

func compress(s string, deflate bool) string {
	var b bytes.Buffer
	var w io.WriteCloser = gzip.NewWriter(&b)
	if deflate {
		w = zlib.NewWriter(&b)
	}
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.String()
}

// TestCompressedBodies: a body with any Content-Encoding but identity
// cannot be read as the upstream will read it once inflated, whatever its
// Content-Type says: on every route but protocol: http it is refused with
// 400 / -32700 and a null id (the id is in the compressed bytes). A body
// that says identity is read as usual.
func TestCompressedBodies(t *testing.T) {
	s := start(t, parserRoutes, packAsBytes)
	user := token(t, issuerHS, "mallory", "read")
	gzDelete := compress(deleteBody, false)
	for _, path := range []string{"/mcp", "/strict/mcp"} {
		for _, tc := range []struct {
			name, encoding, contentType, body string
		}{
			{"gzip, json", "gzip", "application/json", gzDelete},
			{"gzip, text/plain", "gzip", "text/plain", gzDelete},
			{"gzip, octet-stream", "gzip", "application/octet-stream", gzDelete},
			{"gzip, form", "gzip", "application/x-www-form-urlencoded", gzDelete},
			{"gzip, no content type", "gzip", "", gzDelete},
			{"deflate, text/plain", "deflate", "text/plain", compress(deleteBody, true)},
			{"br, text/plain", "br", "text/plain", gzDelete},
			{"zstd, octet-stream", "zstd", "application/octet-stream", gzDelete},
			{"upper case GZIP", "GZIP", "text/plain", gzDelete},
			{"an unknown coding", "x-custom", "text/plain", gzDelete},
			{"gzip then identity", "gzip, identity", "text/plain", gzDelete},
			{"identity then gzip", "identity,gzip", "text/plain", gzDelete},
			// The bytes are plain JSON, but an upstream that honours the
			// label refuses them or reads something else.
			{"plain JSON labelled gzip", "gzip", "application/json", deleteBody},
		} {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				h := map[string]string{"authorization": "Bearer " + user, "content-encoding": tc.encoding, "content-type": tc.contentType}
				v := s.checkBytes(t, raw{Path: path, Headers: h, Body: tc.body})
				v.wantDenied(t, 400)
				if e := v.rpc(t); e.Error.Code != -32700 || string(e.ID) != "null" {
					t.Fatalf("JSON-RPC error %d id %s, want -32700 id null", e.Error.Code, e.ID)
				}
			})
		}
	}
	// Controls: identity is no coding; the rules then decide.
	for _, enc := range []string{"identity", "Identity", " identity "} {
		h := map[string]string{"authorization": "Bearer " + user, "content-encoding": enc}
		if v := s.checkBytes(t, raw{Headers: h, Body: deleteBody}); v.Allowed || v.Status != 403 {
			t.Errorf("delete_file with content-encoding %q: allowed %v status %d, want 403", enc, v.Allowed, v.Status)
		}
		if v := s.checkBytes(t, raw{Headers: h, Body: toolCall(1, "echo", "")}); !v.Allowed {
			t.Errorf("echo with content-encoding %q: refused %d %s", enc, v.Status, v.Body)
		}
	}
}

// TestCompressedBodiesEndToEnd: an agent behind a decompressor serves a
// gzip or deflate body labelled text/plain; on a route denying message/*
// it never runs, through the proxy and on the forward-auth front end.
func TestCompressedBodiesEndToEnd(t *testing.T) {
	var results atomic.Int32
	s := start(t, methodRoutes, options{Upstream: a2aUpstream(&results, inflating)})
	user := token(t, issuerHS, "mallory", "read")
	for _, tc := range []struct{ name, encoding, contentType, body string }{
		{"gzip, text/plain", "gzip", "text/plain", compress(messageSend, false)},
		{"gzip, octet-stream", "gzip", "application/octet-stream", compress(messageSend, false)},
		{"deflate, text/plain", "deflate", "text/plain", compress(messageSend, true)},
		{"gzip, json", "gzip", "application/json", compress(messageSend, false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bearer(user)
			h.Set("Content-Type", tc.contentType)
			h.Set("Content-Encoding", tc.encoding)
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", h, tc.body)
			if status != 400 || !strings.Contains(body, `"code":-32700`) || results.Load() != 0 {
				t.Fatalf("through the proxy: status %d body %.200s; the agent answered %d calls", status, body, results.Load())
			}
			if status, _, body := s.forwardAuth(t, fwd{Header: h, Body: tc.body}); status != 400 || !strings.Contains(body, `"code":-32700`) {
				t.Fatalf("forward-auth: status %d body %.200s", status, body)
			}
		})
	}
	// The control: the agent runs a message labelled text/plain that the
	// rules allow (a2a-go does not look at Content-Type).
	h := bearer(token(t, issuerHS, "alice", "a2a.write"))
	h.Set("Content-Type", "text/plain")
	if status, _, body := s.viaEnvoy(t, http.MethodPost, "/a2a", h, messageSend); status != 200 || results.Load() != 1 {
		t.Fatalf("control: status %d body %.200s; the agent answered %d calls", status, body, results.Load())
	}
}

// withheldRoutes: an auto route with rules, the documented configuration
// without the body (request_body: none, upstream_validates_mcp_headers),
// and an auto route without rules.
const withheldRoutes = `sessions:
  task_ownership: false
routes:
  - name: auto
    default: true
    path_prefix: /mcp
    issuers: [hs]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
      - {methods: ["message/*"], action: deny}
  - name: headers
    path_prefix: /validated
    request_body: none
    upstream_validates_mcp_headers: true
    issuers: [hs]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], action: deny}
      - {methods: ["message/*"], action: deny}
  - name: open
    path_prefix: /open
    issuers: [hs]
    audiences: [` + audience + `]
`

// TestWithheldBodies: a request carrying a body the service was not given
// (a Content-Length, a Transfer-Encoding, a POST without a length, a cut
// body) says what it holds only in its Content-Type, the client's word: on
// a route with rules it is refused (400, -32600, id null) unless
// Mcp-Method and Mcp-Name name the call to an upstream that checks them.
// Requests without a body (a GET of an event stream, a DELETE of a
// session, OPTIONS, a POST with Content-Length: 0) pass, as does anything
// on a route without rules.
func TestWithheldBodies(t *testing.T) {
	s := start(t, withheldRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	with := func(kv ...string) map[string]string {
		h := map[string]string{"authorization": "Bearer " + user}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	mcpHeaders := func(tool string, kv ...string) map[string]string {
		return with(append([]string{"mcp-method", "tools/call", "mcp-name", tool, "mcp-protocol-version", "2026-07-28", "content-type", "application/json"}, kv...)...)
	}
	for _, tc := range []struct {
		name   string
		r      raw
		status int // 200: allowed
	}{
		{"POST, text/plain, content-length", raw{Headers: with("content-type", "text/plain", "content-length", "160")}, 400},
		{"POST, form, content-length", raw{Headers: with("content-type", "application/x-www-form-urlencoded", "content-length", "160")}, 400},
		{"POST, octet-stream, content-length", raw{Headers: with("content-type", "application/octet-stream", "content-length", "160")}, 400},
		{"POST, no content type, content-length", raw{Headers: with("content-length", "160")}, 400},
		{"POST, text/plain, no length (HTTP/2)", raw{Headers: with("content-type", "text/plain")}, 400},
		{"POST, no content type, no length", raw{Headers: with()}, 400},
		{"PUT, text/plain, chunked", raw{Method: "PUT", Headers: with("content-type", "text/plain", "transfer-encoding", "chunked")}, 400},
		{"PATCH, text/plain, content-length", raw{Method: "PATCH", Headers: with("content-type", "text/plain", "content-length", "160")}, 400},
		{"DELETE, content-length", raw{Method: "DELETE", Headers: with("content-length", "160")}, 400},
		{"POST, text/plain, cut body", raw{Headers: with("content-type", "text/plain"), Body: "hello, this is not", Partial: true}, 400},
		{"POST, text/plain, content-length, MCP version only", raw{Headers: with("content-type", "text/plain", "content-length", "160", "mcp-protocol-version", "2025-06-18")}, 400},
		// Legitimate requests without a body.
		{"GET of an event stream", raw{Method: "GET", Headers: with("accept", "text/event-stream")}, 200},
		{"DELETE of a session", raw{Method: "DELETE", Headers: with("mcp-session-id", "s-withheld-1")}, 200},
		{"OPTIONS", raw{Method: "OPTIONS", Headers: with()}, 200},
		{"HEAD", raw{Method: "HEAD", Headers: with()}, 200},
		{"POST, content-length 0", raw{Headers: with("content-type", "text/plain", "content-length", "0")}, 200},
		{"POST, text/plain, the body given", raw{Headers: with("content-type", "text/plain"), Body: "hello"}, 200},
		// The documented configuration without the body.
		{"documented: POST, text/plain, no MCP headers", raw{Path: "/validated", Headers: with("content-type", "text/plain")}, 400},
		{"documented: POST, no content type, no MCP headers", raw{Path: "/validated", Headers: with()}, 400},
		{"documented: POST, json, no MCP headers", raw{Path: "/validated", Headers: with("content-type", "application/json", "content-length", "160")}, 400},
		{"documented: MCP headers name an allowed tool", raw{Path: "/validated", Headers: mcpHeaders("echo", "content-length", "160")}, 200},
		{"documented: MCP headers name an allowed tool, text/plain", raw{Path: "/validated", Headers: mcpHeaders("echo", "content-type", "text/plain")}, 200},
		{"documented: MCP headers name a denied tool", raw{Path: "/validated", Headers: mcpHeaders("delete_file", "content-length", "160")}, 403},
		{"documented: GET of an event stream", raw{Method: "GET", Path: "/validated", Headers: with("accept", "text/event-stream")}, 200},
		// No rules: nothing to decide on the call.
		{"no rules: POST, text/plain, content-length", raw{Path: "/open", Headers: with("content-type", "text/plain", "content-length", "160")}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, tc.r)
			if tc.status == 200 {
				if !v.Allowed {
					t.Fatalf("refused: %d %s", v.Status, v.Body)
				}
				return
			}
			v.wantDenied(t, tc.status)
			e := v.rpc(t)
			if tc.status == 400 && (e.Error.Code != -32600 || string(e.ID) != "null" || !strings.Contains(v.Body, "send the body to the service")) {
				t.Fatalf("JSON-RPC error %d id %s, body %s; want -32600 id null naming the remedy", e.Error.Code, e.ID, v.Body)
			}
		})
	}
}

// TestWithheldBodiesForwardAuth: a forward-auth proxy that does not send
// the body (nginx auth_request, Caddy forward_auth, Traefik without
// forwardBody) asks with a request of its own, whose Content-Length
// (0, or none) says nothing of the client's body.
func TestWithheldBodiesForwardAuth(t *testing.T) {
	s := start(t, withheldRoutes, options{})
	user := token(t, issuerHS, "mallory", "read")
	for _, tc := range []struct {
		name, method, uri string
		header            map[string]string
		status            int
	}{
		{"POST, text/plain", "POST", "/mcp", map[string]string{"Content-Type": "text/plain"}, 400},
		{"POST, no content type", "POST", "/mcp", nil, 400},
		{"POST, form", "POST", "/mcp", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 400},
		{"documented: POST, text/plain", "POST", "/validated", map[string]string{"Content-Type": "text/plain"}, 400},
		{"documented: MCP headers name an allowed tool", "POST", "/validated", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo", "Mcp-Protocol-Version": "2026-07-28"}, 200},
		{"documented: MCP headers name a denied tool", "POST", "/validated", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "delete_file", "Mcp-Protocol-Version": "2026-07-28"}, 403},
		{"GET of an event stream", "GET", "/mcp", map[string]string{"Accept": "text/event-stream"}, 200},
		{"DELETE of a session", "DELETE", "/mcp", map[string]string{"Mcp-Session-Id": "s-withheld-2"}, 200},
		{"no rules: POST, text/plain", "POST", "/open", map[string]string{"Content-Type": "text/plain"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bearer(user)
			for k, v := range tc.header {
				h.Set(k, v)
			}
			status, _, body := s.forwardAuth(t, fwd{Method: tc.method, URI: tc.uri, Header: h})
			if status != tc.status {
				t.Fatalf("status %d body %s, want %d", status, body, tc.status)
			}
			if status == 400 && !strings.Contains(body, `"code":-32600`) {
				t.Fatalf("body %s, want a JSON-RPC error", body)
			}
		})
	}
}

// TestWithheldBodiesEndToEnd: behind a proxy that does not send the body
// (Envoy without with_request_body), an agent that ignores Content-Type
// never runs a message/send labelled text/plain or form on a route
// denying message/*.
func TestWithheldBodiesEndToEnd(t *testing.T) {
	var results atomic.Int32
	s := start(t, withheldRoutes, options{Build: &envoytest.BuildOptions{}, Upstream: a2aUpstream(&results, func(h http.Handler) http.Handler { return h })})
	user := token(t, issuerHS, "mallory", "read")
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/octet-stream", "application/json"} {
		t.Run(ct, func(t *testing.T) {
			h := bearer(user)
			h.Set("Content-Type", ct)
			status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", h, messageSend)
			if status != 400 || results.Load() != 0 {
				t.Fatalf("status %d body %.200s; the agent answered %d calls", status, body, results.Load())
			}
		})
	}
	// The control: on the route without rules the agent runs it.
	h := bearer(user)
	h.Set("Content-Type", "text/plain")
	if status, _, body := s.viaEnvoy(t, http.MethodPost, "/open", h, messageSend); status != 200 || results.Load() != 1 {
		t.Fatalf("control: status %d body %.200s; the agent answered %d calls", status, body, results.Load())
	}
}
