package toolsheader_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/extauthz/extauthz/internal/testing/toolsheader"
)

// FuzzVerifyTools: whatever header value arrives, VerifyTools does not
// panic, and accepts only what the key signed: the valid token's claims.
func FuzzVerifyTools(f *testing.F) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgEdDSA}})
	if err != nil {
		f.Fatal(err)
	}
	keys := jwkset.NewMemoryStorage()
	if err := keys.KeyWrite(f.Context(), jwk); err != nil {
		f.Fatal(err)
	}
	valid := forge(f, key, "k1", "extauthz-tools+jwt", nil)
	f.Add(valid)
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, value string) {
		c, err := toolsheader.VerifyTools(t.Context(), keys, issuer, route, "alice", value)
		if err != nil {
			return
		}
		if c.Subject != "alice" || !slices.Equal(c.Tools, allTools) || c.ExpiresAt == nil || c.ExpiresAt.Before(time.Now().Add(-time.Minute)) {
			t.Fatalf("accepted %q: %+v", value, c)
		}
	})
}
