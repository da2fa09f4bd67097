package httpauthz

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/extauthz/extauthz/internal/canon"
)

func TestParseTrustedProxies(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{name: "empty", in: "", want: nil},
		{name: "prefixes and addresses", in: "10.0.0.0/8, 192.168.1.7 ,::1", want: []string{"10.0.0.0/8", "192.168.1.7/32", "::1/128"}},
		{name: "host bits are masked", in: "10.1.2.3/8", want: []string{"10.0.0.0/8"}},
		{name: "garbage", in: "10.0.0.0/8,localhost", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTrustedProxies(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			var s []string
			for _, p := range got {
				s = append(s, p.String())
			}
			if !slices.Equal(s, tt.want) {
				t.Fatalf("got %v, want %v", s, tt.want)
			}
		})
	}
}

func TestParseConvention(t *testing.T) {
	tests := []struct {
		in      string
		want    Convention
		wantErr bool
	}{
		{"", Auto, false}, {"auto", Auto, false}, {"NGINX", Nginx, false}, {"traefik", Forwarded, false},
		{"caddy", Forwarded, false}, {"forwarded", Forwarded, false}, {" envoy ", Envoy, false}, {"haproxy", Auto, true},
	}
	for _, tt := range tests {
		got, err := ParseConvention(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseConvention(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil {
			if back, _ := ParseConvention(got.String()); back != got {
				t.Errorf("%v does not round-trip", got)
			}
		}
	}
}

func TestTrusted(t *testing.T) {
	h := NewHandler(nil, Options{}).(*handler)
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:1234", true},
		{"127.9.9.9:1", true},
		{"[::1]:80", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"10.0.0.1:80", false},
		{"@", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := h.trusted(tt.addr); got != tt.want {
			t.Errorf("trusted(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	lan := NewHandler(nil, Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}).(*handler)
	if lan.trusted("127.0.0.1:1") || !lan.trusted("10.2.3.4:5") {
		t.Error("configured proxies do not replace loopback")
	}
}

func TestSplitURL(t *testing.T) {
	tests := []struct {
		in                string
		scheme, host, uri string
		ok                bool
	}{
		{"https://a.example.com/mcp?x=1", "https", "a.example.com", "/mcp?x=1", true},
		{"HTTP://a.example.com:8080", "http", "a.example.com:8080", "/", true},
		{"http://a.example.com?x", "http", "a.example.com", "/?x", true},
		{"ftp://a.example.com/", "", "", "", false},
		{"/relative", "", "", "", false},
		{"http:///nohost", "", "", "", false},
		{"http://user@a.example.com/", "", "", "", false},
	}
	for _, tt := range tests {
		s, h, u, ok := splitURL(tt.in)
		if s != tt.scheme || h != tt.host || u != tt.uri || ok != tt.ok {
			t.Errorf("splitURL(%q) = %q %q %q %v", tt.in, s, h, u, ok)
		}
	}
}

func TestRouteParam(t *testing.T) {
	tests := map[string]string{
		"route=files":          "files",
		"a=b&route=my%20route": "my route",
		"routes=x":             "",
		"route=%zz":            "",
		"":                     "",
	}
	for in, want := range tests {
		if got, _ := routeParam(in); got != want {
			t.Errorf("routeParam(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHeaderMap(t *testing.T) {
	m, underscores, repeated := headerMap(http.Header{
		"Authorization":  {"Bearer x"},
		"X-Custom-Name":  {"a", "b"},
		"Mcp-Session-Id": {"s"},
		"Empty":          {},
	})
	if underscores {
		t.Error("no name holds an underscore")
	}
	if !slices.Equal(repeated, []string{"x-custom-name"}) {
		t.Errorf("repeated %q, want x-custom-name only", repeated)
	}
	if _, underscores, _ := headerMap(http.Header{"X_custom": {"a"}}); !underscores {
		t.Error("X_custom holds an underscore")
	}
	want := map[string]string{"authorization": "Bearer x", "x-custom-name": "a,b", "mcp-session-id": "s"}
	if len(m) != len(want) {
		t.Fatalf("got %v", m)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %q, want %q", k, m[k], v)
		}
	}
}

func TestReadBody(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	tests := []struct {
		name          string
		body          io.Reader
		contentLength int64
		limit         int64
		want          string
		partial       bool
	}{
		{name: "known length under the limit", body: strings.NewReader("hello"), contentLength: 5, limit: 10, want: "hello"},
		{name: "exactly the limit", body: strings.NewReader("hello"), contentLength: 5, limit: 5, want: "hello"},
		{name: "over the limit", body: strings.NewReader("hello world"), contentLength: 11, limit: 5, want: "hello", partial: true},
		{name: "unknown length", body: strings.NewReader(long), contentLength: -1, limit: 1 << 20, want: long},
		{name: "unknown length over the limit", body: strings.NewReader(long), contentLength: -1, limit: 100 << 10, want: long[:100<<10], partial: true},
		{name: "one byte at a time", body: iotest.OneByteReader(strings.NewReader("hello")), contentLength: -1, limit: 10, want: "hello"},
		{name: "a lying content length", body: strings.NewReader("hello world"), contentLength: 2, limit: 100, want: "hello world"},
		{name: "read error", body: io.MultiReader(strings.NewReader("he"), iotest.ErrReader(errors.New("reset"))), contentLength: 5, limit: 10, want: "he", partial: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, partial := readBody(tt.body, tt.contentLength, tt.limit)
			if string(got) != tt.want || partial != tt.partial {
				t.Fatalf("got %d bytes, partial %v; want %d bytes, partial %v", len(got), partial, len(tt.want), tt.partial)
			}
		})
	}
}

// FuzzOriginalRequest throws arbitrary forwarding headers at the
// reconstruction: it never panics, what it accepts is well-formed, and two
// forwarding URIs that disagree are never accepted.
func FuzzOriginalRequest(f *testing.F) {
	f.Add("GET", "/check", "POST", "/mcp", "", "", "", "files.example.com", "https", "8443")
	f.Add("POST", "/check", "", "", "GET", "/a2a", "", "", "", "")
	f.Add("GET", "/", "", "", "", "", "https://a.example.com/x?y", "", "", "443")
	f.Add("GET", "/a/../b", "", "/public/%2e%2e/a2a", "", "/public/x", "http://h/", "h, i", "HTTPS, http", "1, 2")
	f.Add("GET", "/.well-known/oauth-protected-resource", "", "", "", "", "", "[::1]", "", "99999")
	f.Fuzz(func(t *testing.T, method, path, fMethod, fURI, oMethod, oURI, oURL, fHost, fProto, fPort string) {
		hdr := http.Header{}
		set := func(k, v string) {
			if v != "" {
				hdr[k] = []string{v}
			}
		}
		set(hForwardedMethod, fMethod)
		set(hForwardedURI, fURI)
		set(hOriginalMethod, oMethod)
		set(hOriginalURI, oURI)
		set(hOriginalURL, oURL)
		set(hForwardedHost, fHost)
		set(hForwardedProto, fProto)
		set(hForwardedPort, fPort)
		u, err := url.ParseRequestURI(path)
		if err != nil {
			return
		}
		r := &http.Request{Method: method, Host: "svc.internal", URL: u, Header: hdr, RemoteAddr: "127.0.0.1:9"}
		for _, c := range []Convention{Auto, Nginx, Forwarded, Envoy} {
			h := NewHandler(nil, Options{Convention: c, PathPrefix: "/authz"}).(*handler)
			o, bad := h.originalRequest(r, true)
			if bad != "" {
				if o != (original{}) {
					t.Fatalf("%v: refused with a request: %+v", c, o)
				}
				continue
			}
			if _, _, err := canon.Target(o.uri); err != nil || strings.ContainsAny(o.uri, " \r\n\t#") {
				t.Fatalf("%v: accepted URI %q", c, o.uri)
			}
			if _, err := canon.Host(o.host); err != nil || !isToken(o.method) || (o.scheme != "http" && o.scheme != "https") {
				t.Fatalf("%v: accepted %+v", c, o)
			}
			if c == Auto && strings.TrimSpace(fURI) != "" && strings.TrimSpace(oURI) != "" && strings.TrimSpace(fURI) != strings.TrimSpace(oURI) {
				t.Fatalf("disagreeing URIs %q and %q accepted as %q", fURI, oURI, o.uri)
			}
			if c == Envoy && o.forwarded {
				t.Fatal("envoy convention read forwarding headers")
			}
			if o.direct && o.forwarded {
				t.Fatal("a check described by forwarding headers taken for a direct request")
			}
		}
	})
}

// TestClientAddress: the client's address is the last X-Forwarded-For
// entry when a trusted proxy sent it, never an earlier one (the client's
// own claim), unknown when a trusted proxy names none (never the proxy's own
// address), and an untrusted peer's own address.
func TestClientAddress(t *testing.T) {
	peer := netip.MustParseAddr("10.0.0.2")
	tests := []struct {
		name    string
		xff     []string
		trusted bool
		want    string
	}{
		{"no header from a trusted proxy", nil, true, "invalid IP"},
		{"the proxy's entry", []string{"203.0.113.7"}, true, "203.0.113.7"},
		{"the last of a chain", []string{"198.51.100.1, 203.0.113.7"}, true, "203.0.113.7"},
		{"the last of repeated headers", []string{"198.51.100.1", "203.0.113.8"}, true, "203.0.113.8"},
		{"with a port", []string{"[2001:db8::1]:443"}, true, "2001:db8::1"},
		{"mapped IPv4", []string{"::ffff:203.0.113.9"}, true, "203.0.113.9"},
		{"garbage", []string{"203.0.113.7, not-an-ip"}, true, "invalid IP"},
		{"an empty header", []string{""}, true, "invalid IP"},
		{"an untrusted peer's claim", []string{"203.0.113.7"}, false, "10.0.0.2"},
		{"an untrusted peer without the header", nil, false, "10.0.0.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.xff {
				h.Add("X-Forwarded-For", v)
			}
			if got := clientAddress(h, peer, tt.trusted).String(); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}
