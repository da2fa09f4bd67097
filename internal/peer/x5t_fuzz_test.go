package peer_test

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/peer"
	"github.com/extauthz/extauthz/internal/testing/testcert"
)

// referencePEM is the x5t#S256 of escaped read the obvious way with the
// standard library: unescape, the first PEM block, its type, SHA-256 of its
// bytes. ThumbprintPEM is stricter (one block, nothing around it), so it may
// find nothing where this finds something, never something else.
func referencePEM(escaped string) string {
	text, err := url.PathUnescape(escaped)
	if err != nil {
		return ""
	}
	b, _ := pem.Decode([]byte(text))
	if b == nil || b.Type != "CERTIFICATE" {
		return ""
	}
	return testcert.X5t(b.Bytes)
}

func isThumbprint(s string) bool {
	return len(s) == 43 && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}

// FuzzThumbprintPEM: whatever ThumbprintPEM finds, the reference finds the
// same; it never panics and never returns a partial value.
func FuzzThumbprintPEM(f *testing.F) {
	der := certDER(f, "seed")
	p := pemOf(der)
	for _, s := range []string{testcert.Escape(p), oldEnvoyEscape(p), p, testcert.Escape("x" + p), testcert.Escape(p + p), "%", "-----BEGIN CERTIFICATE-----", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, escaped string) {
		got := peer.ThumbprintPEM(escaped)
		if got == "" {
			return
		}
		if !isThumbprint(got) {
			t.Fatalf("%q: %q is not a thumbprint", escaped, got)
		}
		if want := referencePEM(escaped); got != want {
			t.Fatalf("%q: ThumbprintPEM %q, reference %q", escaped, got, want)
		}
	})
}

// FuzzThumbprintPEMEncodings: any DER bytes, PEM-armoured and escaped as
// Envoy (old and new) and nginx do, hash to their x5t#S256. The
// certificate is not parsed, so arbitrary bytes stand for one.
func FuzzThumbprintPEMEncodings(f *testing.F) {
	f.Add(certDER(f, "seed"))
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		if len(der) == 0 || len(der) > 16<<10 {
			return
		}
		p := pemOf(der)
		for name, escaped := range map[string]string{"envoy": testcert.Escape(p), "old envoy": oldEnvoyEscape(p), "plain": p} {
			if got, want := peer.ThumbprintPEM(escaped), testcert.X5t(der); got != want {
				t.Fatalf("%s: ThumbprintPEM %q, want %q", name, got, want)
			}
		}
	})
}

// FuzzThumbprintXFCC: what ThumbprintXFCC finds is the certificate the
// header's last element names, by its Cert (the reference's reading) or,
// without one, by its Hash.
func FuzzThumbprintXFCC(f *testing.F) {
	der := certDER(f, "seed")
	cert := `Cert="` + testcert.Escape(pemOf(der)) + `"`
	for _, s := range []string{
		"By=spiffe://a/gw;Hash=" + testcert.HexSHA256(der),
		cert + ";Hash=" + testcert.HexSHA256(der),
		"Hash=" + testcert.HexSHA256(der) + "," + cert,
		"Hash=" + strings.ToUpper(testcert.HexSHA256(der)),
		`Cert="";Hash=00`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got := peer.ThumbprintXFCC(h)
		if got == "" {
			return
		}
		if !isThumbprint(got) {
			t.Fatalf("%q: %q is not a thumbprint", h, got)
		}
		els, err := peer.ParseXFCC(h)
		if err != nil {
			t.Fatalf("%q: a thumbprint from a header that does not parse", h)
		}
		last := els[len(els)-1]
		if last.Cert != "" {
			if want := referencePEM(last.Cert); got != want {
				t.Fatalf("%q: %q, the Cert's reference %q", h, got, want)
			}
			return
		}
		sum, err := hex.DecodeString(last.Hash)
		if err != nil || len(sum) != 32 {
			t.Fatalf("%q: %q from a Hash that is not one", h, got)
		}
		if want := base64.RawURLEncoding.EncodeToString(sum); got != want {
			t.Fatalf("%q: %q, the Hash's %q", h, got, want)
		}
	})
}
