package lineage

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// TestSignJWT: another kind of token signed with the lineage key verifies
// with a general JWT library and the published key set, carries its own
// type, and never passes for a lineage token.
func TestSignJWT(t *testing.T) {
	for _, tt := range []struct {
		name, keyFile, alg string
	}{
		{"Ed25519", filepath.Join("testdata", "ed25519.pem"), "EdDSA"},
		{"P-256", filepath.Join("testdata", "es256.pem"), "ES256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			s, err := NewSigner(SignerOptions{KeyFile: tt.keyFile, Issuer: "gw", Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			claims := AppendJSONString([]byte(`{"iss":"gw","sub":`), "al\"ice\x01")
			claims = append(claims, `,"exp":`...)
			claims = append(claims, []byte(json.Number("4102444800"))...)
			claims = append(claims, `,"tools":["a","b"]}`...)
			tok, err := s.SignJWT("extauthz-tools+jwt", claims)
			if err != nil {
				t.Fatal(err)
			}
			var set jwkset.JWKSMarshal
			if err := json.Unmarshal(s.JWKS(), &set); err != nil {
				t.Fatal(err)
			}
			storage, err := set.ToStorage()
			if err != nil {
				t.Fatal(err)
			}
			var got jwt.MapClaims
			parsed, err := jwt.ParseWithClaims(tok, &got, func(tk *jwt.Token) (any, error) {
				jwk, err := storage.KeyRead(t.Context(), tk.Header["kid"].(string))
				if err != nil {
					return nil, err
				}
				return jwk.Key(), nil
			}, jwt.WithTimeFunc(clock.Now), jwt.WithValidMethods([]string{tt.alg}))
			if err != nil {
				t.Fatalf("token does not verify: %v", err)
			}
			if parsed.Header["typ"] != "extauthz-tools+jwt" || parsed.Header["kid"] != s.KeyID() || parsed.Header["alg"] != tt.alg {
				t.Errorf("header = %v", parsed.Header)
			}
			if got["sub"] != "al\"ice\x01" || got["iss"] != "gw" {
				t.Errorf("claims = %v", got)
			}

			// The lineage verifier, which trusts this signer, refuses it.
			v, err := NewSignedVerifier(VerifierOptions{Local: s, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if _, err := v.Verify(t.Context(), tok, "al\"ice\x01"); err == nil {
				t.Error("a tools token passed for a lineage token")
			}
		})
	}
}

// TestSignJWTRefusesTypes: the lineage type and types needing escaping are
// refused.
func TestSignJWTRefusesTypes(t *testing.T) {
	s := testSigner(t, newClock(), "gw")
	for _, typ := range []string{SignedType, "", `a"b`, "a b", "a\\b", string(make([]byte, 65))} {
		if tok, err := s.SignJWT(typ, []byte(`{}`)); err == nil {
			t.Errorf("type %q signed: %s", typ, tok)
		}
	}
}
