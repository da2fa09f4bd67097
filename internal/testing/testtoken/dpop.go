package testtoken

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// PublicJWK is the public half of the key as a JWK's members.
func (k Key) PublicJWK(t testing.TB) map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	switch p := k.Private.Public().(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "n": b64(p.N.Bytes()), "e": b64(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		pt, err := p.ECDH()
		if err != nil {
			t.Fatal(err)
		}
		raw := pt.Bytes() // 0x04 || X || Y
		n := (len(raw) - 1) / 2
		return map[string]any{"kty": "EC", "crv": p.Curve.Params().Name, "x": b64(raw[1 : 1+n]), "y": b64(raw[1+n:])}
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(p)}
	}
	t.Fatalf("no JWK for %T", k.Private)
	return nil
}

// Thumbprint is the RFC 7638 thumbprint of the key's public half, computed
// from its JWK: encoding/json writes a map's members in lexical order,
// which is what RFC 7638 asks of the required members.
func (k Key) Thumbprint(t testing.TB) string {
	doc, err := json.Marshal(k.PublicJWK(t))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// Proof signs a DPoP proof (RFC 9449) with the key: header typ dpop+jwt,
// the key's alg and its public JWK, then each of header's entries (nil
// deletes one), and claims as the payload.
func (k Key) Proof(t testing.TB, header map[string]any, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), claims)
	tok.Header["typ"] = "dpop+jwt"
	tok.Header["jwk"] = k.PublicJWK(t)
	for name, v := range header {
		if v == nil {
			delete(tok.Header, name)
			continue
		}
		tok.Header[name] = v
	}
	s, err := tok.SignedString(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// PrivateJWK is an EC key's private JWK (its public members and d), for a
// client outside Go to sign with.
func (k Key) PrivateJWK(t testing.TB) map[string]any {
	ec, ok := k.Private.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("no private JWK for %T", k.Private)
	}
	d, err := ec.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	jwk := k.PublicJWK(t)
	jwk["d"] = base64.RawURLEncoding.EncodeToString(d)
	return jwk
}
