package exchange

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/pemkey"
	"github.com/extauthz/extauthz/internal/secrets"
	"github.com/golang-jwt/jwt/v5"
)

// ClientAssertionType is the client_assertion_type of private_key_jwt
// (RFC 7523 section 2.2).
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime is how long a client assertion is valid: one call.
const assertionLifetime = time.Minute

// clientAuth adds the client's credentials to a token request.
type clientAuth struct {
	method, clientID, secret string
	key                      crypto.Signer
	signing                  jwt.SigningMethod
	kid, audience            string
}

func newClientAuth(a ClientAuth) (*clientAuth, error) {
	ca := &clientAuth{method: a.Method, clientID: a.ClientID, secret: a.ClientSecret, kid: a.KeyID, audience: a.Audience}
	if a.Method != AuthPrivateKeyJWT {
		return ca, nil
	}
	pemBytes, err := bounded.ReadFile(a.PrivateKeyFile, secrets.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("exchange: reading the client private key: %w", err)
	}
	key, err := pemkey.Parse(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("exchange: client private key file %s: %w", a.PrivateKeyFile, err)
	}
	method, err := signingMethod(a.Algorithm, key)
	if err != nil {
		return nil, fmt.Errorf("exchange: client private key file %s: %w", a.PrivateKeyFile, err)
	}
	ca.key, ca.signing = key, method
	return ca, nil
}

// signingMethod checks alg against the key, or picks it from the key.
func signingMethod(alg string, key crypto.Signer) (jwt.SigningMethod, error) {
	var want string
	switch k := key.(type) {
	case *rsa.PrivateKey:
		want = "RS256"
		if k.N.BitLen() < 2048 {
			return nil, errors.New("RSA keys must have at least 2048 bits")
		}
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("EC keys must use P-256 (ES256)")
		}
		want = "ES256"
	case ed25519.PrivateKey:
		want = "EdDSA"
	default:
		return nil, fmt.Errorf("unsupported key type %T", key)
	}
	if alg == "" {
		alg = want
	}
	if alg != want {
		return nil, fmt.Errorf("algorithm %s does not match the key (%s)", alg, want)
	}
	return jwt.GetSigningMethod(alg), nil
}

// apply adds the credentials: to form for the post, none and
// private_key_jwt methods, to the request header for basic. endpoint is the
// token endpoint, the default assertion audience.
func (ca *clientAuth) apply(form url.Values, h http.Header, endpoint string, now time.Time) error {
	switch ca.method {
	case AuthClientSecretBasic:
		// RFC 6749 section 2.3.1: both parts form-encoded before base64.
		cred := url.QueryEscape(ca.clientID) + ":" + url.QueryEscape(ca.secret)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	case AuthClientSecretPost:
		form.Set("client_id", ca.clientID)
		form.Set("client_secret", ca.secret)
	case AuthPrivateKeyJWT:
		assertion, err := ca.assertion(endpoint, now)
		if err != nil {
			return err
		}
		form.Set("client_id", ca.clientID)
		form.Set("client_assertion_type", ClientAssertionType)
		form.Set("client_assertion", assertion)
	case AuthNone:
		if ca.clientID != "" {
			form.Set("client_id", ca.clientID)
		}
	}
	return nil
}

// assertion signs a one-use client assertion (RFC 7523 section 3).
func (ca *clientAuth) assertion(endpoint string, now time.Time) (string, error) {
	aud := ca.audience
	if aud == "" {
		aud = endpoint
	}
	claims := jwt.MapClaims{
		"iss": ca.clientID,
		"sub": ca.clientID,
		"aud": aud,
		"jti": rand.Text(),
		"iat": now.Unix(),
		"exp": now.Add(assertionLifetime).Unix(),
	}
	t := jwt.NewWithClaims(ca.signing, claims)
	if ca.kid != "" {
		t.Header["kid"] = ca.kid
	}
	s, err := t.SignedString(ca.key)
	if err != nil {
		return "", fmt.Errorf("signing the client assertion: %w", err)
	}
	return s, nil
}
