package httpauthz

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/peer"
	"github.com/extauthz/extauthz/internal/testing/testcert"
)

// TestClientCert: the attacks on X-Forwarded-Client-Cert. Only a trusted
// proxy's header counts, and of it only the last element, the one the
// nearest proxy wrote.
func TestClientCert(t *testing.T) {
	alice, victim := testcert.New(t, "alice"), testcert.New(t, "victim")
	cert := func(c testcert.Cert) string { return `Cert="` + testcert.URLEncodedPEM(c.DER) + `"` }
	hash := func(c testcert.Cert) string { return "Hash=" + c.HexSHA256() }
	const by = "By=spiffe://cluster.local/ns/gw/sa/envoy;"
	tests := []struct {
		name    string
		lines   []string // the header's lines, in order
		trusted bool
		want    string
	}{
		{"Envoy's XFCC from a trusted proxy", []string{by + hash(alice) + ";URI=spiffe://cluster.local/ns/a/sa/b"}, true, alice.X5t()},
		{"nginx's Cert from a trusted proxy", []string{cert(alice)}, true, alice.X5t()},
		{"Cert and Hash agreeing", []string{hash(alice) + ";" + cert(alice)}, true, alice.X5t()},
		{"upper-case Hash", []string{"Hash=" + strings.ToUpper(alice.HexSHA256())}, true, alice.X5t()},

		{"forged from an untrusted peer", []string{hash(victim)}, false, ""},
		{"forged Cert from an untrusted peer", []string{cert(victim)}, false, ""},
		{"two lines: the client's first, the proxy's last", []string{hash(victim), by + hash(alice)}, true, alice.X5t()},
		{"two elements: the client's first, the proxy's last", []string{cert(victim) + "," + by + hash(alice)}, true, alice.X5t()},
		{"the proxy's element names none: the client's is not read", []string{hash(victim) + "," + by + "URI=spiffe://cluster.local/ns/a/sa/b"}, true, ""},
		{"Cert and Hash disagree", []string{hash(victim) + ";" + cert(alice)}, true, ""},
		{"malformed PEM in Cert", []string{`Cert="-----BEGIN%20CERTIFICATE-----%0AAAAA%0A"`}, true, ""},
		{"Hash of 63 digits", []string{"Hash=" + alice.HexSHA256()[:63]}, true, ""},
		{"malformed header", []string{`Cert="` + testcert.URLEncodedPEM(alice.DER)}, true, ""},
		{"oversize header", []string{hash(alice) + ";Subject=\"" + strings.Repeat("a", peer.MaxXFCCBytes) + `"`}, true, ""},
		{"nginx without a client certificate", []string{`Cert=""`}, true, ""},
		{"Caddy without a client certificate", []string{"Hash={http.request.tls.client.fingerprint}"}, true, ""},
		{"no header", nil, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr := http.Header{}
			for _, l := range tc.lines {
				hdr.Add("X-Forwarded-Client-Cert", l)
			}
			var in check.Request
			in.Headers, _, _ = headerMap(hdr)
			setClientCert(&in, tc.trusted)
			if got := in.ClientCertThumbprint(); got != tc.want {
				t.Errorf("ClientCertThumbprint() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestClientCertFromPeer: over a real loopback connection, the handler
// takes the certificate from a proxy in Options.TrustedProxies and from
// nobody else, whatever the convention.
func TestClientCertFromPeer(t *testing.T) {
	alice := testcert.New(t, "alice")
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	elsewhere := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	tests := []struct {
		name    string
		proxies []netip.Prefix
		conv    Convention
		want    string
	}{
		{"trusted nginx", loopback, Nginx, alice.X5t()},
		{"trusted Caddy", loopback, Forwarded, alice.X5t()},
		{"trusted Envoy http_service", loopback, Envoy, alice.X5t()},
		{"the default list: loopback", nil, Auto, alice.X5t()},
		{"a peer not on the list", elsewhere, Envoy, ""},
		{"an empty list trusts nobody", []netip.Prefix{}, Envoy, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHandler(nil, Options{TrustedProxies: tc.proxies, Convention: tc.conv}).(*handler)
			got := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var in check.Request
				in.Headers, _, _ = headerMap(r.Header)
				h.describePeer(&in, r, h.trusted(r.RemoteAddr))
				got <- in.ClientCertThumbprint()
			}))
			defer srv.Close()
			ask{path: "/check", header: http.Header{"X-Forwarded-Client-Cert": {"Hash=" + alice.HexSHA256()}}}.do(t, srv)
			if g := <-got; g != tc.want {
				t.Errorf("ClientCert %q, want %q", g, tc.want)
			}
		})
	}
}
