package peer_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/peer"
)

// testCert is a self-signed client certificate's DER, as a proxy would
// have received it in the TLS handshake.
func testCert(t testing.TB, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// x5t is RFC 8705's x5t#S256 of der, computed the plain way.
func x5t(der []byte) string {
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// x5tOfSum spells a SHA-256 given as bytes.
func x5tOfSum(sum []byte) string { return base64.RawURLEncoding.EncodeToString(sum) }

func hexHash(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func pemOf(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// envoyEscape is Envoy's Http::Utility::PercentEncoding::urlEncode, which
// fills source.certificate and XFCC's Cert: every byte but ALPHA, DIGIT,
// '*', '-', '.' and '_' as %XX.
func envoyEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("*-._", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}

// oldEnvoyEscape is how Envoy before urlEncode escaped the PEM: only the
// newline, space, '+', '/' and '='.
func oldEnvoyEscape(s string) string {
	return strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D").Replace(s)
}

func TestThumbprintPEM(t *testing.T) {
	der := testCert(t, "client")
	other := testCert(t, "other")
	want := x5t(der)
	p := pemOf(der)
	keyBlock := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	withHeaders := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: der}))
	brokenFirst := "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n" + pemOf(other)
	// Just under and just over the bound: the same certificate, padded
	// with trailing newlines (which alone would be accepted).
	pad := func(n int) string { return envoyEscape(p) + strings.Repeat("%0A", (n-len(envoyEscape(p)))/3) }
	tests := []struct {
		name, in, want string
	}{
		{"Envoy's urlEncode", envoyEscape(p), want},
		{"Envoy before urlEncode", oldEnvoyEscape(p), want},
		{"lower-case escapes", strings.NewReplacer("%0A", "%0a", "%2F", "%2f", "%2B", "%2b").Replace(envoyEscape(p)), want},
		{"plain PEM, nothing escaped", p, want},
		{"CRLF line ends", envoyEscape(strings.ReplaceAll(p, "\n", "\r\n")), want},
		{"just under the bound", pad(peer.MaxCertBytes - 2), want},

		{"empty", "", ""},
		{"not PEM", "bm90IGEgY2VydGlmaWNhdGU", ""},
		{"DER, base64 without PEM armour", base64.StdEncoding.EncodeToString(der), ""},
		{"a private key block", envoyEscape(keyBlock), ""},
		{"a certificate request block", envoyEscape(strings.ReplaceAll(p, "CERTIFICATE", "CERTIFICATE REQUEST")), ""},
		{"a block with headers", envoyEscape(withHeaders), ""},
		{"garbage before the block", envoyEscape("garbage\n" + p), ""},
		{"garbage after the block", envoyEscape(p + "garbage"), ""},
		{"a chain where the leaf was expected", envoyEscape(p + pemOf(other)), ""},
		{"an invalid block, then a valid one", envoyEscape(brokenFirst), ""},
		{"broken percent escape", envoyEscape(p)[:40] + "%G0" + envoyEscape(p)[40:], ""},
		{"percent sign at the end", envoyEscape(p) + "%", ""},
		{"escaped NUL inside the base64", strings.Replace(envoyEscape(p), "%0A", "%00", 2), ""},
		{"bad base64", envoyEscape(strings.Replace(p, "\n", "\n!", 2)), ""},
		{"an empty certificate block", envoyEscape("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), ""},
		{"END line of another type", envoyEscape(strings.Replace(p, "END CERTIFICATE", "END X509 CRL", 1)), ""},
		{"form encoding: spaces as '+'", strings.ReplaceAll(envoyEscape(p), "%20", "+"), ""},
		{"over the bound", pad(peer.MaxCertBytes + 3), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := peer.ThumbprintPEM(tc.in); got != tc.want {
				t.Errorf("ThumbprintPEM = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestThumbprintHex(t *testing.T) {
	der := testCert(t, "client")
	h := hexHash(der)
	tests := []struct {
		name, in, want string
	}{
		{"lower-case, as Envoy and Caddy write it", h, x5t(der)},
		{"upper-case: the same certificate", strings.ToUpper(h), x5t(der)},
		{"empty", "", ""},
		{"63 digits", h[:63], ""},
		{"65 digits", h + "0", ""},
		{"SHA-1 length", h[:40], ""},
		{"not hex", "g" + h[1:], ""},
		{"0x prefix", "0x" + h[2:], ""},
		{"colon-separated, as openssl prints it", h[:2] + ":" + h[2:63], ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := peer.ThumbprintHex(tc.in); got != tc.want {
				t.Errorf("ThumbprintHex = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestThumbprintXFCC: the attacks on the header a proxy writes. Only the
// last element (the nearest proxy's) names the certificate; Cert is
// hashed here, and a Hash next to it must agree, else nothing is believed.
func TestThumbprintXFCC(t *testing.T) {
	der, other := testCert(t, "client"), testCert(t, "victim")
	want := x5t(der)
	cert := `Cert="` + envoyEscape(pemOf(der)) + `"`
	otherCert := `Cert="` + envoyEscape(pemOf(other)) + `"`
	hash, otherHash := "Hash="+hexHash(der), "Hash="+hexHash(other)
	const by = "By=spiffe://cluster.local/ns/gw/sa/envoy"
	tests := []struct {
		name, in, want string
	}{
		{"Envoy SANITIZE_SET: By and Hash", by + ";" + hash + ";URI=spiffe://cluster.local/ns/a/sa/b", want},
		{"Envoy with cert: Hash and Cert agree", by + ";" + hash + ";" + cert, want},
		{"Cert alone (nginx)", cert, want},
		{"Cert unquoted (nginx escapes , ; = and quotes)", "Cert=" + envoyEscape(pemOf(der)), want},
		{"upper-case Hash", "Hash=" + strings.ToUpper(hexHash(der)), want},
		{"keys in any case", "hash=" + hexHash(der) + ";CERT=" + envoyEscape(pemOf(der)), want},
		{"an empty Cert next to a Hash", `Cert="";` + hash, want},
		{"the client's element first, the proxy's last", otherHash + "," + by + ";" + hash, want},
		{"a forged Cert in the client's element", otherCert + "," + cert, want},

		{"Cert and Hash disagree: refused", hash + ";" + otherCert, ""},
		{"Cert malformed, Hash good: refused", hash + `;Cert="garbage"`, ""},
		{"Hash malformed next to a good Cert: refused", "Hash=" + hexHash(der)[:63] + ";" + cert, ""},
		{"Hash of 63 digits", "Hash=" + hexHash(der)[:63], ""},
		{"the last element names none: earlier ones are not read", hash + "," + by, ""},
		{"nginx without a client certificate", `Cert=""`, ""},
		{"Caddy without a client certificate: its placeholder", "Hash={http.request.tls.client.fingerprint}", ""},
		{"repeated Hash", hash + ";" + hash, ""},
		{"unterminated quote", `Cert="` + envoyEscape(pemOf(der)), ""},
		{"no header", "", ""},
		{"over the header bound", hash + ";Subject=\"" + strings.Repeat("a", peer.MaxXFCCBytes) + `"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := peer.ThumbprintXFCC(tc.in); got != tc.want {
				t.Errorf("ThumbprintXFCC = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestThumbprintsAllocate: the common case of each front end, no
// certificate at all, costs nothing.
func TestThumbprintsAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() {
		peer.ThumbprintPEM("")
		peer.ThumbprintHex("")
		peer.ThumbprintXFCC("")
	}); n != 0 {
		t.Errorf("no certificate: %.0f allocations", n)
	}
	h := hexHash(testCert(t, "client"))
	if n := testing.AllocsPerRun(100, func() { peer.ThumbprintHex(h) }); n > 1 {
		t.Errorf("a hex hash: %.0f allocations, want the result's only", n)
	}
}
