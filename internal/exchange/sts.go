package exchange

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/discovery"
)

// maxTokenSize bounds an issued token.
const maxTokenSize = 16 << 10

// request is one token exchange as sent to the STS.
type request struct {
	subject     string
	target      Target
	actor       *actorToken // nil without actor
	subjectType string
	requested   string
	actorType   string
}

// form builds the RFC 8693 section 2.1 parameters.
func (r *request) form() url.Values {
	f := url.Values{
		"grant_type":           {GrantTypeTokenExchange},
		"subject_token":        {r.subject},
		"subject_token_type":   {r.subjectType},
		"requested_token_type": {r.requested},
	}
	if len(r.target.Audience) > 0 {
		f["audience"] = r.target.Audience
	}
	if len(r.target.Resource) > 0 {
		f["resource"] = r.target.Resource
	}
	if r.target.Scope != "" {
		f.Set("scope", r.target.Scope)
	}
	if r.actor != nil {
		f.Set("actor_token", r.actor.value)
		f.Set("actor_token_type", r.actorType)
	}
	return f
}

// outcome is what one STS call ended with: a token, or an error and
// whether the STS showed itself healthy (for the breaker).
type outcome struct {
	token   Token
	err     *Error
	healthy bool
}

// post sends form to endpoint and reads the answer.
func (e *Exchanger) post(ctx context.Context, endpoint string, form url.Values) outcome {
	now := e.now()
	h := make(http.Header, 4)
	if err := e.auth.Apply(form, h, endpoint, now); err != nil {
		return outcome{err: &Error{Kind: Unavailable, reason: "client authentication failed", cause: err}, healthy: true}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return outcome{err: &Error{Kind: Unavailable, reason: "bad token endpoint", cause: err}, healthy: true}
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		reason := "STS unreachable"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "STS timed out"
		}
		return outcome{err: &Error{Kind: Unavailable, reason: reason, cause: bounded.ScrubURLError(err)}}
	}
	defer resp.Body.Close()
	body, err := bounded.Read(resp.Body, e.cfg.MaxResponseBytes)
	if err != nil {
		reason := "reading the STS response failed"
		if errors.Is(err, bounded.ErrTooLarge) {
			reason = "STS response too large"
		}
		return outcome{err: &Error{Kind: Unavailable, Status: resp.StatusCode, reason: reason, cause: err}}
	}
	return parseResponse(resp.StatusCode, resp.Header, body, e.cfg.RequestedTokenType, e.now())
}

