package check

import (
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/credential"
	"github.com/extauthz/extauthz/internal/dpop"
	"github.com/extauthz/extauthz/internal/jwtauth"
)

// A sender-constrained token names in its cnf claim what its sender must
// prove to hold: a key (jkt, RFC 9449 DPoP) or a TLS client certificate
// (x5t#S256, RFC 8705). Taking it as a bearer token would hand whoever
// stole it what the binding exists to withhold, so a bound token passes
// only with its proof, and a confirmation method not checked here refuses
// the token rather than being ignored.

// Errors of confirmation; their texts are safe to show the client.
var (
	errConfirmation       = &claimError{"token's cnf is not an object of jkt and x5t#S256"}
	errConfirmationMethod = &claimError{"token is bound (cnf) by a method this service cannot check"}
)

// confirmation reads a credential's cnf claim: the thumbprints of the key
// (jkt) and the certificate (x5t#S256) it is bound to, "" when not bound
// by that method.
func confirmation(c *jwtauth.Claims) (key, cert string, err error) {
	raw, ok := c.Claim("cnf")
	if !ok {
		return "", "", nil
	}
	cnf, ok := raw.(map[string]any)
	if !ok || len(cnf) == 0 {
		return "", "", errConfirmation
	}
	for name, v := range cnf {
		if name != "jkt" && name != "x5t#S256" {
			return "", "", errConfirmationMethod // jwk, kid, jwe, jku, a typo
		}
		s, ok := v.(string)
		if !ok || !isThumbprint(s) {
			return "", "", errConfirmation
		}
		if name == "jkt" {
			key = s
		} else {
			cert = s
		}
	}
	return key, cert, nil
}

// isThumbprint reports whether s is a SHA-256 in unpadded base64url, as
// both jkt and x5t#S256 are: anything else could never match, and is
// refused as such.
func isThumbprint(s string) bool {
	var sum [32]byte
	n, err := strictB64.Decode(sum[:], []byte(s))
	return err == nil && n == len(sum) && len(s) == 43
}

// dpopAlgs are the proof algorithms a DPoP challenge names and the
// protected resource metadata lists: every asymmetric one the proof
// verifier takes.
const dpopAlgs = "ES256 ES384 ES512 EdDSA PS256 PS384 PS512 RS256 RS384 RS512"

var dpopAlgList = strings.Fields(dpopAlgs)

// strictB64 is unpadded base64url with one spelling per value.
var strictB64 = base64.RawURLEncoding.Strict()

// binding holds a sender-constrained token to its sender: a DPoP-bound one
// needs the DPoP scheme and a fresh proof signed by its key, a
// certificate-bound one the client certificate it names; a token bound by
// neither is refused the DPoP scheme (RFC 9449 section 7.1: the proof
// would prove nothing about it).
func (e *evaluation) binding() *denial {
	g := e.grant
	switch {
	case e.token == "":
		return nil // a workload: its certificate is the credential
	case e.route.senderConstrained == config.SenderDPoP && g.boundKey == "":
		return &denial{outcome: InvalidToken, desc: "this route takes only DPoP-bound tokens", dpop: "invalid_token"}
	case e.route.senderConstrained == config.SenderMTLS && g.boundCert == "":
		return &denial{outcome: InvalidToken, desc: "this route takes only certificate-bound tokens"}
	case g.boundKey == "" && g.boundCert == "" && e.scheme != credential.DPoP:
		return nil // a bearer token presented as one
	}
	if g.boundCert != "" && e.req.ClientCertThumbprint() != g.boundCert {
		return &denial{outcome: InvalidToken, desc: "token is bound to a client certificate this request does not present"}
	}
	switch {
	case g.boundKey == "" && e.scheme == credential.DPoP:
		return &denial{outcome: InvalidToken, desc: "token is not DPoP-bound: send it with the Bearer scheme", dpop: "invalid_token"}
	case g.boundKey == "":
		return nil // certificate-bound only, and presented
	case e.scheme != credential.DPoP:
		return &denial{outcome: InvalidToken, desc: "token is DPoP-bound: send it with the DPoP scheme and a proof", dpop: "invalid_token"}
	}
	r := e.req
	err := e.pl.dpop.Check(e.ctx, e.p.dpopWindow, dpop.Request{
		Proof: r.Headers[hDPoP], Method: r.Method, Scheme: r.Scheme, Host: r.Host, Path: r.Path,
		AccessToken: e.token, Thumbprint: g.boundKey, Owner: g.Subject, Peek: e.st.readOnly,
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dpop.ErrUnavailable), errors.Is(err, dpop.ErrFull):
		return &denial{outcome: Unavailable, desc: err.Error()}
	case errors.Is(err, dpop.ErrTooMany):
		// This user's own proofs fill its share of the replay set.
		return &denial{outcome: RateLimited, desc: err.Error(), retryAfter: 5 * time.Second}
	case errors.Is(err, dpop.ErrKeyMismatch):
		return &denial{outcome: InvalidToken, desc: err.Error(), dpop: "invalid_token"}
	}
	return &denial{outcome: InvalidToken, desc: err.Error(), dpop: "invalid_dpop_proof"}
}
