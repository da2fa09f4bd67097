// Package oauthclient authenticates this service, as an OAuth client, to an
// authorization server's endpoints: the token endpoint (token exchange) and
// the introspection endpoint. It implements client_secret_basic and
// client_secret_post (RFC 6749 section 2.3.1), private_key_jwt (RFC 7523
// section 2.2, the assertion of section 3) and none. Secrets and keys are
// never logged and never appear in errors.
package oauthclient

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

// Client authentication methods (RFC 8414 names).
const (
	ClientSecretBasic = "client_secret_basic"
	ClientSecretPost  = "client_secret_post"
	PrivateKeyJWT     = "private_key_jwt"
	None              = "none"
)

// AssertionType is the client_assertion_type of private_key_jwt (RFC 7523
// section 2.2).
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime is how long a client assertion is valid: one call.
const assertionLifetime = time.Minute

// Config is how this service authenticates to an authorization server.
type Config struct {
	// Method is one of the method constants. Empty means client_secret_basic
	// when ClientSecret is set, else none.
	Method   string
	ClientID string
	// ClientSecret for client_secret_basic and client_secret_post. It is
	// never logged.
	ClientSecret string
	// PrivateKeyFile (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC) signs the
	// private_key_jwt client assertion. It is read once, by New.
	PrivateKeyFile string
	// KeyID is the assertion's kid header, "" for none.
	KeyID string
	// Algorithm is RS256, ES256 or EdDSA; empty picks the one matching the
	// key (ES256 needs a P-256 key).
	Algorithm string
	// Audience is the assertion's aud; empty means the endpoint the
	// assertion is sent to (RFC 7523 section 3).
	Audience string
}

// Normalize returns c with the default method applied and checks that the
// method has what it needs. It reads no file.
func (c Config) Normalize() (Config, error) {
	if c.Method == "" {
		c.Method = None
		if c.ClientSecret != "" {
			c.Method = ClientSecretBasic
		}
	}
	switch c.Method {
	case ClientSecretBasic, ClientSecretPost:
		if c.ClientID == "" || c.ClientSecret == "" {
			return c, fmt.Errorf("%s needs a client id and a client secret", c.Method)
		}
	case PrivateKeyJWT:
		if c.ClientID == "" || c.PrivateKeyFile == "" {
			return c, errors.New("private_key_jwt needs a client id and a private key file")
		}
	case None:
		if c.ClientSecret != "" {
			return c, errors.New("a client secret is set but the method is none")
		}
	default:
		return c, fmt.Errorf("unknown client authentication method %q (client_secret_basic, client_secret_post, private_key_jwt, none)", c.Method)
	}
	return c, nil
}

// Auth adds a client's credentials to requests. It is safe for concurrent
// use.
type Auth struct {
	method, clientID, secret string
	key                      crypto.Signer
	signing                  jwt.SigningMethod
	kid, audience            string
}

// New checks c (see Normalize) and, for private_key_jwt, reads and checks
// the private key.
func New(c Config) (*Auth, error) {
	c, err := c.Normalize()
	if err != nil {
		return nil, err
	}
	a := &Auth{method: c.Method, clientID: c.ClientID, secret: c.ClientSecret, kid: c.KeyID, audience: c.Audience}
	if c.Method != PrivateKeyJWT {
		return a, nil
	}
	pemBytes, err := bounded.ReadFile(c.PrivateKeyFile, secrets.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("reading the client private key: %w", err)
	}
	key, err := pemkey.Parse(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("client private key file %s: %w", c.PrivateKeyFile, err)
	}
	method, err := signingMethod(c.Algorithm, key)
	if err != nil {
		return nil, fmt.Errorf("client private key file %s: %w", c.PrivateKeyFile, err)
	}
	a.key, a.signing = key, method
	return a, nil
}

// Method is the method a applies.
func (a *Auth) Method() string { return a.method }

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

// Apply adds the credentials: to form for the post, none and
// private_key_jwt methods, to the request header for basic. endpoint is the
// URL the request goes to, the default assertion audience.
func (a *Auth) Apply(form url.Values, h http.Header, endpoint string, now time.Time) error {
	switch a.method {
	case ClientSecretBasic:
		// RFC 6749 section 2.3.1: both parts form-encoded before base64.
		cred := url.QueryEscape(a.clientID) + ":" + url.QueryEscape(a.secret)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	case ClientSecretPost:
		form.Set("client_id", a.clientID)
		form.Set("client_secret", a.secret)
	case PrivateKeyJWT:
		assertion, err := a.assertion(endpoint, now)
		if err != nil {
			return err
		}
		form.Set("client_id", a.clientID)
		form.Set("client_assertion_type", AssertionType)
		form.Set("client_assertion", assertion)
	case None:
		if a.clientID != "" {
			form.Set("client_id", a.clientID)
		}
	}
	return nil
}

// assertion signs a one-use client assertion (RFC 7523 section 3).
func (a *Auth) assertion(endpoint string, now time.Time) (string, error) {
	aud := a.audience
	if aud == "" {
		aud = endpoint
	}
	claims := jwt.MapClaims{
		"iss": a.clientID,
		"sub": a.clientID,
		"aud": aud,
		"jti": rand.Text(),
		"iat": now.Unix(),
		"exp": now.Add(assertionLifetime).Unix(),
	}
	t := jwt.NewWithClaims(a.signing, claims)
	if a.kid != "" {
		t.Header["kid"] = a.kid
	}
	s, err := t.SignedString(a.key)
	if err != nil {
		return "", fmt.Errorf("signing the client assertion: %w", err)
	}
	return s, nil
}
