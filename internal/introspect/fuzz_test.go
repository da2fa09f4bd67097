package introspect

import (
	"testing"
	"time"
)

// FuzzResponse feeds arbitrary answers to the response parser: it never
// panics, and what it accepts is bounded by exp and the cache TTL.
func FuzzResponse(f *testing.F) {
	for _, seed := range []string{
		`{"active":true,"sub":"alice","exp":1800000060,"aud":["a"],"scope":"read"}`,
		`{"active":false}`,
		`{"active":"true"}`,
		`{"active":true,"exp":1e300}`,
		`{"active":true,"aud":[1]}`,
		`{"active":true,"token_type":"refresh_token"}`,
		`[]`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	now := time.Unix(1_800_000_000, 0)
	in, err := New(Config{Name: "x", Endpoint: "https://as.example/i", Issuer: "https://as.example"}, Options{Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := in.document(t.Context(), "application/json", body)
		if err != nil {
			return
		}
		e, err := in.parse(doc)
		if err != nil || e.err != nil {
			return
		}
		c := e.claims
		if !c.ExpiresAt.After(now) || c.ExpiresAt.After(now.Add(DefaultCacheTTL)) || c.IssuerName != "x" || c.Issuer != "https://as.example" {
			t.Fatalf("accepted claims out of bounds: %+v", c)
		}
	})
}
