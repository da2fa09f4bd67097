package dpop

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestNormalizeURI(t *testing.T) {
	tests := []struct {
		name, in, want string // want "" refuses
	}{
		{name: "plain", in: "https://mcp.example.com/mcp", want: "https://mcp.example.com/mcp"},
		{name: "scheme and host case", in: "HTTPS://MCP.Example.COM/mcp", want: "https://mcp.example.com/mcp"},
		{name: "path case is kept", in: "https://mcp.example.com/MCP", want: "https://mcp.example.com/MCP"},
		{name: "default https port", in: "https://mcp.example.com:443/mcp", want: "https://mcp.example.com/mcp"},
		{name: "default http port", in: "http://mcp.example.com:80/mcp", want: "http://mcp.example.com/mcp"},
		{name: "another port is kept", in: "https://mcp.example.com:8443/mcp", want: "https://mcp.example.com:8443/mcp"},
		{name: "the https port over http is kept", in: "http://mcp.example.com:443/mcp", want: "http://mcp.example.com:443/mcp"},
		{name: "empty path", in: "https://mcp.example.com", want: "https://mcp.example.com/"},
		{name: "query dropped", in: "https://mcp.example.com/mcp?a=b", want: "https://mcp.example.com/mcp"},
		{name: "query without a path", in: "https://mcp.example.com?a=b", want: "https://mcp.example.com/"},
		{name: "escape hex upper-cased", in: "https://mcp.example.com/caf%c3%a9", want: "https://mcp.example.com/caf%C3%A9"},
		{name: "a fragment", in: "https://mcp.example.com/mcp#c"},
		{name: "escaped unreserved characters", in: "https://mcp.example.com/%6d%63%70"},
		{name: "an encoded slash", in: "https://mcp.example.com/a%2fb"},
		{name: "an empty segment", in: "https://mcp.example.com//mcp"},
		{name: "IPv6 host", in: "https://[::1]:443/mcp", want: "https://[::1]/mcp"},
		{name: "dot segments", in: "https://mcp.example.com/a/../mcp"},
		{name: "a trailing dot in the host", in: "https://mcp.example.com./mcp"},
		{name: "userinfo", in: "https://user@mcp.example.com/mcp"},
		{name: "userinfo with password", in: "https://user:pw@mcp.example.com/mcp"},
		{name: "another scheme", in: "wss://mcp.example.com/mcp"},
		{name: "relative", in: "/mcp"},
		{name: "no host", in: "https:///mcp"},
		{name: "broken escape", in: "https://mcp.example.com/%zz"},
		{name: "truncated escape", in: "https://mcp.example.com/%4"},
		{name: "space in path", in: "https://mcp.example.com/a b"},
		{name: "non-ASCII host", in: "https://mcp.exämple.com/mcp"},
		{name: "escaped host", in: "https://mcp%2Eexample.com/mcp"},
		{name: "port not a number", in: "https://mcp.example.com:x/mcp"},
		{name: "backslash in path", in: `https://mcp.example.com/a\b`},
		{name: "unclosed IPv6", in: "https://[::1/mcp"},
		{name: "broken escape in the fragment", in: "https://mcp.example.com/mcp#%X0"},
		{name: "space in the query", in: "https://mcp.example.com/mcp?a b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := NormalizeURI(tc.in)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("NormalizeURI(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
			}
		})
	}
}

// FuzzNormalizeURI holds NormalizeURI to net/url: whatever it accepts,
// net/url parses as the same scheme, host and decoded path, with no
// userinfo, and normalizing again changes nothing.
func FuzzNormalizeURI(f *testing.F) {
	for _, s := range []string{"https://mcp.example.com/mcp", "HTTP://A:80/%7e?q", "https://[::1]:8443/a%2fb", "https://u@h/", "https://h/a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := NormalizeURI(in)
		if !ok {
			return
		}
		again, ok := NormalizeURI(got)
		if !ok || again != got {
			t.Fatalf("NormalizeURI(%q) = %q, again %q, %v", in, got, again, ok)
		}
		ref, err := url.Parse(in)
		if err != nil {
			t.Fatalf("accepted %q, which net/url refuses: %v", in, err)
		}
		norm, err := url.Parse(got)
		if err != nil {
			t.Fatalf("normalized %q to %q, which net/url refuses: %v", in, got, err)
		}
		if ref.User != nil || !strings.EqualFold(ref.Scheme, norm.Scheme) || !sameHost(ref.Hostname(), norm.Hostname()) {
			t.Fatalf("%q: net/url reads %+v, normalized %+v", in, ref, norm)
		}
		if p := ref.Path; p != norm.Path && !(p == "" && norm.Path == "/") {
			t.Fatalf("%q: net/url path %q, normalized path %q", in, p, norm.Path)
		}
	})
}

// sameHost compares host names case-insensitively and addresses by value.
func sameHost(a, b string) bool {
	if x, err := netip.ParseAddr(a); err == nil {
		y, err := netip.ParseAddr(b)
		return err == nil && x == y
	}
	return strings.EqualFold(a, b)
}
