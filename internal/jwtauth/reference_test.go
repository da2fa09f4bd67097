package jwtauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// The reference verifier is the verifier as it was built on golang-jwt:
// ParseWithClaims into jwt.MapClaims (encoding/json), the same key
// function checks, the same registered-claim checks on the map. The
// differential fuzz test holds the verifier to it: whatever the verifier
// accepts, the reference accepts with the same claims; whatever the
// reference accepts, the verifier accepts too unless the token is one the
// verifier refuses on purpose (refusedOnPurpose).

type refResult struct {
	claims jwt.MapClaims
	issuer *issuer
	keyID  string // the id of the key that verified the token
	exp    time.Time
	nbf    time.Time
	iat    time.Time
	aud    []string
}

func refVerify(v *Verifier, ctx context.Context, token string, allowed, audiences []string) (*refResult, error) {
	if len(token) == 0 || len(token) > MaxTokenSize {
		return nil, ErrMalformed
	}
	parser := jwt.NewParser(jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding())
	var (
		denial error
		chosen *issuer
		keys   []verificationKey // the candidates of a key set
	)
	keyFunc := func(t *jwt.Token) (any, error) {
		key, err := func() (any, error) {
			alg := algorithmsByName[t.Method.Alg()]
			if alg == nil || t.Method != alg.method {
				return nil, ErrAlgorithm
			}
			if _, ok := t.Header["crit"]; ok {
				return nil, ErrMalformed
			}
			iss, hasIss, err := refString(t.Claims.(jwt.MapClaims), "iss")
			if err != nil {
				return nil, err
			}
			is, err := v.pick(v.byIss[iss], hasIss, allowed)
			if err != nil {
				return nil, err
			}
			if is.algs&alg.bit == 0 {
				return nil, ErrAlgorithm
			}
			if is.typ != "" {
				typ, _ := t.Header["typ"].(string)
				if !typeMatches(typ, is.typ) {
					return nil, ErrType
				}
			}
			chosen = is
			if is.secret != nil {
				return is.secret, nil
			}
			rawKID, hasKID := t.Header["kid"]
			k, ok := rawKID.(string)
			if hasKID && !ok {
				return nil, ErrMalformed
			}
			if set := is.keys.current(); set != nil {
				keys = set.all
				if hasKID {
					keys = set.byKID[k]
				}
			}
			return is.keys.lookup(ctx, k, hasKID, alg)
		}()
		if err != nil {
			denial = err
		}
		return key, err
	}
	claims := jwt.MapClaims{}
	t, err := parser.ParseWithClaims(token, claims, keyFunc)
	if err != nil {
		switch {
		case denial != nil:
			return nil, denial
		case errors.Is(err, jwt.ErrTokenMalformed):
			return nil, ErrMalformed
		case errors.Is(err, jwt.ErrTokenSignatureInvalid):
			return nil, ErrSignature
		case errors.Is(err, jwt.ErrTokenUnverifiable) && t != nil:
			if _, ok := t.Header["alg"].(string); ok {
				return nil, ErrAlgorithm
			}
		}
		return nil, ErrMalformed
	}
	r := &refResult{claims: claims, issuer: chosen}
	// The key that verified: the first candidate whose signature checks
	// out, as golang-jwt tries a key set's keys in order.
	input := token[:strings.LastIndexByte(token, '.')]
	for _, k := range keys {
		if k.algs&algorithmsByName[t.Method.Alg()].bit != 0 && t.Method.Verify(input, t.Signature, k.key) == nil {
			r.keyID = k.id
			break
		}
	}
	now := v.now()
	var ok bool
	if r.exp, ok, err = refDate(claims, "exp"); err != nil {
		return nil, err
	} else if !ok {
		return nil, ErrMissingClaim
	}
	if !now.Before(r.exp.Add(chosen.leeway)) {
		return nil, ErrExpired
	}
	if r.nbf, ok, err = refDate(claims, "nbf"); err != nil {
		return nil, err
	} else if ok && now.Before(r.nbf.Add(-chosen.leeway)) {
		return nil, ErrNotYetValid
	}
	if r.iat, ok, err = refDate(claims, "iat"); err != nil {
		return nil, err
	} else if ok && now.Before(r.iat.Add(-chosen.leeway)) {
		return nil, ErrIssuedInFuture
	}
	iss, _, err := refString(claims, "iss")
	if err != nil {
		return nil, err
	}
	if chosen.iss != "" && iss != chosen.iss {
		return nil, ErrIssuer
	}
	switch aud := claims["aud"].(type) {
	case nil:
	case string:
		r.aud = []string{aud}
	case []any:
		r.aud = make([]string, len(aud))
		for i, a := range aud {
			s, ok := a.(string)
			if !ok {
				return nil, ErrMalformed
			}
			r.aud[i] = s
		}
	default:
		return nil, ErrMalformed
	}
	if len(audiences) > 0 && !anyOf(r.aud, audiences) {
		return nil, ErrAudience
	}
	for _, name := range []string{"sub", "jti"} {
		if _, _, err := refString(claims, name); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func refDate(claims jwt.MapClaims, name string) (time.Time, bool, error) {
	raw, ok := claims[name]
	if !ok || raw == nil {
		return time.Time{}, false, nil
	}
	f, ok := raw.(float64)
	if !ok || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return time.Time{}, false, ErrMalformed
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

func refString(claims jwt.MapClaims, name string) (string, bool, error) {
	raw, ok := claims[name]
	if !ok {
		return "", false, nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", false, ErrMalformed
	}
	return s, true, nil
}

// refusedOnPurpose reports whether the verifier may refuse a token the
// reference accepts, and why: a JSON document parsers read differently
// (a member named twice, invalid UTF-8, nesting deeper than
// jsonrpc.MaxDepth, an escaped unpaired surrogate), or a token spelled
// with the CR or LF the base64 decoder skips. It is computed independently
// of the verifier's parser; the surrogate check is jsonrpc's, held to an
// oracle of its own by jsonrpc.FuzzLoneSurrogate.
func refusedOnPurpose(token string) string {
	if strings.ContainsAny(token, "\r\n") {
		return "CR or LF in the token"
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	for _, seg := range parts[:2] {
		doc, err := base64.RawURLEncoding.Strict().DecodeString(seg)
		if err != nil {
			return ""
		}
		if !utf8.Valid(doc) {
			return "invalid UTF-8"
		}
		if why := ambiguousJSON(doc); why != "" {
			return why
		}
		if json.Valid(doc) && jsonrpc.LoneSurrogate(doc) {
			return "an escaped unpaired surrogate"
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(doc, &members) == nil {
			for name := range members {
				for _, read := range []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "azp", "client_id", "scope", "scp", "act", "alg", "kid", "typ", "crit"} {
					if name != read && strings.EqualFold(name, read) {
						return "a name differing from a read one only in case"
					}
				}
			}
		}
	}
	return ""
}

// ambiguousJSON walks doc with encoding/json's tokenizer and reports a
// member named twice in one object or nesting deeper than the bound.
func ambiguousJSON(doc []byte) string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string token is a key
	}
	var stack []frame
	for range len(doc) + 1 {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return ""
		}
		top := len(stack) - 1
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				if top >= 0 && stack[top].object {
					stack[top].key = true
				}
				stack = append(stack, frame{object: tok == '{', keys: map[string]bool{}, key: true})
				if len(stack) > jsonrpc.MaxDepth {
					return "nesting too deep"
				}
			default:
				stack = stack[:top]
				if top > 0 && stack[top-1].object {
					stack[top-1].key = true
				}
			}
			continue
		case string:
			if top >= 0 && stack[top].object && stack[top].key {
				if stack[top].keys[tok] {
					return "member named twice"
				}
				stack[top].keys[tok] = true
				stack[top].key = false
				continue
			}
		}
		if top >= 0 && stack[top].object {
			stack[top].key = true
		}
	}
	return ""
}

