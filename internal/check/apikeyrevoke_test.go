package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// revokeFixture has two API-key issuers that both hold a key with the id
// "billing", and a JWT issuer.
type revokeFixture struct {
	clock                     *clock
	cfg                       *config.File
	billing, backup, billing2 string
}

// store is a shared tier on the redis-server at addr, on the fixture's
// clock, closed when the test ends.
func (f *revokeFixture) store(t testing.TB, ctx context.Context, addr string) *shared.Store {
	t.Helper()
	st, err := shared.New(ctx, shared.Config{Addrs: []string{addr}, OpTimeout: time.Second}, shared.Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newRevokeFixture(t testing.TB) *revokeFixture {
	t.Helper()
	f := &revokeFixture{clock: newClock(), billing: mustGenerate(t), backup: mustGenerate(t), billing2: mustGenerate(t)}
	dir := t.TempDir()
	keys, keys2 := filepath.Join(dir, "keys.yaml"), filepath.Join(dir, "keys2.yaml")
	doc := fmt.Sprintf("keys:\n  - {id: billing, subject: billing-agent, hash: %s}\n  - {id: backup, subject: backup-agent, hash: %s, expires: %s}\n",
		apikey.SHA256Hash(f.billing), apikey.SHA256Hash(f.backup), t0.Add(48*time.Hour).Format(time.RFC3339))
	doc2 := fmt.Sprintf("keys:\n  - {id: billing, subject: other-agent, hash: %s}\n", apikey.SHA256Hash(f.billing2))
	for path, d := range map[string]string{keys: doc, keys2: doc2} {
		if err := os.WriteFile(path, []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `
issuers:
  - {name: dev, algorithms: [HS256], secret: %s}
  - {name: keys, api_keys: {file: %s, header: x-api-key}}
  - {name: keys2, api_keys: {file: %s}}
routes:
  - {name: tools, default: true, issuers: [dev, keys, keys2]}
`, secret, keys, keys2))
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = cfg
	return f
}

// replica compiles the configuration as the service does (one revocation
// set across reloads) and builds a pipeline on it, sharing st (nil: none),
// with the shared tier's revocations read, as the service reads them
// before it is ready.
func (f *revokeFixture) replica(t testing.TB, st *shared.Store) *Pipeline {
	t.Helper()
	pl := f.unloadedReplica(t, st)
	if st != nil {
		mustLoad(t, pl)
	}
	return pl
}

// unloadedReplica is replica before it read the shared tier's
// revocations: a replica just started.
func (f *revokeFixture) unloadedReplica(t testing.TB, st *shared.Store) *Pipeline {
	t.Helper()
	p, err := Compile(t.Context(), f.cfg, Deps{Now: f.clock.Now, APIKeyRevocations: apikey.NewRevocations(f.clock.Now)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pl, err := New(p, Options{Now: f.clock.Now, Shared: st})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func bearerReq(tok string) *Request {
	return hostReq("tools.example.com", Headers{"authorization": "Bearer " + tok})
}

func TestRevokeAPIKey(t *testing.T) {
	f := newRevokeFixture(t)
	pl := f.replica(t, nil)
	ctx := t.Context()
	jwtBilling := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "billing-agent", "jti": "billing", "client_id": "billing", "exp": t0.Add(time.Hour).Unix()})
	for _, tok := range []string{f.billing, f.billing2, f.backup, jwtBilling} {
		if v := pl.Check(ctx, bearerReq(tok)); v.Outcome != Allowed {
			t.Fatalf("before revoking: %v %s", v.Outcome, v.Description)
		}
	}

	for _, bad := range []struct{ name, issuer, id string }{
		{"a JWT issuer", "dev", "billing"},
		{"an issuer that is not configured", "nobody", "billing"},
		{"an id with a leading space", "keys", " billing"},
		{"an id with a trailing newline", "keys", "billing\n"},
		{"an empty id", "keys", ""},
	} {
		t.Run("refused: "+bad.name, func(t *testing.T) {
			if _, err := pl.RevokeAPIKey(ctx, bad.issuer, bad.id); err == nil {
				t.Fatal("RevokeAPIKey accepted it")
			}
			if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != Allowed {
				t.Fatalf("a refused revocation revoked: %v %s", v.Outcome, v.Description)
			}
		})
	}

	r, err := pl.RevokeAPIKey(ctx, "keys", "billing")
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdicts != 1 || !r.Known || !r.Until.Equal(t0.Add(apikey.RevocationTTL)) {
		t.Fatalf("RevokeAPIKey = %+v, want 1 verdict dropped, known, until %v", r, t0.Add(apikey.RevocationTTL))
	}
	if r, err := pl.RevokeAPIKey(ctx, "keys", "backup"); err != nil || !r.Until.Equal(t0.Add(48*time.Hour)) {
		t.Fatalf("RevokeAPIKey(backup) = %+v, %v; want until the key expires", r, err)
	}
	if r, err := pl.RevokeAPIKey(ctx, "keys", "not-in-the-file"); err != nil || r.Known {
		t.Fatalf("RevokeAPIKey(unknown id) = %+v, %v; want revoked, not known", r, err)
	}

	// What an attacker holding the revoked key might send instead.
	upper := f.billing[:len(apikey.Prefix)] + strings.ToUpper(f.billing[len(apikey.Prefix):])
	tests := []struct {
		name string
		req  *Request
		want Outcome
	}{
		{"the revoked key", bearerReq(f.billing), InvalidToken},
		{"the revoked key again", bearerReq(f.billing), InvalidToken},
		{"the revoked key in its header", hostReq("tools.example.com", Headers{"x-api-key": f.billing}), InvalidToken},
		{"the revoked key in its header with spaces", hostReq("tools.example.com", Headers{"x-api-key": "  " + f.billing + " \t"}), InvalidToken},
		{"the revoked key with trailing spaces", bearerReq(f.billing + "  "), InvalidToken},
		{"the revoked key with a lower-case scheme and extra spaces", hostReq("tools.example.com", Headers{"authorization": "bearer   " + f.billing}), InvalidToken},
		{"the revoked key upper-cased", bearerReq(upper), InvalidToken},
		{"the revoked key's prefix upper-cased", bearerReq("EK_" + f.billing[len(apikey.Prefix):]), InvalidToken},
		{"another revoked key", bearerReq(f.backup), InvalidToken},
		{"the same id at another issuer", bearerReq(f.billing2), Allowed},
		{"a JWT whose jti and client_id are the id", bearerReq(jwtBilling), Allowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := pl.Check(ctx, tt.req)
			if v.Outcome != tt.want {
				t.Fatalf("outcome = %v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
			if strings.Contains(v.Description, f.billing[len(apikey.Prefix):]) {
				t.Fatalf("the key is in the description: %q", v.Description)
			}
		})
	}
	if v := pl.Check(ctx, bearerReq(f.billing)); !strings.Contains(v.Description, "API key is revoked") {
		t.Errorf("description = %q, want it to say the key is revoked", v.Description)
	}

	// A revocation outlives a reload, even one whose key stores were given
	// a revocation set of their own: the pipeline checks every grant.
	next, err := Compile(ctx, f.cfg, Deps{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	swap(t, pl, next) // the old policy is closed at cleanup
	t.Cleanup(next.Close)
	if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != InvalidToken {
		t.Errorf("after a reload: %v %s", v.Outcome, v.Description)
	}
	f.clock.Advance(apikey.RevocationTTL - time.Minute)
	if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != InvalidToken {
		t.Errorf("a minute before the revocation ends: %v", v.Outcome)
	}
	f.clock.Advance(2 * time.Minute)
	if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != Allowed {
		t.Errorf("after the revocation ended: %v %s", v.Outcome, v.Description)
	}
}

// TestRevokedAPIKeyOnACacheHit: a grant cached before the revocation (a
// verification racing with it) is refused on its next hit.
func TestRevokedAPIKeyOnACacheHit(t *testing.T) {
	f := newRevokeFixture(t)
	pl := f.replica(t, nil)
	ctx := t.Context()
	if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != Allowed {
		t.Fatalf("before: %v %s", v.Outcome, v.Description)
	}
	if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != Allowed || !v.CacheHit {
		t.Fatalf("second check: %v, cache hit %v; want an allowed hit", v.Outcome, v.CacheHit)
	}
	// Revoked without dropping the cached grant.
	pl.state.apiKeys.Revoke(apikey.Ref{Issuer: "keys", ID: "billing"}, t0.Add(time.Hour))
	v := pl.Check(ctx, bearerReq(f.billing))
	if v.Outcome != InvalidToken || !v.CacheHit {
		t.Fatalf("after: %v (%s), cache hit %v; want invalid_token on a hit", v.Outcome, v.Description, v.CacheHit)
	}
}

// TestRevokeAPIKeyAcrossReplicas: two pipelines on one redis-server. A
// revocation on one is refused on the other; one the other missed (its
// subscription was down) is caught up when it subscribes again.
func TestRevokeAPIKeyAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	f := newRevokeFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	store := func() *shared.Store { return f.store(t, ctx, srv.Addr) }
	stA, stB := store(), store()
	a, b := f.replica(t, stA), f.replica(t, stB)
	events := make(chan string, 16)
	go stB.Subscribe(ctx, func(ev shared.Event) {
		b.HandleEvent(ctx, ev)
		events <- ev.Kind
	})
	await := func(kind string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case k := <-events:
				if k == kind {
					return
				}
			case <-timeout:
				t.Fatalf("replica b never handled a %s event", kind)
			}
		}
	}
	await(shared.EventResync)

	for _, pl := range []*Pipeline{a, b, b} { // b's second check is a cache hit
		if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != Allowed {
			t.Fatalf("before: %v %s", v.Outcome, v.Description)
		}
	}
	if _, err := a.RevokeAPIKey(ctx, "keys", "billing"); err != nil {
		t.Fatal(err)
	}
	await(shared.EventRevokeAPIKey)
	for name, pl := range map[string]*Pipeline{"a": a, "b": b} {
		if v := pl.Check(ctx, bearerReq(f.billing)); v.Outcome != InvalidToken {
			t.Errorf("replica %s after the revocation: %v %s", name, v.Outcome, v.Description)
		}
	}
	if v := b.Check(ctx, bearerReq(f.billing2)); v.Outcome != Allowed {
		t.Errorf("replica b, the same id at another issuer: %v %s", v.Outcome, v.Description)
	}

	// A revocation whose event b never hears: stored, not published (as if
	// published while b's connection was down). Then b's subscription is
	// cut; it reconnects and resyncs.
	if v := b.Check(ctx, bearerReq(f.backup)); v.Outcome != Allowed {
		t.Fatalf("backup before: %v %s", v.Outcome, v.Description)
	}
	if err := stA.RevokeAPIKey(ctx, shared.APIKey{Issuer: "keys", ID: "backup"}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if v := b.Check(ctx, bearerReq(f.backup)); v.Outcome != Allowed {
		t.Fatalf("b heard of a revocation nobody published: %v", v.Outcome)
	}
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	if err := raw.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	await(shared.EventResync)
	if v := b.Check(ctx, bearerReq(f.backup)); v.Outcome != InvalidToken {
		t.Errorf("replica b after the resync: %v %s", v.Outcome, v.Description)
	}
}

// TestResyncRetriesUntilRedisAnswers: a replica that comes back to the bus
// catches up with the revocations made meanwhile even when Redis does not
// answer its first reads (a restarted or failing-over server, a moment of
// overload): the catch-up is retried until it succeeds, never skipped,
// which would leave the revoked user and key accepted here until they
// expire.
func TestResyncRetriesUntilRedisAnswers(t *testing.T) {
	srv := redistest.Start(t)
	f := newRevokeFixture(t)
	ctx := t.Context()
	store := func() *shared.Store {
		st, err := shared.New(ctx, shared.Config{Addrs: []string{srv.Addr}, OpTimeout: 50 * time.Millisecond}, shared.Options{Now: f.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	stA, stB := store(), store()
	b := f.replica(t, stB)
	alice := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "iat": t0.Add(-time.Minute).Unix(), "exp": t0.Add(time.Hour).Unix()})
	user, err := b.Policy().User("dev", "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{alice, f.backup} {
		if v := b.Check(ctx, bearerReq(tok)); v.Outcome != Allowed {
			t.Fatalf("before: %v %s", v.Outcome, v.Description)
		}
	}
	// Revocations made through another replica while b was not listening.
	if err := stA.Revoke(ctx, user, t0, 0); err != nil {
		t.Fatal(err)
	}
	if err := stA.RevokeAPIKey(ctx, shared.APIKey{Issuer: "keys", ID: "backup"}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	// b resubscribes while Redis answers no command for a moment.
	const pause = 400 * time.Millisecond
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	if err := raw.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now().Add(pause)
	b.HandleEvent(ctx, shared.Event{Kind: shared.EventResync})
	time.Sleep(time.Until(resumed.Add(100 * time.Millisecond))) // Redis answers again
	for name, tok := range map[string]string{"alice's token": alice, "the backup key": f.backup} {
		if v := b.Check(ctx, bearerReq(tok)); v.Outcome != InvalidToken {
			t.Errorf("%s, revoked while b was away, once Redis answers: %v %s", name, v.Outcome, v.Description)
		}
	}
}

// BenchmarkCheckAPIKeyRevocations: a cached API-key check with no key
// revoked and with 1,000 other keys revoked (the revocation check's cost on
// the hot path).
func BenchmarkCheckAPIKeyRevocations(b *testing.B) {
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprint("revoked=", n), func(b *testing.B) {
			f := newRevokeFixture(b)
			pl := f.replica(b, nil)
			for i := range n {
				pl.state.apiKeys.Revoke(apikey.Ref{Issuer: "keys", ID: fmt.Sprint("other-", i)}, t0.Add(time.Hour))
			}
			req := bearerReq(f.billing)
			ctx := context.Background()
			if v := pl.Check(ctx, req); v.Outcome != Allowed {
				b.Fatalf("%v %s", v.Outcome, v.Description)
			}
			b.ReportAllocs()
			for b.Loop() {
				if v := pl.Check(ctx, req); v.Outcome != Allowed {
					b.Fatal(v.Outcome)
				}
			}
		})
	}
}
