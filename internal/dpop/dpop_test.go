package dpop

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const accessToken = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"

// fixture is a client's key, another key and a clock.
type fixture struct {
	key, other testtoken.Key
	now        time.Time
}

func newFixture(t *testing.T) *fixture {
	return &fixture{key: testtoken.EC(t, ""), other: testtoken.EC(t, ""), now: time.Unix(1_900_000_000, 0)}
}

// claims are a valid proof's claims for a POST to https://mcp.example.com/mcp.
func (f *fixture) claims(jti string) jwt.MapClaims {
	return jwt.MapClaims{"jti": jti, "htm": "POST", "htu": "https://mcp.example.com/mcp", "iat": f.now.Unix(), "ath": AccessTokenHash(accessToken)}
}

func (f *fixture) request(t *testing.T, proof string) Request {
	return Request{Proof: proof, Method: "POST", Scheme: "https", Host: "mcp.example.com", Path: "/mcp?x=1",
		AccessToken: accessToken, Thumbprint: f.key.Thumbprint(t)}
}

func TestCheck(t *testing.T) {
	f := newFixture(t)
	rsaKey, edKey := testtoken.RSA(t, ""), testtoken.Ed(t, "")
	n := 0
	with := func(name string, v any) jwt.MapClaims {
		n++ // each proof its own jti: a replay is not what these cases try
		c := f.claims(fmt.Sprintf("id-%s-%d", name, n))
		if v == nil {
			delete(c, name)
		} else {
			c[name] = v
		}
		return c
	}
	tests := []struct {
		name  string
		proof func() string
		req   func(r *Request)
		want  error
		// reason, when set, is in the error: the case fails for what it tries.
		reason string
	}{
		{name: "ES256 proof of the bound key", proof: func() string { return f.key.Proof(t, nil, f.claims("a")) }},
		{name: "RS256 proof", proof: func() string { return rsaKey.Proof(t, nil, f.claims("b")) }, req: func(r *Request) { r.Thumbprint = rsaKey.Thumbprint(t) }},
		{name: "EdDSA proof", proof: func() string { return edKey.Proof(t, nil, f.claims("c")) }, req: func(r *Request) { r.Thumbprint = edKey.Thumbprint(t) }},
		{name: "typ with the application/ prefix", proof: func() string { return f.key.Proof(t, map[string]any{"typ": "application/dpop+jwt"}, f.claims("d")) }},
		{name: "no proof", proof: func() string { return "" }, want: ErrMissing},
		{name: "two proofs joined by the proxy", proof: func() string {
			return f.key.Proof(t, nil, f.claims("e")) + "," + f.key.Proof(t, nil, f.claims("f"))
		}, want: ErrMultiple},
		{name: "not a JWT", proof: func() string { return "not-a-jwt" }, want: ErrInvalid},
		{name: "the access token as its own proof", proof: func() string { return accessToken }, want: ErrInvalid},
		{name: "typ of an access token", proof: func() string { return f.key.Proof(t, map[string]any{"typ": "at+jwt"}, f.claims("g")) }, want: ErrInvalid, reason: "type"},
		{name: "no typ", proof: func() string { return f.key.Proof(t, map[string]any{"typ": nil}, f.claims("h")) }, want: ErrInvalid, reason: "type"},
		{name: "no jwk", proof: func() string { return f.key.Proof(t, map[string]any{"jwk": nil}, f.claims("i")) }, want: ErrInvalid, reason: "proof key"},
		{name: "jwk of another key than signed it", proof: func() string {
			return f.other.Proof(t, map[string]any{"jwk": f.key.PublicJWK(t)}, f.claims("j"))
		}, want: ErrInvalid, reason: "signature is invalid"},
		{name: "jwk with its private part", proof: func() string {
			jwk := f.key.PublicJWK(t)
			jwk["d"] = "AAAA"
			return f.key.Proof(t, map[string]any{"jwk": jwk}, f.claims("k"))
		}, want: ErrInvalid, reason: "proof key"},
		{name: "HMAC proof with a symmetric jwk", proof: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, f.claims("l"))
			tok.Header["typ"] = "dpop+jwt"
			tok.Header["jwk"] = map[string]any{"kty": "oct", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI"}
			s, err := tok.SignedString([]byte("secretsecretsecretsecretsecret12"))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, want: ErrInvalid, reason: "algorithm"},
		{name: "alg none", proof: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodNone, f.claims("m"))
			tok.Header["typ"] = "dpop+jwt"
			tok.Header["jwk"] = f.key.PublicJWK(t)
			s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}, want: ErrInvalid, reason: "algorithm"},
		{name: "a critical header extension", proof: func() string { return f.key.Proof(t, map[string]any{"crit": []string{"x"}, "x": 1}, f.claims("n")) }, want: ErrInvalid, reason: "malformed"},
		{name: "another key than the token is bound to", proof: func() string { return f.other.Proof(t, nil, f.claims("o")) }, want: ErrKeyMismatch},
		{name: "htm of another method", proof: func() string { return f.key.Proof(t, nil, with("htm", "GET")) }, want: ErrInvalid},
		{name: "htm in lower case", proof: func() string { return f.key.Proof(t, nil, with("htm", "post")) }, want: ErrInvalid},
		{name: "no htm", proof: func() string { return f.key.Proof(t, nil, with("htm", nil)) }, want: ErrInvalid},
		{name: "htu of another host", proof: func() string { return f.key.Proof(t, nil, with("htu", "https://evil.example.com/mcp")) }, want: ErrInvalid},
		{name: "htu of another path", proof: func() string { return f.key.Proof(t, nil, with("htu", "https://mcp.example.com/admin")) }, want: ErrInvalid},
		{name: "htu over http", proof: func() string { return f.key.Proof(t, nil, with("htu", "http://mcp.example.com/mcp")) }, want: ErrInvalid},
		{name: "htu with userinfo", proof: func() string { return f.key.Proof(t, nil, with("htu", "https://u@mcp.example.com/mcp")) }, want: ErrInvalid},
		{name: "htu with a query", proof: func() string { return f.key.Proof(t, nil, with("htu", "https://mcp.example.com/mcp?y=2")) }},
		{name: "htu spelled otherwise", proof: func() string { return f.key.Proof(t, nil, with("htu", "HTTPS://MCP.Example.com:443/mcp")) }},
		{name: "htu of the path spelled with escapes", proof: func() string { return f.key.Proof(t, nil, with("htu", "https://mcp.example.com/%6Dcp")) }, want: ErrInvalid},
		{name: "no htu", proof: func() string { return f.key.Proof(t, nil, with("htu", nil)) }, want: ErrInvalid},
		{name: "iat too old", proof: func() string { return f.key.Proof(t, nil, with("iat", f.now.Add(-DefaultMaxAge-time.Second).Unix())) }, want: ErrInvalid},
		{name: "iat in the future", proof: func() string { return f.key.Proof(t, nil, with("iat", f.now.Add(DefaultLeeway+time.Second).Unix())) }, want: ErrInvalid},
		{name: "iat within the leeway", proof: func() string { return f.key.Proof(t, nil, with("iat", f.now.Add(DefaultLeeway).Unix())) }},
		{name: "iat a string", proof: func() string { return f.key.Proof(t, nil, with("iat", "1900000000")) }, want: ErrInvalid, reason: "malformed"},
		{name: "no iat", proof: func() string { return f.key.Proof(t, nil, with("iat", nil)) }, want: ErrInvalid},
		{name: "ath of another token", proof: func() string { return f.key.Proof(t, nil, with("ath", AccessTokenHash("other"))) }, want: ErrInvalid},
		{name: "no ath", proof: func() string { return f.key.Proof(t, nil, with("ath", nil)) }, want: ErrInvalid},
		{name: "no jti", proof: func() string { return f.key.Proof(t, nil, with("jti", nil)) }, want: ErrInvalid},
		{name: "jti too long", proof: func() string { return f.key.Proof(t, nil, with("jti", strings.Repeat("x", maxJTI+1))) }, want: ErrInvalid},
		{name: "a claim named twice", proof: func() string {
			p := f.key.Proof(t, nil, with("htm", "GET"))
			parts := strings.Split(p, ".")
			return parts[0] + "." + b64(`{"htm":"POST","htm":"GET"}`) + "." + parts[2]
		}, want: ErrInvalid, reason: "malformed"},
		// A proof is read as every parser reads it, or refused: this jti is
		// "a\ufffd" to Go and a lone surrogate to JavaScript.
		{name: "a lone surrogate escaped in the jti", proof: func() string {
			parts := strings.Split(f.key.Proof(t, nil, f.claims("p")), ".")
			return parts[0] + "." + b64(`{"htm":"POST","jti":"a\ud800"}`) + "." + parts[2]
		}, want: ErrInvalid, reason: "malformed"},
	}
	c := New(Options{Now: func() time.Time { return f.now }})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.request(t, tc.proof())
			if tc.req != nil {
				tc.req(&r)
			}
			err := c.Check(context.Background(), Window{}, r)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Check() = %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Check() = %v, want it to say %q", err, tc.reason)
			}
		})
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func TestReplay(t *testing.T) {
	f := newFixture(t)
	now := f.now
	c := New(Options{Now: func() time.Time { return now }})
	proof := f.key.Proof(t, nil, f.claims("once"))
	if err := c.Check(context.Background(), Window{}, f.request(t, proof)); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if err := c.Check(context.Background(), Window{}, f.request(t, proof)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second use = %v, want ErrReplayed", err)
	}
	// Another key may pick the same jti.
	r := f.request(t, f.other.Proof(t, nil, f.claims("once")))
	r.Thumbprint = f.other.Thumbprint(t)
	if err := c.Check(context.Background(), Window{}, r); err != nil {
		t.Fatalf("same jti, another key: %v", err)
	}
	// Once too old to be accepted, it is refused for its age, not replay.
	now = now.Add(DefaultMaxAge + DefaultLeeway + time.Second)
	if err := c.Check(context.Background(), Window{}, f.request(t, proof)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("after max_age = %v, want ErrInvalid", err)
	}
}

