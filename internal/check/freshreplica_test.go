package check

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestReplicaStartedWithoutRedisWaitsForRevocations: a replica started
// while Redis is down has not read the revocations other replicas made,
// so it admits no identified caller (503, on a cached grant too) until it
// has; a request without a credential is refused as before. Once Redis is
// back it refuses the revoked user and key and admits the others, without
// the bus having to tell it.
func TestReplicaStartedWithoutRedisWaitsForRevocations(t *testing.T) {
	srv := redistest.StartPersistent(t)
	f := newRevokeFixture(t)
	ctx := t.Context()
	mint := func(sub string) string {
		return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": sub, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	}
	a := f.replica(t, f.store(t, ctx, srv.Addr))
	alice, err := a.Policy().User("dev", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeSubject(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RevokeAPIKey(ctx, "keys", "billing"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()

	b := f.unloadedReplica(t, f.store(t, ctx, srv.Addr))
	tests := []struct {
		name        string
		req         *Request
		before      Outcome // while the revocations are not read
		after       Outcome // once they are
		cachedAfter bool    // the grant is in the verdict cache once checked
	}{
		{"the revoked user's token", bearerReq(mint("alice")), Unavailable, InvalidToken, true},
		{"the revoked API key", bearerReq(f.billing), Unavailable, InvalidToken, false},
		{"another user's token", bearerReq(mint("bob")), Unavailable, Allowed, true},
		{"another API key", bearerReq(f.backup), Unavailable, Allowed, true},
		{"no credential", hostReq("tools.example.com", nil), MissingToken, MissingToken, false},
	}
	for _, tt := range tests {
		t.Run("before/"+tt.name, func(t *testing.T) {
			for i := range 2 { // the second time from the verdict cache
				v := b.Check(ctx, tt.req)
				if v.Outcome != tt.before {
					t.Fatalf("check %d: %v (%s), want %v", i+1, v.Outcome, v.Description, tt.before)
				}
				if tt.before == Unavailable && (v.Status() != 503 || !strings.Contains(string(v.Body), "revocations")) {
					t.Fatalf("check %d: status %d, body %s", i+1, v.Status(), v.Body)
				}
				if i == 1 && tt.cachedAfter && !v.CacheHit {
					t.Fatal("the second check did not hit the verdict cache")
				}
			}
		})
	}
	if b.Ready() {
		t.Fatal("replica B is ready before it read the revocations")
	}

	loaded := make(chan bool, 1)
	go func() { loaded <- b.LoadRevocations(ctx) }()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-loaded:
		if !ok {
			t.Fatal("LoadRevocations gave up")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replica B did not read the revocations within 10s of Redis coming back")
	}
	if !b.Ready() {
		t.Fatal("replica B is not ready once it read the revocations")
	}
	for _, tt := range tests {
		t.Run("after/"+tt.name, func(t *testing.T) {
			if v := b.Check(ctx, tt.req); v.Outcome != tt.after {
				t.Fatalf("%v (%s), want %v", v.Outcome, v.Description, tt.after)
			}
		})
	}
}

// TestReplicaWithoutSharedTierNeedsNoLoad: without a shared tier this
// replica holds every revocation there is: it is ready and admits callers
// at once, LoadRevocations having nothing to read.
func TestReplicaWithoutSharedTierNeedsNoLoad(t *testing.T) {
	f := newRevokeFixture(t)
	pl := f.replica(t, nil)
	if !pl.Ready() {
		t.Fatal("not ready without a shared tier")
	}
	tok := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "bob", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	if v := pl.Check(t.Context(), bearerReq(tok)); v.Outcome != Allowed {
		t.Fatalf("%v (%s), want allowed", v.Outcome, v.Description)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if !pl.LoadRevocations(ctx) {
		t.Fatal("LoadRevocations without a shared tier reports nothing loaded")
	}
}

// TestResponseWaitsForRevocations: the response path of a replica that has
// not read the revocations processes no response as allowed, whether the
// identity comes from the check's metadata or from a grant in the verdict
// cache: it cannot tell whether the user is revoked.
func TestResponseWaitsForRevocations(t *testing.T) {
	pl, _ := responsePipelineWith(t, responseConfig, Deps{}, downStore(t))
	tok := responseToken(t, "alice", jwt.MapClaims{"scope": "files:read"})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	// The check refuses it, with the JSON-RPC error of an unavailable
	// dependency for the call's id, leaving the grant it verified in the
	// cache.
	v := pl.Check(t.Context(), call("mcp.example.com", tok, nil, list))
	if v.Outcome != Unavailable || !strings.Contains(string(v.Body), `"id":1`) || !strings.Contains(string(v.Body), `"error"`) {
		t.Errorf("check: %v (%s) %s, want unavailable with a JSON-RPC error", v.Outcome, v.Description, v.Body)
	}
	tests := []struct {
		name string
		id   *Identity
	}{
		{"the check's metadata", &Identity{Route: "files", Outcome: "allowed", Subject: "alice", Issuer: "a", Scopes: []string{"files:read"}}},
		{"the cached grant", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := pl.ForResponse(t.Context(), call("mcp.example.com", tok, nil, list), tt.id)
			if !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("ForResponse: %v (an exchange: %v), want ErrNotAllowed", err, x != nil)
			}
		})
	}
}

// mustLoad reads the shared tier's revocations into pl, as a replica does
// before it is ready, failing the test when Redis does not answer in 10s.
func mustLoad(t testing.TB, pl *Pipeline) *Pipeline {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if !pl.LoadRevocations(ctx) {
		t.Fatal("the revocations were not read from the shared tier")
	}
	return pl
}

// TestPeerWaitsForRevocations: a workload identified by its mTLS
// certificate is refused as a token is while the revocations are not
// read, from the verdict cache too: it may be revoked.
func TestPeerWaitsForRevocations(t *testing.T) {
	pl := newPipeline(t, peerXFCCConfig(), Deps{}, Options{Shared: downStore(t)})
	for i := range 2 {
		v := pl.Check(t.Context(), xfccReq("one.example.com"))
		if v.Outcome != Unavailable || v.Description != errNotLoaded {
			t.Fatalf("check %d: %v (%s), want unavailable", i+1, v.Outcome, v.Description)
		}
		if i == 1 && !v.CacheHit {
			t.Fatal("the second check did not hit the verdict cache")
		}
	}
}

// downStore is a shared tier on a port nothing listens on: Redis is down
// (and stays so), closed when the test ends.
func downStore(t *testing.T) *shared.Store {
	t.Helper()
	port, err := redistest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	st, err := shared.New(t.Context(), shared.Config{Addrs: []string{addr}, OpTimeout: 100 * time.Millisecond}, shared.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
