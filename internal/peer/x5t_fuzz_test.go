package peer_test

import (
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/peer"
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
	return x5t(b.Bytes)
}

func isThumbprint(s string) bool {
	return len(s) == 43 && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == ""
}

// FuzzThumbprintPEM: whatever ThumbprintPEM finds, the reference finds the
// same; it never panics and never returns a partial value.
func FuzzThumbprintPEM(f *testing.F) {
	der := testCert(f, "seed")
	p := pemOf(der)
	for _, s := range []string{envoyEscape(p), oldEnvoyEscape(p), p, envoyEscape("x" + p), envoyEscape(p + p), "%", "-----BEGIN CERTIFICATE-----", ""} {
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
	f.Add(testCert(f, "seed"))
	f.Add([]byte{0x30, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		if len(der) == 0 || len(der) > 16<<10 {
			return
		}
		p := pemOf(der)
		for name, escaped := range map[string]string{"envoy": envoyEscape(p), "old envoy": oldEnvoyEscape(p), "plain": p} {
			if got, want := peer.ThumbprintPEM(escaped), x5t(der); got != want {
				t.Fatalf("%s: ThumbprintPEM %q, want %q", name, got, want)
			}
		}
	})
}

// FuzzThumbprintXFCC: what ThumbprintXFCC finds is the certificate the
// header's last element names, by its Cert (the reference's reading) or,
// without one, by its Hash.
func FuzzThumbprintXFCC(f *testing.F) {
	der := testCert(f, "seed")
	cert := `Cert="` + envoyEscape(pemOf(der)) + `"`
	for _, s := range []string{
		"By=spiffe://a/gw;Hash=" + hexHash(der),
		cert + ";Hash=" + hexHash(der),
		"Hash=" + hexHash(der) + "," + cert,
		"Hash=" + strings.ToUpper(hexHash(der)),
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
		if want := x5tOfSum(sum); got != want {
			t.Fatalf("%q: %q, the Hash's %q", h, got, want)
		}
	})
}