func TestReplaySetFull(t *testing.T) {
	f := newFixture(t)
	now := f.now
	c := New(Options{Now: func() time.Time { return now }, ReplayEntries: 2})
	check := func(jti string) error {
		r := f.request(t, f.key.Proof(t, nil, f.claims(jti)))
		r.Owner = "owner " + jti // each within its share (TestReplaySetOneOwnerCannotFillIt)
		return c.Check(context.Background(), Window{}, r)
	}
	for _, jti := range []string{"1", "2"} {
		if err := check(jti); err != nil {
			t.Fatal(err)
		}
	}
	// Forgetting "1" or "2" would let it be replayed: a third waits.
	if err := check("3"); !errors.Is(err, ErrFull) {
		t.Fatalf("third = %v, want ErrFull", err)
	}
	now = now.Add(DefaultMaxAge + DefaultLeeway + time.Second)
	f.now = now
	if err := check("4"); err != nil {
		t.Fatalf("after the others expired: %v", err)
	}
}

type fakeShared struct {
	first bool
	err   error
	keys  int
}

func (s *fakeShared) FirstUse(_ context.Context, _ [32]byte, ttl time.Duration) (bool, error) {
	s.keys++
	if ttl <= 0 {
		return false, errors.New("ttl must be positive")
	}
	return s.first, s.err
}

