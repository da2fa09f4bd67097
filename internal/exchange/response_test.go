package exchange

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

// A JWT whose payload is {"exp":1800000600} (header and signature are not
// checked when reading exp).
const jwtExp600 = "eyJhbGciOiJub25lIn0.eyJleHAiOjE4MDAwMDA2MDB9.c2ln"

// TestParseResponseGolden pins how each kind of STS answer is read: the
// resulting kind, code, Retry-After and the client-safe error text.
func TestParseResponseGolden(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ok := func(extra string) string {
		return `{"access_token":"tok","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"Bearer"` + extra + `}`
	}
	cases := []struct {
		name       string
		status     int
		retryAfter string
		body       string
	}{
		{"ok", 200, "", ok(`,"expires_in":300,"scope":"a b"`)},
		{"ok lowercase bearer", 200, "", `{"access_token":"tok","issued_token_type":"` + TokenTypeJWT + `","token_type":"bearer","expires_in":"60"}`},
		{"ok expiry from jwt", 200, "", `{"access_token":"` + jwtExp600 + `","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"Bearer"}`},
		{"ok no expiry", 200, "", ok(``)},
		{"invalid_grant", 400, "", `{"error":"invalid_grant","error_description":"subject token expired"}`},
		{"invalid_token", 401, "", `{"error":"invalid_token"}`},
		{"invalid_target", 400, "", `{"error":"invalid_target"}`},
		{"invalid_scope", 400, "", `{"error":"invalid_scope"}`},
		{"unauthorized_client", 400, "", `{"error":"unauthorized_client"}`},
		{"access_denied", 403, "", `{"error":"access_denied"}`},
		{"interaction_required", 400, "", `{"error":"interaction_required"}`},
		{"consent_required", 400, "", `{"error":"consent_required"}`},
		{"invalid_client", 401, "", `{"error":"invalid_client"}`},
		{"invalid_request", 400, "", `{"error":"invalid_request","error_description":"bad \"x\"\u0000"}`},
		{"temporarily_unavailable", 400, "120", `{"error":"temporarily_unavailable"}`},
		{"code with a space", 400, "", `{"error":"invalid grant"}`},
		{"500 with error", 500, "", `{"error":"server_error"}`},
		{"503 html", 503, "30", `<html>busy</html>`},
		{"503 retry-after date", 503, "Fri, 15 Jan 2027 08:00:10 GMT", ``},
		{"503 retry-after huge", 503, "86400", ``},
		{"429", 429, "0", ``},
		{"404", 404, "", `not found`},
		{"302", 302, "", ``},
		{"200 not json", 200, "", `access_token=tok`},
		{"200 error", 200, "", `{"error":"invalid_grant"}`},
		{"200 empty object", 200, "", `{}`},
		{"200 null", 200, "", `null`},
		{"token with space", 200, "", `{"access_token":"a b","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"Bearer"}`},
		{"refresh token type", 200, "", `{"access_token":"tok","issued_token_type":"urn:ietf:params:oauth:token-type:refresh_token","token_type":"Bearer"}`},
		{"N_A for access token", 200, "", `{"access_token":"tok","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"N_A"}`},
		{"expires_in object", 200, "", ok(`,"expires_in":{}`)},
		{"expires_in exponent", 200, "", ok(`,"expires_in":3e2`)},
	}
	var out bytes.Buffer
	for _, tc := range cases {
		h := http.Header{}
		if tc.retryAfter != "" {
			h.Set("Retry-After", tc.retryAfter)
		}
		o := parseResponse(tc.status, h, []byte(tc.body), TokenTypeAccessToken, now)
		if o.err == nil {
			exp := "unknown"
			if !o.token.ExpiresAt.IsZero() {
				exp = o.token.ExpiresAt.Sub(now).String()
			}
			fmt.Fprintf(&out, "%-24s token type=%s scope=%q expires_in=%s\n", tc.name, o.token.IssuedTokenType, o.token.Scope, exp)
			continue
		}
		e := o.err
		fmt.Fprintf(&out, "%-24s %s status=%d code=%q retry=%s healthy=%v desc=%q: %s\n", tc.name, e.Kind, e.Status, e.Code, e.RetryAfter, o.healthy, e.Description, e.Error())
	}
	golden.Check(t, filepath.Join("testdata", "responses.golden"), out.Bytes())
}

func TestCacheKeyDistinct(t *testing.T) {
	keys := map[[32]byte]string{}
	add := func(name, subject string, tg Target, session, actor string) {
		k := cacheKey("sts", subject, tg, session, actor)
		if prev, dup := keys[k]; dup {
			t.Errorf("%s and %s share a cache key", name, prev)
		}
		keys[k] = name
	}
	add("base", "tok", Target{Audience: []string{"a"}}, "s", "")
	add("shifted session", "tok", Target{Audience: []string{"a"}}, "", "s")
	add("subject absorbs session", "toks", Target{Audience: []string{"a"}}, "", "")
	add("audience as resource", "tok", Target{Resource: []string{"a"}}, "s", "")
	add("audience as scope", "tok", Target{Scope: "a"}, "s", "")
	add("split audience", "tok", Target{Audience: []string{"", "a"}}, "s", "")
	add("long subject", string(bytes.Repeat([]byte("x"), 100_000)), Target{}, "", "")
	if k := cacheKey("other sts", "tok", Target{Audience: []string{"a"}}, "s", ""); keys[k] != "" {
		t.Errorf("another STS shares the cache key of %s", keys[k])
	}
	if k1, k2 := cacheKey("sts", "tok", Target{Audience: []string{"a"}}, "s", ""), cacheKey("sts", "tok", Target{Audience: []string{"a"}}, "s", ""); k1 != k2 {
		t.Error("cache key is not deterministic")
	}
}
