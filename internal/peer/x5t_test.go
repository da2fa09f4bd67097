package peer_test

import (
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/peer"
	"github.com/extauthz/extauthz/internal/testing/testcert"
)

// certDER is a fresh client certificate's DER, as a proxy would have
// received it in the TLS handshake.
func certDER(t testing.TB, cn string) []byte { return testcert.New(t, cn).DER }

func pemOf(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// oldEnvoyEscape is how Envoy before urlEncode escaped the PEM: only the
// newline, space, '+', '/' and '='.
func oldEnvoyEscape(s string) string {
	return strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D").Replace(s)
}

func TestThumbprintPEM(t *testing.T) {
	der := certDER(t, "client")
	other := certDER(t, "other")
	want := testcert.X5t(der)
	p := pemOf(der)
	keyBlock := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	withHeaders := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Proc-Type": "4,ENCRYPTED"}, Bytes: der}))
	brokenFirst := "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n" + pemOf(other)
	// Just under and just over the bound: the same certificate, padded
	// with trailing newlines (which alone would be accepted).
	pad := func(n int) string { return testcert.Escape(p) + strings.Repeat("%0A", (n-len(testcert.Escape(p)))/3) }
	tests := []struct {
		name, in, want string
	}{
		{"Envoy's urlEncode", testcert.Escape(p), want},
		{"Envoy before urlEncode", oldEnvoyEscape(p), want},
		{"lower-case escapes", strings.NewReplacer("%0A", "%0a", "%2F", "%2f", "%2B", "%2b").Replace(testcert.Escape(p)), want},
		{"plain PEM, nothing escaped", p, want},
		{"CRLF line ends", testcert.Escape(strings.ReplaceAll(p, "\n", "\r\n")), want},
		{"just under the bound", pad(peer.MaxCertBytes - 2), want},

		{"empty", "", ""},
		{"not PEM", "bm90IGEgY2VydGlmaWNhdGU", ""},
		{"DER, base64 without PEM armour", base64.StdEncoding.EncodeToString(der), ""},
		{"a private key block", testcert.Escape(keyBlock), ""},
		{"a certificate request block", testcert.Escape(strings.ReplaceAll(p, "CERTIFICATE", "CERTIFICATE REQUEST")), ""},
		{"a block with headers", testcert.Escape(withHeaders), ""},
		{"garbage before the block", testcert.Escape("garbage\n" + p), ""},
		{"garbage after the block", testcert.Escape(p + "garbage"), ""},
		{"a chain where the leaf was expected", testcert.Escape(p + pemOf(other)), ""},
		{"an invalid block, then a valid one", testcert.Escape(brokenFirst), ""},
		{"broken percent escape", testcert.Escape(p)[:40] + "%G0" + testcert.Escape(p)[40:], ""},
		{"percent sign at the end", testcert.Escape(p) + "%", ""},
		{"escaped NUL inside the base64", strings.Replace(testcert.Escape(p), "%0A", "%00", 2), ""},
		{"bad base64", testcert.Escape(strings.Replace(p, "\n", "\n!", 2)), ""},
		{"an empty certificate block", testcert.Escape("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), ""},
		{"END line of another type", testcert.Escape(strings.Replace(p, "END CERTIFICATE", "END X509 CRL", 1)), ""},
		{"form encoding: spaces as '+'", strings.ReplaceAll(testcert.Escape(p), "%20", "+"), ""},
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
	der := certDER(t, "client")
	h := testcert.HexSHA256(der)
	tests := []struct {
		name, in, want string
	}{
		{"lower-case, as Envoy and Caddy write it", h, testcert.X5t(der)},
		{"upper-case: the same certificate", strings.ToUpper(h), testcert.X5t(der)},
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
	der, other := certDER(t, "client"), certDER(t, "victim")
	want := testcert.X5t(der)
	cert := `Cert="` + testcert.Escape(pemOf(der)) + `"`
	otherCert := `Cert="` + testcert.Escape(pemOf(other)) + `"`
	hash, otherHash := "Hash="+testcert.HexSHA256(der), "Hash="+testcert.HexSHA256(other)
	const by = "By=spiffe://cluster.local/ns/gw/sa/envoy"
	tests := []struct {
		name, in, want string
	}{
		{"Envoy SANITIZE_SET: By and Hash", by + ";" + hash + ";URI=spiffe://cluster.local/ns/a/sa/b", want},
		{"Envoy with cert: Hash and Cert agree", by + ";" + hash + ";" + cert, want},
		{"Cert alone (nginx)", cert, want},
		{"Cert unquoted (nginx escapes , ; = and quotes)", "Cert=" + testcert.Escape(pemOf(der)), want},
		{"upper-case Hash", "Hash=" + strings.ToUpper(testcert.HexSHA256(der)), want},
		{"keys in any case", "hash=" + testcert.HexSHA256(der) + ";CERT=" + testcert.Escape(pemOf(der)), want},
		{"an empty Cert next to a Hash", `Cert="";` + hash, want},
		{"the client's element first, the proxy's last", otherHash + "," + by + ";" + hash, want},
		{"a forged Cert in the client's element", otherCert + "," + cert, want},

		{"Cert and Hash disagree: refused", hash + ";" + otherCert, ""},
		{"Cert malformed, Hash good: refused", hash + `;Cert="garbage"`, ""},
		{"Hash malformed next to a good Cert: refused", "Hash=" + testcert.HexSHA256(der)[:63] + ";" + cert, ""},
		{"Hash of 63 digits", "Hash=" + testcert.HexSHA256(der)[:63], ""},
		{"the last element names none: earlier ones are not read", hash + "," + by, ""},
		{"nginx without a client certificate", `Cert=""`, ""},
		{"Caddy without a client certificate: its placeholder", "Hash={http.request.tls.client.fingerprint}", ""},
		{"repeated Hash", hash + ";" + hash, ""},
		{"unterminated quote", `Cert="` + testcert.Escape(pemOf(der)), ""},
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
	h := testcert.HexSHA256(certDER(t, "client"))
	if n := testing.AllocsPerRun(100, func() { peer.ThumbprintHex(h) }); n > 1 {
		t.Errorf("a hex hash: %.0f allocations, want the result's only", n)
	}
}