func TestSharedReplay(t *testing.T) {
	tests := []struct {
		name     string
		shared   fakeShared
		failOpen bool
		want     error
	}{
		{name: "first use on every replica", shared: fakeShared{first: true}},
		{name: "used on another replica", shared: fakeShared{first: false}, want: ErrReplayed},
		{name: "redis down fails closed", shared: fakeShared{err: errors.New("down")}, want: ErrUnavailable},
		{name: "redis down with fail_open checks this replica only", shared: fakeShared{err: errors.New("down")}, failOpen: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c := New(Options{Now: func() time.Time { return f.now }, Shared: &tc.shared, SharedFailOpen: tc.failOpen})
			err := c.Check(context.Background(), Window{}, f.request(t, f.key.Proof(t, nil, f.claims(string(rune('a'+i))))))
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Check() = %v, want %v", err, tc.want)
			}
			if tc.shared.keys != 1 {
				t.Fatalf("asked the shared tier %d times, want 1", tc.shared.keys)
			}
		})
	}
}

// TestReplayAfterWindowRaised: a reload that raises max_age must not bring
// back proofs that were remembered only as long as the old window accepted
// them. Each step checks at an offset from the first proof's iat with the
// window then in force; a proof issued after the raise gets the new one.
func TestReplayAfterWindowRaised(t *testing.T) {
	short, long := Window{MaxAge: time.Minute}, Window{MaxAge: 10 * time.Minute}
	type step struct {
		at     time.Duration // after f.now
		w      Window
		jti    string
		issued time.Duration // the proof's iat, after f.now
		ok     bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "raised after the record expired", steps: []step{
			{at: 0, w: short, jti: "a", ok: true},
			{at: 70 * time.Second, w: long, jti: "a"},
		}},
		{name: "raised while the record lives, replayed after it expired", steps: []step{
			{at: 0, w: short, jti: "a", ok: true},
			{at: 30 * time.Second, w: long, jti: "b", issued: 30 * time.Second, ok: true},
			{at: 90 * time.Second, w: long, jti: "a"},
		}},
		{name: "lowered, then raised", steps: []step{
			{at: 0, w: long, jti: "x", ok: true},
			{at: time.Second, w: short, jti: "a", issued: time.Second, ok: true},
			{at: 2 * time.Second, w: long, jti: "y", issued: 2 * time.Second, ok: true},
			{at: 80 * time.Second, w: long, jti: "a"},
		}},
		{name: "a proof issued after the raise has the new window", steps: []step{
			{at: 0, w: short, jti: "a", ok: true},
			{at: 10 * time.Second, w: long, jti: "b", issued: 10 * time.Second, ok: true},
			{at: 20 * time.Second, w: long, jti: "c", issued: 20 * time.Second, ok: true},
			{at: 5 * time.Minute, w: long, jti: "c"},
			{at: 5 * time.Minute, w: long, jti: "d", issued: 30 * time.Second, ok: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			now := f.now
			c := New(Options{Now: func() time.Time { return now }})
			for i, s := range tc.steps {
				now = f.now.Add(s.at)
				cl := f.claims(s.jti)
				cl["iat"] = f.now.Add(s.issued).Unix()
				err := c.Check(context.Background(), s.w, f.request(t, f.key.Proof(t, nil, cl)))
				if (err == nil) != s.ok {
					t.Fatalf("step %d (jti %q at +%s, max_age %s): %v, want accepted %v", i, s.jti, s.at, s.w.MaxAge, err, s.ok)
				}
			}
		})
	}
}