// tokenResponse is RFC 8693 section 2.2.1 and RFC 6749 section 5.2.
type tokenResponse struct {
	AccessToken     string          `json:"access_token"`
	IssuedTokenType string          `json:"issued_token_type"`
	TokenType       string          `json:"token_type"`
	ExpiresIn       json.RawMessage `json:"expires_in"`
	Scope           string          `json:"scope"`

	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// parseResponse turns the STS's answer into an outcome. requested is the
// requested_token_type, now the local time.
func parseResponse(status int, h http.Header, body []byte, requested string, now time.Time) outcome {
	var r tokenResponse
	jsonErr := json.Unmarshal(body, &r)

	if status != http.StatusOK {
		e := &Error{Kind: Unavailable, Status: status}
		if jsonErr == nil {
			e.Code = cleanCode(r.Error)
			e.Description = cleanDescription(r.ErrorDescription)
		}
		switch {
		case status >= 500 || status == http.StatusTooManyRequests:
			e.RetryAfter = bounded.RetryAfter(h.Get("Retry-After"), now, minRetryAfter, maxRetryAfter)
			e.reason = "STS failed"
			if status == http.StatusTooManyRequests {
				e.reason = "STS is rate limiting"
			}
			return outcome{err: e}
		case status >= 400 && e.Code != "":
			k, healthy := kindForCode(e.Code)
			e.Kind = k
			if k == Unavailable {
				e.reason = "STS refused this service's request"
				if !healthy {
					e.reason = "STS failed"
					e.RetryAfter = bounded.RetryAfter(h.Get("Retry-After"), now, minRetryAfter, maxRetryAfter)
				}
			}
			return outcome{err: e, healthy: healthy}
		}
		// A 3xx, or a 4xx without an OAuth error: the endpoint is wrong.
		e.reason = "unexpected STS response status " + strconv.Itoa(status)
		return outcome{err: e, healthy: true}
	}

	bad := func(reason string) outcome {
		return outcome{err: &Error{Kind: Unavailable, Status: status, reason: reason}}
	}
	if jsonErr != nil {
		return bad("STS response is not JSON")
	}
	if r.Error != "" {
		// An error object with 200: not a token, whatever else it says.
		return bad("STS answered an error with status 200")
	}
	if r.AccessToken == "" {
		return bad("STS issued no token")
	}
	if len(r.AccessToken) > maxTokenSize || !headerSafe(r.AccessToken) {
		return bad("STS issued a token that cannot be sent in a header")
	}
	switch r.IssuedTokenType {
	case TokenTypeAccessToken, TokenTypeJWT:
	case "":
		return bad("STS response lacks issued_token_type")
	default:
		// An ID token, refresh token or SAML assertion must not go upstream
		// as a bearer token.
		return bad("STS issued a token type other than access_token or jwt")
	}
	// RFC 8693 section 2.2.1: N_A when the token is not an access token; we
	// asked for a JWT, which is fine to use as a bearer token.
	if !strings.EqualFold(r.TokenType, "bearer") && !(r.TokenType == "N_A" && requested == TokenTypeJWT) {
		return bad("STS issued a token that is not a bearer token")
	}
	lifetime, ok := parseExpiresIn(r.ExpiresIn)
	if !ok {
		return bad("STS response has an invalid expires_in")
	}
	var exp time.Time
	if lifetime >= 0 {
		exp = now.Add(lifetime)
	}
	if jwtExp, ok := unverifiedExp(r.AccessToken); ok && (exp.IsZero() || jwtExp.Before(exp)) {
		exp = jwtExp
	}
	// A zero exp is unknown: the caller applies its fallback.
	return outcome{token: newToken(r.AccessToken, r.IssuedTokenType, r.Scope, exp), healthy: true}
}

// headerSafe: visible ASCII only, as a bearer token (RFC 6750 b64token) or
// any JWT is; anything else could split or corrupt the upstream header.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// parseExpiresIn reads expires_in: absent or null is -1 (unknown); a
// non-negative integer number, or such a number in a string (some servers
// send that), is seconds. Anything else is invalid.
func parseExpiresIn(raw json.RawMessage) (time.Duration, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return -1, true
	}
	s := string(raw)
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, false
		}
	}
	// Integral floats ("3600.0") are unusual but valid JSON numbers.
	f, err := strconv.ParseFloat(s, 64)
	const maxSeconds = 10 * 365 * 24 * 3600
	if err != nil || f < 0 || f > maxSeconds || f != float64(int64(f)) {
		return 0, false
	}
	return time.Duration(f) * time.Second, true
}

// unverifiedExp reads a JWT's exp without verifying it: it only bounds how
// long the token is cached, never whether it is trusted.
func unverifiedExp(token string) (time.Time, bool) {
	if strings.Count(token, ".") != 2 {
		return time.Time{}, false
	}
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil || c.ExpiresAt == nil {
		return time.Time{}, false
	}
	return c.ExpiresAt.Time, true
}

// endpointResolver finds the token endpoint: configured, or discovered
// from the issuer's metadata once and then remembered.
type endpointResolver struct {
	issuer string
	mu     sync.Mutex
	found  string
}

// endpoint returns the token endpoint, discovering it if needed.
func (e *Exchanger) endpoint(ctx context.Context) (string, *Error) {
	if e.cfg.endpoint != nil {
		return e.cfg.TokenEndpoint, nil
	}
	r := &e.resolver
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.found != "" {
		return r.found, nil
	}
	md, err := discovery.Discover(ctx, e.client, r.issuer, e.cfg.MaxResponseBytes, discovery.TokenEndpoint)
	if err == nil {
		r.found = md.TokenEndpoint
		return r.found, nil
	}
	reason := "token endpoint discovery failed"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		reason = "token endpoint discovery timed out"
	}
	return "", &Error{Kind: Unavailable, reason: reason, cause: err}
}
