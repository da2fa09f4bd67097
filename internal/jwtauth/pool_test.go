package jwtauth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newPool returns Sources for the test, ended with it.
func newPool(t *testing.T, clk *clock, o Options) *Sources {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o.Now = clk.Now
	return NewSources(ctx, o)
}

func pooledVerifier(t *testing.T, pool *Sources, specs ...IssuerSpec) *Verifier {
	t.Helper()
	v, err := New(context.Background(), specs, Options{Sources: pool})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(v.Close)
	return v
}

// TestSourcesSurviveReload builds verifiers from one pool as reloads do:
// an unchanged definition reuses the loaded source (no fetch, ready at
// once, serving through an outage); a changed one of the same issuer starts
// from the old keys; the last release stops refreshing.
func TestSourcesSurviveReload(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA()))
	clk := newClock()
	pool := newPool(t, clk, Options{})
	spec := urlSpec(srv)
	spec.RefreshInterval = 20 * time.Millisecond

	v1 := pooledVerifier(t, pool, spec)
	waitReady(t, v1)
	srv.status.Store(http.StatusInternalServerError) // the identity provider goes down

	tok := esToken(t, "a")
	for i := range 50 {
		v := pooledVerifier(t, pool, spec)
		if !v.Ready() {
			t.Fatalf("reload %d: not ready right after the reload", i)
		}
		if err := verify(v, tok); err != nil {
			t.Fatalf("reload %d: Verify() = %v during the outage", i, err)
		}
		v1.Close()
		v1 = v
	}
	if n := pool.Len(); n != 1 {
		t.Fatalf("%d live sources after 50 reloads of one definition, want 1", n)
	}

	// A changed definition (another URL) of the same issuer, unreachable:
	// the old keys keep serving.
	down := newJWKSServer(t, nil)
	down.status.Store(http.StatusServiceUnavailable)
	changed := spec
	changed.JWKSURL = down.keysURL()
	v2 := pooledVerifier(t, pool, changed)
	if !v2.Ready() {
		t.Fatal("a changed source of the same issuer did not start from the old keys")
	}
	if err := verify(v2, tok); err != nil {
		t.Fatalf("Verify() on the changed source = %v", err)
	}
	// Another issuer never inherits those keys.
	other := changed
	other.Name = "other"
	if v3 := pooledVerifier(t, pool, other); v3.Ready() {
		t.Fatal("keys were carried over to another issuer")
	}

	v1.Close() // the last hold on the old source
	// A fetch cancelled by the release may already be on the wire and
	// reach the server after Close returns; one such straggler is not a
	// leak. A source still running would fetch every 20ms: seven or more
	// times in the window.
	time.Sleep(20 * time.Millisecond)
	hits := srv.hits.Load()
	time.Sleep(150 * time.Millisecond)
	if got := srv.hits.Load(); got-hits > 1 {
		t.Fatalf("a released source kept fetching: %d fetches after release", got-hits)
	}
}

// TestRemovedKIDsReported: a refresh that drops a kid tells OnKeysRemoved
// the id of its key, the one a token it verified records.
func TestRemovedKIDsReported(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA(), keyB()))
	var (
		mu   sync.Mutex
		seen []string
	)
	pool := newPool(t, newClock(), Options{OnKeysRemoved: func(issuer string, kids []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range kids {
			seen = append(seen, issuer+"/"+k)
		}
	}})
	spec := urlSpec(srv)
	spec.RefreshInterval = 10 * time.Millisecond
	v := pooledVerifier(t, pool, spec)
	waitReady(t, v)
	srv.setDoc(jwksDoc(t, keyA()))
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(seen)
		mu.Unlock()
		if len(got) > 0 {
			if want := []string{"keys/" + refThumbprint(t, keyB().public())}; !slices.Equal(got, want) {
				t.Fatalf("removed = %v, want %v", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dropped kid was never reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := verify(v, rsToken(t, "b")); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("token of the dropped key: %v, want ErrUnknownKey", err)
	}
}

// TestRefetchWaitersBounded: against a hung JWKS, only MaxWaiting calls
// wait for the refetch; the rest of an unknown-kid flood is answered at
// once from the keys at hand.
func TestRefetchWaitersBounded(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA()))
	pool := newPool(t, newClock(), Options{MaxWaiting: 2})
	v := pooledVerifier(t, pool, urlSpec(srv))
	waitReady(t, v)
	hang := make(chan struct{})
	srv.hang.Store(&hang)
	defer close(hang)

	const flood = 50
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var answered atomic.Int64
	errs := make(chan error, flood)
	for i := range flood {
		go func() {
			_, err := v.Verify(ctx, esToken(t, "unknown-"+string(rune('a'+i%26))), nil, nil)
			answered.Add(1)
			errs <- err
		}()
	}
	for range flood - 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("Verify() = %v, want ErrUnknownKey", err)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d calls answered while the JWKS hangs", answered.Load(), flood)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := answered.Load(); n != flood-2 {
		t.Fatalf("%d calls answered, want %d (2 waiting)", n, flood-2)
	}
	cancel() // the budget of the waiting two ends
	for range 2 {
		if err := <-errs; !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("waiting Verify() = %v, want ErrUnknownKey", err)
		}
	}
	// Tokens of the known key never waited at all.
	if err := verify(v, esToken(t, "a")); err != nil {
		t.Fatalf("known key during the flood: %v", err)
	}
}