// TestUnavailableTellsNoInternals: a check's error is shown to the client
// (its text is the denial's description), so a broken Redis tier is named,
// never described: its error holds addresses and server messages.
func TestUnavailableTellsNoInternals(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{name: "dial error", err: errors.New("shared: redis unavailable: first_use: dial tcp 10.20.30.40:6379: connect: connection refused")},
		{name: "server error", err: errors.New("READONLY You can't write against a read only replica.")},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c := New(Options{Now: func() time.Time { return f.now }, Shared: &fakeShared{err: tc.err}})
			err := c.Check(context.Background(), Window{}, f.request(t, f.key.Proof(t, nil, f.claims(fmt.Sprint("u", i)))))
			if !errors.Is(err, ErrUnavailable) || err.Error() != ErrUnavailable.Error() {
				t.Fatalf("Check() = %q, want %q alone", err, ErrUnavailable)
			}
		})
	}
}

// TestReplaySetOneOwnerCannotFillIt: the replay set is shared by every
// client of a replica, and refuses new proofs once full. One user who
// sends proofs fast enough (a valid token and a key are all it takes) must
// not fill it for everyone: each owner holds at most its share, and the
// others' proofs still find room.
func TestReplaySetOneOwnerCannotFillIt(t *testing.T) {
	const entries = 4 * ownerShare
	share := entries / ownerShare
	type use struct {
		owner string
		key   *testtoken.Key
		n     int // proofs, each with a new jti
		want  error
	}
	f := newFixture(t)
	tests := []struct {
		name string
		uses []use
	}{
		{name: "a flood stops at the owner's share", uses: []use{
			{owner: "mallory", n: share},
			{owner: "mallory", n: 1, want: ErrTooMany},
			{owner: "alice", n: 1},
		}},
		{name: "another key of the same owner counts against the same share", uses: []use{
			{owner: "mallory", n: share},
			{owner: "mallory", key: &f.other, n: 1, want: ErrTooMany},
		}},
		{name: "owners that fill the set get ErrFull", uses: func() []use {
			var uses []use
			for i := range ownerShare {
				uses = append(uses, use{owner: fmt.Sprint("owner ", i), n: share})
			}
			return append(uses, use{owner: "one more", n: 1, want: ErrFull})
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := f.now
			c := New(Options{Now: func() time.Time { return now }, ReplayEntries: entries})
			jti := 0
			for _, u := range tc.uses {
				key := f.key
				if u.key != nil {
					key = *u.key
				}
				for range u.n {
					jti++
					r := f.request(t, key.Proof(t, nil, f.claims(fmt.Sprint(jti))))
					r.Owner, r.Thumbprint = u.owner, key.Thumbprint(t)
					if err := c.Check(context.Background(), Window{}, r); !errors.Is(err, u.want) || (u.want == nil) != (err == nil) {
						t.Fatalf("proof %d of %s: %v, want %v", jti, u.owner, err, u.want)
					}
				}
			}
			// Once the proofs age out, the owner has its share back.
			now = now.Add(DefaultMaxAge + DefaultLeeway + time.Second)
			f := *f
			f.now = now
			r := f.request(t, f.key.Proof(t, nil, f.claims("later")))
			r.Owner = tc.uses[0].owner
			if err := c.Check(context.Background(), Window{}, r); err != nil {
				t.Fatalf("after the proofs expired: %v", err)
			}
		})
	}
}
