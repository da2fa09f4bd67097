package jwtauth

import (
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// SignHMAC signs claims as a JWT with an HMAC algorithm (HS256, HS384 or
// HS512) and secret. It serves the development token command and tests;
// production tokens come from an identity provider.
func SignHMAC(alg string, secret []byte, claims map[string]any) (string, error) {
	a, ok := algorithmsByName[alg]
	if !ok || a.family != familyHMAC {
		return "", fmt.Errorf("jwtauth: %q is not an HMAC algorithm (HS256, HS384, HS512)", alg)
	}
	if len(secret) < minSecretLen {
		return "", fmt.Errorf("jwtauth: secret is %d bytes, at least %d are required", len(secret), minSecretLen)
	}
	return jwt.NewWithClaims(a.method, jwt.MapClaims(claims)).SignedString(secret)
}
