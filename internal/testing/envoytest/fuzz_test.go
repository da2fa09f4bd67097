package envoytest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"
)

// FuzzBuildCheckRequest: whatever the client sends, the CheckRequest
// marshals (every string valid UTF-8), has Envoy's shape, sanitises header
// values one byte for one, and never sends more body than the limit.
func FuzzBuildCheckRequest(f *testing.F) {
	f.Add("/mcp", "x=1", "X-Custom", []byte("value"), []byte(`{"a":1}`), false)
	f.Add("/a b", "", "x-bin", []byte("\xc0\xc0\x00"), []byte("\xff\xfe"), true)
	f.Add("/", "a=%zz", "Host", []byte("evil"), []byte(""), false)
	f.Fuzz(func(t *testing.T, path, query, name string, value, body []byte, raw bool) {
		r := &http.Request{
			Method:     http.MethodPost,
			URL:        &url.URL{Path: path, RawQuery: query},
			Host:       "mcp.example.test",
			Header:     http.Header{name: {string(value)}},
			Proto:      "HTTP/1.1",
			ProtoMajor: 1, ProtoMinor: 1,
			RemoteAddr: "192.0.2.1:1234",
		}
		opts := BuildOptions{WithBody: true, MaxRequestBytes: 8, AllowPartial: true, EncodeRawHeaders: raw}
		req := BuildCheckRequest(r, body, opts)
		if req == nil {
			t.Fatal("nil CheckRequest with AllowPartial")
		}
		if _, err := proto.Marshal(req); err != nil {
			t.Fatalf("does not marshal: %v", err)
		}
		assertEnvoyShape(t, req)
		h := httpOf(req)
		if len(h.GetBody()) > 8 || len(h.GetRawBody()) > 8 {
			t.Fatalf("sent %d body bytes over the limit", len(h.GetBody()))
		}
		lk := strings.ToLower(name)
		if _, managed := map[string]bool{
			"host": true, "content-length": true, "te": true, "connection": true, "keep-alive": true, "proxy-connection": true,
			"transfer-encoding": true, "upgrade": true, headerForwardedProto: true, headerRequestID: true, headerEnvoyInternal: true,
			headerPartialBody: true,
		}[lk]; managed || strings.HasPrefix(lk, ":") || !validHeaderName(name) {
			return
		}
		if raw {
			for _, e := range h.GetHeaderMap().GetHeaders() {
				if e.GetKey() == lk && string(e.GetRawValue()) != string(value) {
					t.Fatalf("raw value %q, sent %q", e.GetRawValue(), value)
				}
			}
		} else if got := h.GetHeaders()[lk]; len(got) != len(value) {
			t.Fatalf("header %q sanitised to %d bytes from %d", lk, len(got), len(value))
		}
	})
}

// FuzzApplyOK: an accepted answer leaves only valid headers and never
// touches the authority; a rejected one leaves the request as it was.
func FuzzApplyOK(f *testing.F) {
	f.Add("x-user-id", "alice", false, "x-session-id")
	f.Add("Host", "evil", true, ":authority")
	f.Add("x-a", "v\r\nx-b: 1", false, "x user")
	f.Add(":path", "/v2?q=1", false, "host")
	f.Fuzz(func(t *testing.T, key, value string, appendValue bool, remove string) {
		r := newRequest("GET", "http://mcp.example.test/mcp?a=1", map[string][]string{"X-User-Id": {"forged"}, "X-A": {"1"}}, "")
		before, beforeURI := r.Header.Clone(), r.URL.RequestURI()
		_, err := ApplyOK(r, &authv3.OkHttpResponse{
			Headers:              []*corev3.HeaderValueOption{hv(key, value, appendValue)},
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{hv(key, value, appendValue)},
			HeadersToRemove:      []string{remove},
			QueryParametersToSet: []*corev3.QueryParameter{{Key: key, Value: value}},
		})
		if r.Host != "mcp.example.test" {
			t.Fatalf("authority changed to %q", r.Host)
		}
		if err != nil {
			if !reflect.DeepEqual(r.Header, before) || r.URL.RequestURI() != beforeURI {
				t.Fatal("a rejected answer mutated the request")
			}
			return
		}
		for k, vs := range r.Header {
			if !validHeaderName(k) {
				t.Fatalf("invalid header name %q upstream", k)
			}
			for _, v := range vs {
				if !validHeaderValue(v) {
					t.Fatalf("invalid value for %q upstream", k)
				}
			}
		}
	})
}

// FuzzRewriteQuery: the rewritten query is stable under a second rewrite
// and holds no removed name.
func FuzzRewriteQuery(f *testing.F) {
	f.Add("b=2&a=1&a=3&flag", "a", "9", "b")
	f.Add("=x&&y=a=b", "", "", "y")
	f.Fuzz(func(t *testing.T, raw, key, value, remove string) {
		if !queryIsURLEncoded(key) || !queryIsURLEncoded(value) {
			t.Skip("ApplyOK rejects these before rewriting")
		}
		once := rewriteQuery(raw, []*corev3.QueryParameter{{Key: key, Value: value}}, []string{remove})
		if twice := rewriteQuery(once, nil, nil); twice != once {
			t.Fatalf("not stable: %q then %q", once, twice)
		}
		if remove != key {
			for seg := range strings.SplitSeq(once, "&") {
				if k, _, _ := strings.Cut(seg, "="); seg != "" && k == remove {
					t.Fatalf("removed name %q still in %q", remove, once)
				}
			}
		}
	})
}

// FuzzNormaliseGoJSON: any input either fails cleanly or yields JSON.
func FuzzNormaliseGoJSON(f *testing.F) {
	f.Add([]byte(`{"source":{"address":{"Address":{"SocketAddress":{"address":"127.0.0.1","PortSpecifier":{"PortValue":52702}}}}},"request":{"time":{"seconds":1634830413,"nanos":240094000}}}`))
	f.Add([]byte(`{"time":{"seconds":1e99}}`))
	f.Add([]byte(`[{"A":{"B":[]}}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := normaliseGoJSON(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %q from %q", out, in)
		}
	})
}
