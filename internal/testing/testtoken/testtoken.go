// Package testtoken mints signing keys, JWK sets and tokens for tests and
// benchmarks. It is not used by the service itself.
package testtoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/jwtauth"
)

// Key is a signing key with its JWK id and algorithm.
type Key struct {
	KID     string
	Alg     string
	Private crypto.Signer
}

// RSA returns a new RS256 key.
func RSA(t testing.TB, kid string) Key {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return Key{KID: kid, Alg: "RS256", Private: k}
}

// EC returns a new ES256 key.
func EC(t testing.TB, kid string) Key {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{KID: kid, Alg: "ES256", Private: k}
}

// Ed returns a new EdDSA key.
func Ed(t testing.TB, kid string) Key {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{KID: kid, Alg: "EdDSA", Private: k}
}

// Sign signs claims with the key, naming its kid in the header.
func (k Key) Sign(t testing.TB, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), claims)
	tok.Header["kid"] = k.KID
	s, err := tok.SignedString(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// HMAC signs claims with an HMAC secret, as the service's own development
// tokens are signed (jwtauth.SignHMAC).
func HMAC(t testing.TB, alg string, secret string, claims jwt.MapClaims) string {
	s, err := jwtauth.SignHMAC(alg, []byte(secret), claims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// JWKS renders the public halves of keys as a JWK set document.
func JWKS(t testing.TB, keys ...Key) []byte {
	type jwk struct {
		Kty string `json:"kty"`
		Kid string `json:"kid"`
		Alg string `json:"alg"`
		Use string `json:"use"`
		N   string `json:"n,omitempty"`
		E   string `json:"e,omitempty"`
		Crv string `json:"crv,omitempty"`
		X   string `json:"x,omitempty"`
		Y   string `json:"y,omitempty"`
	}
	b64 := base64.RawURLEncoding.EncodeToString
	var set struct {
		Keys []jwk `json:"keys"`
	}
	for _, k := range keys {
		j := jwk{Kid: k.KID, Alg: k.Alg, Use: "sig"}
		switch p := k.Private.Public().(type) {
		case *rsa.PublicKey:
			j.Kty, j.N, j.E = "RSA", b64(p.N.Bytes()), b64(big.NewInt(int64(p.E)).Bytes())
		case *ecdsa.PublicKey:
			pt, err := p.ECDH()
			if err != nil {
				t.Fatal(err)
			}
			raw := pt.Bytes() // 0x04 || X || Y
			n := (len(raw) - 1) / 2
			j.Kty, j.Crv, j.X, j.Y = "EC", "P-256", b64(raw[1:1+n]), b64(raw[1+n:])
		case ed25519.PublicKey:
			j.Kty, j.Crv, j.X = "OKP", "Ed25519", b64(p)
		}
		set.Keys = append(set.Keys, j)
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WriteJWKS writes a JWK set file into dir and returns its path.
func WriteJWKS(t testing.TB, dir string, keys ...Key) string {
	p := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(p, JWKS(t, keys...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
