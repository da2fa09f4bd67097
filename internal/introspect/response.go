package introspect

import (
	"context"
	"encoding/json"
	"math"
	"mime"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/jwtauth"
)

// jwtResponseType is the media type of a JWT introspection response (RFC
// 9701 section 4); its JOSE typ is the same without "application/".
const (
	jwtResponseType = "application/token-introspection+jwt"
	jwtResponseTyp  = "token-introspection+jwt"
)

// signedAlgorithms are the JWS algorithms accepted on a JWT response: only
// asymmetric ones, the server signs with its published keys.
var signedAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"}

// document turns a 200 answer into the introspection response object: the
// JSON body, or the token_introspection claim of a verified JWT.
func (in *Introspector) document(ctx context.Context, contentType string, body []byte) (map[string]any, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	isJWT := mt == jwtResponseType
	switch {
	case isJWT && in.cfg.ResponseKeys == nil:
		return nil, unavailable("a JWT introspection response cannot be verified without keys", nil)
	case !isJWT && in.cfg.ResponseKeys != nil:
		return nil, unavailable("the introspection response is not the signed JWT asked for", nil)
	case isJWT:
		return in.verifyJWT(ctx, strings.TrimSpace(string(body)))
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return nil, unavailable("the introspection response is not a JSON object", nil)
	}
	return doc, nil
}

// verifyJWT checks a JWT introspection response (RFC 9701 section 5): typ,
// signature by the server's keys, iss the server, aud this client, iat
// present and not in the future, exp if present; and returns its
// token_introspection claim.
func (in *Introspector) verifyJWT(ctx context.Context, s string) (map[string]any, error) {
	p := jwt.NewParser(
		jwt.WithValidMethods(signedAlgorithms),
		jwt.WithIssuer(in.cfg.Issuer),
		jwt.WithAudience(in.cfg.Auth.ClientID),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(in.cfg.Leeway),
		jwt.WithTimeFunc(in.now),
	)
	claims := jwt.MapClaims{}
	_, err := p.ParseWithClaims(s, claims, func(t *jwt.Token) (any, error) {
		typ, _ := t.Header["typ"].(string)
		if !strings.EqualFold(strings.TrimPrefix(strings.ToLower(typ), "application/"), jwtResponseTyp) {
			return nil, jwtauth.ErrType
		}
		if _, crit := t.Header["crit"]; crit {
			return nil, jwtauth.ErrMalformed
		}
		raw, hasKID := t.Header["kid"]
		kid, ok := raw.(string)
		if hasKID && !ok {
			return nil, jwtauth.ErrMalformed
		}
		return in.cfg.ResponseKeys.Key(ctx, kid, hasKID, t.Method.Alg())
	})
	if err != nil {
		return nil, unavailable("the JWT introspection response failed verification", err)
	}
	if _, ok := claims["iat"]; !ok {
		return nil, unavailable("the JWT introspection response has no iat", nil)
	}
	doc, ok := claims["token_introspection"].(map[string]any)
	if !ok {
		return nil, unavailable("the JWT introspection response has no token_introspection object", nil)
	}
	return doc, nil
}

// parse turns an introspection response object (RFC 7662 section 2.2) into
// claims or a denial. A response that breaks the RFC is an error: the
// server is broken, the token is not judged.
func (in *Introspector) parse(doc map[string]any) (*entry, error) {
	active, ok := doc["active"].(bool)
	if !ok {
		return nil, unavailable("the introspection response has no boolean active", nil)
	}
	if !active {
		return &entry{err: ErrInactive}, nil
	}
	bad := func(member string) (*entry, error) {
		return nil, unavailable("the introspection response member "+member+" is malformed", nil)
	}
	strs := map[string]string{}
	for _, m := range []string{"token_type", "token_use", "iss", "sub", "jti", "client_id"} {
		v, present := doc[m]
		if !present || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return bad(m)
		}
		strs[m] = s
	}
	times := map[string]time.Time{}
	for _, m := range []string{"exp", "nbf", "iat"} {
		t, present, ok := numericDate(doc[m])
		if !ok {
			return bad(m)
		}
		if present {
			times[m] = t
		}
	}
	aud, ok := audience(doc["aud"])
	if !ok {
		return bad("aud")
	}

	// Only an access token is a credential for a request: a refresh token
	// the server reports active must not be accepted as a bearer token.
	// A DPoP-bound one (RFC 9449) is, held to the key its cnf.jkt names
	// by the binding stage; without that jkt nothing could hold it.
	if tt, ok := strs["token_type"]; ok && !bearerType(tt) && !(strings.EqualFold(tt, "DPoP") && hasJKT(doc)) {
		return &entry{err: jwtauth.ErrType}, nil
	}
	if tu, ok := strs["token_use"]; ok && tu != "access_token" {
		return &entry{err: jwtauth.ErrType}, nil
	}
	iss, hasIss := strs["iss"]
	if !hasIss {
		iss = in.cfg.Issuer
	} else if in.cfg.Issuer != "" && iss != in.cfg.Issuer {
		return &entry{err: jwtauth.ErrIssuer}, nil
	}
	now, leeway := in.now(), in.cfg.Leeway
	exp, hasExp := times["exp"]
	if hasExp && !now.Before(exp.Add(leeway)) {
		return &entry{err: jwtauth.ErrExpired}, nil
	}
	if nbf, ok := times["nbf"]; ok && now.Before(nbf.Add(-leeway)) {
		return &entry{err: jwtauth.ErrNotYetValid}, nil
	}
	if iat, ok := times["iat"]; ok && now.Before(iat.Add(-leeway)) {
		return &entry{err: jwtauth.ErrIssuedInFuture}, nil
	}
	until := now.Add(in.cfg.CacheTTL)
	if hasExp && exp.Before(until) {
		until = exp
	}
	return &entry{claims: &jwtauth.Claims{
		IssuerName: in.cfg.Name,
		Issuer:     iss,
		Subject:    strs["sub"],
		ID:         strs["jti"],
		Audience:   aud,
		ExpiresAt:  until,
		NotBefore:  times["nbf"],
		IssuedAt:   times["iat"],
		Raw:        doc,
	}}, nil
}

// bearerType accepts the token_type values that mean an access token used
// as a bearer token.
func bearerType(tt string) bool {
	return strings.EqualFold(tt, "bearer") || tt == "access_token" || tt == "urn:ietf:params:oauth:token-type:access_token"
}

// hasJKT reports whether the response binds the token to a key: a string
// cnf.jkt.
func hasJKT(doc map[string]any) bool {
	cnf, _ := doc["cnf"].(map[string]any)
	_, ok := cnf["jkt"].(string)
	return ok
}

// maxNumericDate is 9999-12-31T23:59:59Z.
const maxNumericDate = 253402300799

// numericDate reads a NumericDate member: absent or null is not present;
// anything but a number in range is malformed (ok false).
func numericDate(v any) (t time.Time, present, ok bool) {
	if v == nil {
		return time.Time{}, false, true
	}
	f, isNum := v.(float64)
	if !isNum || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return time.Time{}, false, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, true
}

// audience reads aud, a string or an array of strings.
func audience(v any) ([]string, bool) {
	switch a := v.(type) {
	case nil:
		return nil, true
	case string:
		return []string{a}, true
	case []any:
		out := make([]string, len(a))
		for i, e := range a {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}
