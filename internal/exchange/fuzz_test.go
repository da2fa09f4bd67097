package exchange

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzParseResponse feeds arbitrary STS answers to the response reader: it
// must not panic, a token it accepts must be safe to put in a header, and
// an error it returns must carry only bounded, RFC 6749-clean STS text.
func FuzzParseResponse(f *testing.F) {
	f.Add(200, "", `{"access_token":"tok","issued_token_type":"`+TokenTypeAccessToken+`","token_type":"Bearer","expires_in":300}`)
	f.Add(200, "", `{"access_token":"`+jwtExp600+`","issued_token_type":"`+TokenTypeJWT+`","token_type":"N_A","expires_in":"60"}`)
	f.Add(400, "", `{"error":"invalid_grant","error_description":"expired"}`)
	f.Add(503, "17", `{"error":"temporarily_unavailable"}`)
	f.Add(429, "Fri, 15 Jan 2027 08:00:10 GMT", ``)
	f.Add(200, "", `{"access_token":"a\u0000b","issued_token_type":"x","token_type":"Bearer","expires_in":1e400}`)
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, status int, retryAfter, body string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		o := parseResponse(status, h, []byte(body), TokenTypeJWT, now)
		if o.err == nil {
			tok := o.token
			if status != 200 || tok.Value == "" || !headerSafe(tok.Value) || len(tok.Value) > maxTokenSize {
				t.Fatalf("accepted token %q with status %d", tok.Value, status)
			}
			if tok.Authorization != "Bearer "+tok.Value {
				t.Fatalf("Authorization = %q", tok.Authorization)
			}
			if tok.IssuedTokenType != TokenTypeAccessToken && tok.IssuedTokenType != TokenTypeJWT {
				t.Fatalf("accepted issued_token_type %q", tok.IssuedTokenType)
			}
			return
		}
		e := o.err
		if e.Kind < Unavailable || e.Kind > InteractionRequired {
			t.Fatalf("kind %d", e.Kind)
		}
		if cleanCode(e.Code) != e.Code || len(e.Description) > maxDescriptionLen || cleanDescription(e.Description) != e.Description {
			t.Fatalf("unclean error fields %q %q", e.Code, e.Description)
		}
		if e.RetryAfter != 0 && (e.RetryAfter < minRetryAfter || e.RetryAfter > maxRetryAfter) {
			t.Fatalf("RetryAfter %v out of bounds", e.RetryAfter)
		}
		if msg := e.Error(); strings.ContainsAny(msg, "\r\n\"") {
			t.Fatalf("error text %q", msg)
		}
	})
}

// FuzzParseExpiresIn: whatever expires_in holds, the lifetime is unknown,
// or a whole number of seconds within ten years.
func FuzzParseExpiresIn(f *testing.F) {
	for _, s := range []string{"300", `"300"`, "null", "", "-1", "1.5", "3e2", `"x"`, "1e400", "{}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, ok := parseExpiresIn([]byte(raw))
		if !ok {
			return
		}
		if d != -1 && (d < 0 || d%time.Second != 0 || d > 10*365*24*time.Hour) {
			t.Fatalf("parseExpiresIn(%q) = %v", raw, d)
		}
	})
}
