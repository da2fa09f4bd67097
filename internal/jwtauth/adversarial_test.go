package jwtauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// hsToken signs a literal header and payload with the test HMAC secret.
func hsToken(header, payload string) string {
	enc := base64.RawURLEncoding
	input := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, hmacSecret)
	m.Write([]byte(input))
	return input + "." + enc.EncodeToString(m.Sum(nil))
}

// resign replaces a token's signature with the HMAC of its (possibly
// altered) first two segments as they are spelled.
func resign(header, payload string) string {
	input := header + "." + payload
	m := hmac.New(sha256.New, hmacSecret)
	m.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestVerifyAdversarial feeds the parser what an attacker holding the
// signing secret of a low-privilege issuer, or none, would try: every
// case is also checked against the reference verifier (reference_test.go).
func TestVerifyAdversarial(t *testing.T) {
	v := newVerifier(t, newClock(), testSpecs(t)...)
	exp := t0.Add(time.Hour).Unix()
	hs := `{"alg":"HS256","typ":"JWT"}`
	body := func(extra string) string {
		return fmt.Sprintf(`{"iss":%q,"sub":"alice","exp":%d%s}`, hmacIss, exp, extra)
	}
	enc := base64.RawURLEncoding
	valid := hsToken(hs, body(""))
	parts := strings.Split(valid, ".")
	deep := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	var many strings.Builder
	for i := range 40 {
		fmt.Fprintf(&many, `,"c%d":%d`, i, i)
	}

	tests := []struct {
		name    string
		token   string
		want    error
		check   func(*testing.T, *Claims) // for accepted tokens
		refDiff bool                      // the reference accepts: refused on purpose
	}{
		{name: "duplicate claim", token: hsToken(hs, body(`,"sub":"admin"`)), want: ErrMalformed, refDiff: true},
		{name: "duplicate claim spelled with an escape", token: hsToken(hs, body(`,"s\u0075b":"admin"`)), want: ErrMalformed, refDiff: true},
		{name: "duplicate member inside act", token: hsToken(hs, body(`,"act":{"sub":"a","sub":"b"}`)), want: ErrMalformed, refDiff: true},
		{name: "duplicate header alg", token: hsToken(`{"alg":"none","alg":"HS256"}`, body("")), want: ErrMalformed, refDiff: true},
		{name: "claim differing only in case", token: hsToken(hs, body(`,"SUB":"admin"`)), want: ErrMalformed, refDiff: true},
		{name: "claim differing only by a folding letter", token: hsToken(hs, body(`,"ſcope":"admin"`)), want: ErrMalformed, refDiff: true},
		{name: "header member differing only in case", token: hsToken(`{"alg":"HS256","ALG":"none"}`, body("")), want: ErrMalformed, refDiff: true},
		{name: "other claims may differ in case", token: hsToken(hs, body(`,"Email":"a@example.com","email":"b@example.com"`)), check: func(*testing.T, *Claims) {}},
		{name: "duplicate header kid", token: hsToken(`{"alg":"HS256","kid":"a","kid":"b"}`, body("")), want: ErrMalformed, refDiff: true},
		{name: "exp as string", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":"%d"}`, hmacIss, exp)), want: ErrMalformed},
		{name: "exp as float", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":%d.25}`, hmacIss, exp)), check: func(t *testing.T, c *Claims) {
			if want := time.Unix(exp, 250_000_000); !c.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v", c.ExpiresAt, want)
			}
		}},
		{name: "exp as exponent", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":%de0}`, hmacIss, exp)), check: func(t *testing.T, c *Claims) {
			if !c.ExpiresAt.Equal(time.Unix(exp, 0)) {
				t.Errorf("ExpiresAt = %v", c.ExpiresAt)
			}
		}},
		{name: "exp 1e3 is long past", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":1e3}`, hmacIss)), want: ErrExpired},
		{name: "exp beyond year 9999", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":1e300}`, hmacIss)), want: ErrMalformed},
		{name: "exp beyond float64", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":1e400}`, hmacIss)), want: ErrMalformed},
		{name: "unread claim beyond float64", token: hsToken(hs, body(`,"n":-1e999`)), want: ErrMalformed},
		{name: "negative exp", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":-1}`, hmacIss)), want: ErrMalformed},
		{name: "null exp is none", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"exp":null}`, hmacIss)), want: ErrMissingClaim},
		{name: "aud list with a number", token: hsToken(hs, body(`,"aud":["api",1]`)), want: ErrMalformed},
		{name: "aud list with null", token: hsToken(hs, body(`,"aud":["api",null]`)), want: ErrMalformed},
		{name: "aud object", token: hsToken(hs, body(`,"aud":{"api":true}`)), want: ErrMalformed},
		{name: "aud list", token: hsToken(hs, body(`,"aud":["x","api"]`)), check: func(t *testing.T, c *Claims) {
			if strings.Join(c.Audience, ",") != "x,api" {
				t.Errorf("Audience = %q", c.Audience)
			}
		}},
		{name: "nested act chain", token: hsToken(hs, body(`,"act":{"sub":"agent-b","act":{"sub":"agent-a","act":{"sub":"agent-0"}}}`)), check: func(t *testing.T, c *Claims) {
			act, _ := c.Claim("act")
			inner, _ := act.(map[string]any)["act"].(map[string]any)
			if inner["sub"] != "agent-a" {
				t.Errorf("Claim(act) = %v", act)
			}
		}},
		{name: "jti not a string", token: hsToken(hs, body(`,"jti":7`)), want: ErrMalformed},
		{name: "sub not a string", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"sub":7,"exp":%d}`, hmacIss, exp)), want: ErrMalformed},
		{name: "registered claim spelled with an escape", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"\u0073ub":"alice","exp":%d}`, hmacIss, exp)), check: func(t *testing.T, c *Claims) {
			if s, ok := c.ClaimString("sub"); c.Subject != "alice" || !ok || s != "alice" {
				t.Errorf("Subject %q, ClaimString(sub) = %q, %v", c.Subject, s, ok)
			}
		}},
		{name: "other claim spelled with an escape", token: hsToken(hs, body(`,"r\u006fle":"admin"`)), check: func(t *testing.T, c *Claims) {
			if s, ok := c.ClaimString("role"); !ok || s != "admin" {
				t.Errorf("ClaimString(role) = %q, %v", s, ok)
			}
			if v, ok := c.Claim("role"); !ok || v != "admin" {
				t.Errorf("Claim(role) = %v, %v", v, ok)
			}
		}},
		{name: "claim folding onto a read claim through an escape", token: hsToken(hs, body(`,"\u0053cope":"admin"`)), want: ErrMalformed, refDiff: true},
		{name: "escaped quote in a claim", token: hsToken(hs, body(`,"name":"a\"b"`)), check: func(t *testing.T, c *Claims) {
			if s, ok := c.ClaimString("name"); !ok || s != `a"b` {
				t.Errorf("ClaimString(name) = %q, %v", s, ok)
			}
		}},
		{name: "empty claim name", token: hsToken(hs, body(`,"":"x"`)), check: func(t *testing.T, c *Claims) {
			if v, ok := c.Claim(""); !ok || v != "x" {
				t.Errorf(`Claim("") = %v, %v`, v, ok)
			}
		}},
		{name: "iss not a string", token: hsToken(hs, fmt.Sprintf(`{"iss":[%q],"exp":%d}`, hmacIss, exp)), want: ErrMalformed},
		{name: "unicode escapes in iss and sub", token: hsToken(hs, fmt.Sprintf(`{"iss":"\u0068ttps:\/\/hmac.example","sub":"\u00e9l\u00e8ve \ud83d\ude00","exp":%d}`, exp)), check: func(t *testing.T, c *Claims) {
			if c.Issuer != hmacIss || c.Subject != "élève 😀" {
				t.Errorf("Issuer %q Subject %q", c.Issuer, c.Subject)
			}
		}},
		// "alice\ud800" is "alice\ufffd" to encoding/json and a string
		// ending in a lone surrogate to JavaScript: a program behind the
		// service that reads the forwarded token would see another user.
		{name: "lone surrogate in sub", token: hsToken(hs, fmt.Sprintf(`{"iss":%q,"sub":"alice\ud800","exp":%d}`, hmacIss, exp)), want: ErrMalformed, refDiff: true},
		{name: "lone low surrogate in a claim nobody reads", token: hsToken(hs, body(`,"note":"\udc00"`)), want: ErrMalformed, refDiff: true},
		{name: "lone surrogate deep in act", token: hsToken(hs, body(`,"act":{"sub":"agent","act":{"sub":"\ud83d"}}`)), want: ErrMalformed, refDiff: true},
		{name: "lone surrogate in a claim name", token: hsToken(hs, body(`,"gr\ud800oups":["admin"]`)), want: ErrMalformed, refDiff: true},
		{name: "lone surrogate in the header", token: hsToken(`{"alg":"HS256","kid":"k\udbff"}`, body("")), want: ErrMalformed, refDiff: true},
		{name: "escaped backslash before u is no escape", token: hsToken(hs, body(`,"path":"C:\\ud800"`)), check: func(t *testing.T, c *Claims) {
			if v, _ := c.ClaimString("path"); v != `C:\ud800` {
				t.Errorf("path = %q", v)
			}
		}},
		{name: "escaped alg", token: hsToken(`{"alg":"HS\u0032\u0035\u0036"}`, body("")), check: func(*testing.T, *Claims) {}},
		{name: "alg none", token: hsToken(`{"alg":"none"}`, body("")), want: ErrAlgorithm},
		{name: "alg not a string", token: hsToken(`{"alg":["HS256"]}`, body("")), want: ErrMalformed},
		{name: "crit header", token: hsToken(`{"alg":"HS256","crit":null}`, body("")), want: ErrMalformed},
		{name: "crit header spelled with an escape", token: hsToken(`{"alg":"HS256","\u0063rit":["exp"]}`, body("")), want: ErrMalformed},
		{name: "header member differing in case through an escape", token: hsToken(`{"alg":"HS256","\u0041LG":"none"}`, body("")), want: ErrMalformed, refDiff: true},
		{name: "header not an object", token: hsToken(`["HS256"]`, body("")), want: ErrMalformed},
		{name: "payload null", token: hsToken(hs, `null`), want: ErrMalformed, refDiff: false},
		{name: "payload an array", token: hsToken(hs, `[]`), want: ErrMalformed},
		{name: "trailing garbage after the payload", token: hsToken(hs, body("")+" x"), want: ErrMalformed},
		{name: "two payloads", token: hsToken(hs, body("")+body("")), want: ErrMalformed},
		{name: "whitespace around the payload", token: hsToken(hs, " \n"+body("")+"\t "), check: func(*testing.T, *Claims) {}},
		{name: "invalid UTF-8 in a claim", token: hsToken(hs, body(`,"name":"`+"\xff"+`"`)), want: ErrMalformed, refDiff: true},
		{name: "nesting beyond the bound", token: hsToken(hs, body(`,"deep":`+deep)), want: ErrMalformed, refDiff: true},
		{name: "many claims", token: hsToken(hs, body(many.String())), check: func(t *testing.T, c *Claims) {
			if v, ok := c.Claim("c39"); !ok || v != float64(39) {
				t.Errorf("Claim(c39) = %v, %v", v, ok)
			}
		}},
		{name: "large payload", token: hsToken(hs, body(`,"blob":"`+strings.Repeat("x", 3000)+`"`)), check: func(t *testing.T, c *Claims) {
			if s, _ := c.ClaimString("blob"); len(s) != 3000 {
				t.Errorf("blob is %d bytes", len(s))
			}
		}},
		{name: "escaped claim name after a large claim", token: hsToken(hs, body(`,"blob":"`+strings.Repeat("x", 9000)+`","r\u006fle":"admin"`)), check: func(t *testing.T, c *Claims) {
			if s, ok := c.ClaimString("role"); !ok || s != "admin" {
				t.Errorf("ClaimString(role) = %q, %v", s, ok)
			}
			if all := c.All(); all["role"] != "admin" || len(all["blob"].(string)) != 9000 {
				t.Errorf("All() has role %v and a blob of %d bytes", all["role"], len(all["blob"].(string)))
			}
		}},
		{name: "oversized token", token: hsToken(hs, body(`,"blob":"`+strings.Repeat("x", MaxTokenSize)+`"`)), want: ErrMalformed},
		{name: "four segments", token: valid + ".x", want: ErrMalformed},
		{name: "trailing dot", token: valid + ".", want: ErrMalformed},
		{name: "padding", token: resign(parts[0]+"=", parts[1]), want: ErrMalformed},
		{name: "padded signature", token: valid + "=", want: ErrMalformed},
		{name: "non-canonical last character", token: resign(parts[0], parts[1][:len(parts[1])-1]+nonCanonical(parts[1])), want: ErrMalformed},
		{name: "line feed inside", token: resign(parts[0][:4]+"\n"+parts[0][4:], parts[1]), want: ErrMalformed, refDiff: true},
		{name: "standard base64 alphabet", token: resign(enc.EncodeToString([]byte(hs)), strings.NewReplacer("-", "+", "_", "/").Replace(enc.EncodeToString([]byte(body(`,"x":">>>???"`))))), want: ErrMalformed},
		{name: "empty signature", token: parts[0] + "." + parts[1] + ".", want: ErrSignature},
		{name: "signature of another payload", token: parts[0] + "." + strings.Split(hsToken(hs, body(`,"admin":true`)), ".")[1] + "." + parts[2], want: ErrSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), tc.token, nil, nil)
			if err != tc.want {
				t.Fatalf("Verify() error = %v, want %v", err, tc.want)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
			if _, refErr := refVerify(v, context.Background(), tc.token, nil, nil); (refErr == nil) != (tc.want == nil || tc.refDiff) {
				t.Errorf("reference error = %v: the case does not hold what it says", refErr)
			}
			compareWithReference(t, v, tc.token)
		})
	}
}

