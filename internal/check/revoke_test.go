package check

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestRevocationOutlivesItsCredentials: a revocation of a user refuses the
// credentials it covers for as long as they are valid, not for
// RevocationTTL only: a token living longer than that, one without iat
// (issued at the epoch, as far as anyone can tell), an API key without
// expiry. A token issued after the revocation is accepted.
func TestRevocationOutlivesItsCredentials(t *testing.T) {
	later := RevocationTTL + time.Minute
	tests := []struct {
		name, issuer, subject string
		// credential is what the revoked user presents; seen says it
		// was accepted before the revocation.
		credential func(f *revokeFixture) string
		seen       bool
		// until is the latest instant, from t0, it is checked at.
		until time.Duration
	}{
		{"a 72h token", "dev", "alice", func(*revokeFixture) string {
			return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "iat": t0.Unix(), "exp": t0.Add(72 * time.Hour).Unix()})
		}, true, 72*time.Hour - time.Minute},
		{"a 72h token first seen after the revocation", "dev", "alice", func(*revokeFixture) string {
			return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "iat": t0.Unix(), "exp": t0.Add(72 * time.Hour).Unix()})
		}, false, 72*time.Hour - time.Minute},
		{"a token without iat", "dev", "alice", func(*revokeFixture) string {
			return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(72 * time.Hour).Unix()})
		}, true, 72*time.Hour - time.Minute},
		{"an API key without expiry", "keys", "billing-agent", func(f *revokeFixture) string { return f.billing }, true, 90 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRevokeFixture(t)
			pl := f.replica(t, nil)
			ctx := t.Context()
			cred := tt.credential(f)
			// Other traffic: one-hour tokens, the lifetime most seen.
			short := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "bob", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
			if v := pl.Check(ctx, bearerReq(short)); v.Outcome != Allowed {
				t.Fatalf("bob: %v %s", v.Outcome, v.Description)
			}
			if tt.seen {
				if v := pl.Check(ctx, bearerReq(cred)); v.Outcome != Allowed {
					t.Fatalf("before the revocation: %v %s", v.Outcome, v.Description)
				}
			}
			user, err := pl.Policy().User(tt.issuer, tt.subject)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pl.RevokeSubject(ctx, user); err != nil {
				t.Fatal(err)
			}
			for _, d := range []time.Duration{time.Second, later, tt.until} {
				f.clock.Set(t0.Add(d))
				// Another revocation prunes the set: it must keep this one.
				if _, err := pl.RevokeSubject(ctx, fmt.Sprint("someone-", d)); err != nil {
					t.Fatal(err)
				}
				if v := pl.Check(ctx, bearerReq(cred)); v.Outcome != InvalidToken {
					t.Errorf("%s after the revocation: %v (%s), want invalid_token", d, v.Outcome, v.Description)
				}
			}
			if tt.issuer == "dev" {
				fresh := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "iat": f.clock.Now().Unix(), "exp": f.clock.Now().Add(time.Hour).Unix()})
				if v := pl.Check(ctx, bearerReq(fresh)); v.Outcome != Allowed {
					t.Errorf("a token issued after the revocation: %v %s", v.Outcome, v.Description)
				}
			}
		})
	}
}

// TestRevocationsBeyondTheBound: past MaxRevocations, the revocations that
// can no longer match a credential the pipeline accepts are dropped, and
// only those: ones younger than the longest token lifetime it accepted are
// kept, and with a credential without iat accepted, every one is.
func TestRevocationsBeyondTheBound(t *testing.T) {
	tests := []struct {
		name     string
		claims   jwt.MapClaims // of the token the pipeline accepted
		wantKept []string
	}{
		{"one-hour tokens", jwt.MapClaims{"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}, []string{"day-old", "new"}},
		{"72h tokens", jwt.MapClaims{"iat": t0.Unix(), "exp": t0.Add(72 * time.Hour).Unix()}, []string{"day-old", "two-days-old", "new"}},
		{"a token without iat", jwt.MapClaims{"exp": t0.Add(time.Hour).Unix()}, []string{"day-old", "two-days-old", "month-old", "new"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRevokeFixture(t)
			pl := f.replica(t, nil)
			claims := jwt.MapClaims{"sub": "bob"}
			for k, v := range tt.claims {
				claims[k] = v
			}
			if v := pl.Check(t.Context(), bearerReq(testtoken.HMAC(t, "HS256", secret, claims))); v.Outcome != Allowed {
				t.Fatalf("token: %v %s", v.Outcome, v.Description)
			}
			revs := make(map[string]time.Time, MaxRevocations)
			for i := range MaxRevocations - 3 {
				revs[fmt.Sprint("filler-", i)] = t0.Add(-23 * time.Hour)
			}
			revs["day-old"] = t0.Add(-23 * time.Hour)
			revs["two-days-old"] = t0.Add(-47 * time.Hour)
			revs["month-old"] = t0.Add(-30 * 24 * time.Hour)
			pl.state.revokeAllLocal(revs)
			if n := len(*pl.state.revoked.Load()); n != MaxRevocations {
				t.Fatalf("held %d at the bound, want all %d", n, MaxRevocations)
			}
			if _, err := pl.RevokeSubject(t.Context(), "new"); err != nil {
				t.Fatal(err)
			}
			held := *pl.state.revoked.Load()
			for _, sub := range []string{"day-old", "two-days-old", "month-old", "new"} {
				_, ok := held[sub]
				if want := contains(tt.wantKept, sub); ok != want {
					t.Errorf("revocation %s held: %v, want %v", sub, ok, want)
				}
			}
		})
	}
}

// TestRevocationSurvivesARestartWithRedis: a replica started more than
// RevocationTTL after a revocation still reads it from the shared tier and
// refuses the long-lived token it covers.
func TestRevocationSurvivesARestartWithRedis(t *testing.T) {
	srv := redistest.Start(t)
	f := newRevokeFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	store := func() *shared.Store { return f.store(t, ctx, srv.Addr) }
	tok := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "iat": t0.Unix(), "exp": t0.Add(72 * time.Hour).Unix()})
	a := f.replica(t, store())
	if v := a.Check(ctx, bearerReq(tok)); v.Outcome != Allowed {
		t.Fatalf("before: %v %s", v.Outcome, v.Description)
	}
	user, err := a.Policy().User("dev", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeSubject(ctx, user); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(RevocationTTL + time.Minute)
	if _, err := a.RevokeSubject(ctx, "someone-else"); err != nil { // writes the set again
		t.Fatal(err)
	}
	b := f.unloadedReplica(t, store())
	mustLoad(t, b) // what a replica does as it starts
	if v := b.Check(ctx, bearerReq(tok)); v.Outcome != InvalidToken {
		t.Errorf("a replica started %s after the revocation: %v (%s), want invalid_token", RevocationTTL+time.Minute, v.Outcome, v.Description)
	}
}