// sameClaims compares the verifier's result with the reference's.
func sameClaims(t *testing.T, got *Claims, ref *refResult) {
	t.Helper()
	iss, _ := ref.claims["iss"].(string)
	sub, _ := ref.claims["sub"].(string)
	jti, _ := ref.claims["jti"].(string)
	if got.IssuerName != ref.issuer.name || got.Issuer != iss || got.Subject != sub || got.ID != jti || got.KeyID != ref.keyID {
		t.Fatalf("registered claims differ: got %q %q %q %q key %q, reference %q %q %q %q key %q",
			got.IssuerName, got.Issuer, got.Subject, got.ID, got.KeyID, ref.issuer.name, iss, sub, jti, ref.keyID)
	}
	if !got.ExpiresAt.Equal(ref.exp) || !got.NotBefore.Equal(ref.nbf) || !got.IssuedAt.Equal(ref.iat) {
		t.Fatalf("times differ: got %v %v %v, reference %v %v %v", got.ExpiresAt, got.NotBefore, got.IssuedAt, ref.exp, ref.nbf, ref.iat)
	}
	if !reflect.DeepEqual(got.Audience, ref.aud) && (len(got.Audience) != 0 || len(ref.aud) != 0) {
		t.Fatalf("audience %q, reference %q", got.Audience, ref.aud)
	}
	if all := got.All(); !reflect.DeepEqual(all, map[string]any(ref.claims)) {
		t.Fatalf("All() = %v, reference %v", all, ref.claims)
	}
	for name, want := range ref.claims {
		v, ok := got.Claim(name)
		if !ok || !reflect.DeepEqual(v, want) {
			t.Fatalf("Claim(%q) = %v, %v; reference %v", name, v, ok, want)
		}
		s, isString := got.ClaimString(name)
		if ws, ok := want.(string); ok != isString || s != ws {
			t.Fatalf("ClaimString(%q) = %q, %v; reference %v", name, s, isString, want)
		}
	}
	if _, ok := got.Claim("no-such-claim\x00"); ok {
		t.Fatal("Claim() found a claim the token does not carry")
	}
}

// compareWithReference verifies token with both and fails on any
// difference that is not a deliberate refusal.
func compareWithReference(t *testing.T, v *Verifier, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	got, err := v.Verify(ctx, token, nil, nil)
	ref, refErr := refVerify(v, ctx, token, nil, nil)
	switch {
	case err == nil && refErr == nil:
		sameClaims(t, got, ref)
	case err == nil:
		t.Fatalf("Verify() accepted a token the reference refuses (%v)", refErr)
	case refErr == nil:
		if why := refusedOnPurpose(token); why == "" {
			t.Fatalf("Verify() = %v for a token the reference accepts", err)
		}
	case err != refErr && refusedOnPurpose(token) == "" && !refOrderDiffers(token):
		t.Fatalf("Verify() = %v, reference %v", err, refErr)
	}
}

// refOrderDiffers reports tokens both refuse for which the two may name
// different reasons, because they check in a different order: a payload
// that is not a JSON object (null decodes to no claims at all in the
// reference, which then goes on), or an alg golang-jwt knows and the
// verifier does not ("none") with a signature that is not base64.
func refOrderDiffers(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(parts[1])
	if err != nil {
		return false
	}
	var obj map[string]any
	if json.Unmarshal(payload, &obj) != nil || obj == nil {
		return true
	}
	_, sigErr := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	return sigErr != nil
}