// nonCanonical is the base64url character after seg's last one that
// decodes to the same bytes with nonzero unused bits, or seg's own last
// character when its length leaves no unused bits.
func nonCanonical(seg string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, seg[len(seg)-1])
	if len(seg)%4 == 0 {
		return seg[len(seg)-1:]
	}
	return string(alphabet[last+1])
}

// TestVerifyAllocations bounds what verifying a typical HS256 token
// allocates: the Claims (payload inside) and the subject. The HMAC is
// pooled.
func TestVerifyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	token := hsToken(`{"alg":"HS256","typ":"JWT"}`, fmt.Sprintf(`{"iss":%q,"sub":"alice","aud":"api","exp":%d,"scope":"read write","session_id":"s-1"}`, hmacIss, t0.Add(time.Hour).Unix()))
	if n := verifyAllocs(t, token, "api"); n > 2 {
		t.Errorf("Verify() allocates %v times, want at most 2", n)
	}
}

// verifyAllocs is what verifying token for audience allocates, once its
// issuer's keys and pools are warm.
func verifyAllocs(t *testing.T, token, audience string) float64 {
	t.Helper()
	v := newVerifier(t, newClock(), testSpecs(t)...)
	ctx, aud := context.Background(), []string{audience}
	if _, err := v.Verify(ctx, token, nil, aud); err != nil {
		t.Fatal(err)
	}
	return testing.AllocsPerRun(100, func() {
		if _, err := v.Verify(ctx, token, nil, aud); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClaimsSize holds a Claims, payload and member index inline, to the
// 1 KiB allocation size class: a verification allocates one.
func TestClaimsSize(t *testing.T) {
	if n := unsafe.Sizeof(Claims{}); n > 1024 {
		t.Errorf("Claims is %d bytes, want at most 1024", n)
	}
}
