package shared

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// deadline is how long any operation may take while Redis is gone:
// OpTimeout plus slack for a loaded machine.
const deadline = 500 * time.Millisecond

// everyOperation runs each Store operation once.
func everyOperation(s *Store) []struct {
	name string
	run  func(context.Context) error
} {
	return []struct {
		name string
		run  func(context.Context) error
	}{
		{OpBind, func(ctx context.Context) error {
			_, _, err := s.Bind(ctx, "r\x00s", "alice", time.Minute, 0)
			return err
		}},
		{OpPutElicitation, func(ctx context.Context) error {
			return s.PutElicitation(ctx, "e1", Owner{Subject: "alice", Session: "s"}, []byte("{}"), time.Minute)
		}},
		{OpGetElicitation, func(ctx context.Context) error { _, _, err := s.GetElicitation(ctx, "e1"); return err }},
		{OpDeleteElicitation, func(ctx context.Context) error { return s.DeleteElicitation(ctx, "e1") }},
		{OpPutToken, func(ctx context.Context) error {
			return s.PutToken(ctx, "k1", Owner{Subject: "alice", Session: "s"}, []byte("token"), time.Minute)
		}},
		{OpGetToken, func(ctx context.Context) error { _, _, err := s.GetToken(ctx, "k1"); return err }},
		{OpDropSession, func(ctx context.Context) error { _, err := s.DropSession(ctx, "s"); return err }},
		{OpDropSubject, func(ctx context.Context) error { _, err := s.DropSubject(ctx, "alice"); return err }},
		{OpRevoke, func(ctx context.Context) error { return s.Revoke(ctx, "alice", time.Now(), 0) }},
		{OpRevocations, func(ctx context.Context) error { _, err := s.Revocations(ctx); return err }},
		{OpPublish, func(ctx context.Context) error { return s.Publish(ctx, Event{Kind: EventSession, ID: "s1"}) }},
	}
}

// assertAllFail runs every operation rounds times and fails the test
// unless each returns ErrUnavailable within deadline.
func assertAllFail(t *testing.T, s *Store, rounds int) {
	t.Helper()
	for range rounds {
		for _, op := range everyOperation(s) {
			start := time.Now()
			err := op.run(t.Context())
			took := time.Since(start)
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s: err = %v, want ErrUnavailable", op.name, err)
			}
			if took > deadline {
				t.Errorf("%s took %v, want under %v", op.name, took, deadline)
			}
		}
	}
}

func TestRedisKilledAndRestarted(t *testing.T) {
	r := ownRedis(t)
	var obs observed
	a := newStore(t, r.Addr, func(_ *Config, o *Options) {
		o.ReplicaID = "a"
		o.Observe = obs.observe
	})
	b := newStore(t, r.Addr, func(c *Config, o *Options) {
		o.ReplicaID = "b"
		c.FailOpen = true
	})
	if a.FailOpen() || !b.FailOpen() {
		t.Fatal("FailOpen does not report the configuration")
	}
	evB := subscribe(t, b)
	if got := evB.next(t, 5*time.Second); got.Kind != EventResync {
		t.Fatalf("first event %+v, want resync", got)
	}
	if !eventually(500, a.Ready) {
		t.Fatal("never ready while Redis runs")
	}
	if _, ok, err := a.Bind(t.Context(), "r\x00s", "alice", time.Minute, 0); !ok || err != nil {
		t.Fatalf("Bind = %v, %v", ok, err)
	}

	r.Kill()
	assertAllFail(t, a, 3)
	if !eventually(500, func() bool { return !a.Ready() }) {
		t.Fatal("still ready with Redis gone")
	}
	if obs.count(OpBind, ResultError)+obs.count(OpBind, ResultTimeout) != 3 {
		t.Errorf("failed binds not observed: %v", obs.m)
	}

	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	recovered := eventually(1000, func() bool {
		_, ok, err := a.Bind(t.Context(), "r\x00s", "bob", time.Minute, 0)
		return ok && err == nil // the restarted server is empty: bob binds
	})
	if !recovered {
		t.Fatal("operations did not recover after Redis came back")
	}
	if !eventually(500, a.Ready) {
		t.Fatal("not ready after Redis came back")
	}
	// The subscriber noticed the outage and re-subscribed: it reports a
	// resync, and events after it arrive again.
	if got := evB.next(t, 10*time.Second); got.Kind != EventResync {
		t.Fatalf("after the restart: %+v, want resync", got)
	}
	if err := a.Publish(t.Context(), Event{Kind: EventSession, ID: "after"}); err != nil {
		t.Fatal(err)
	}
	if got := evB.next(t, time.Second); got.Kind != EventSession || got.ID != "after" {
		t.Fatalf("after the resync: %+v, want the session event", got)
	}
}

// silentServer accepts connections and never answers: a Redis that hangs
// or a network that drops packets, the case only timeouts catch.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

func TestRedisThatNeverAnswers(t *testing.T) {
	addr := silentServer(t)
	var obs observed
	s := newStore(t, addr, func(_ *Config, o *Options) { o.Observe = obs.observe })
	ev := subscribe(t, s)
	assertAllFail(t, s, 2)
	if obs.count(OpBind, ResultTimeout) != 2 {
		t.Errorf("binds not observed as timeouts: %v", obs.m)
	}
	if s.Ready() {
		t.Error("ready although Redis never answered")
	}
	ev.none(t)
}

func TestNewWithRedisDown(t *testing.T) {
	// Nothing listens on the port: New still succeeds, and operations fail
	// fast with ErrUnavailable.
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil)
	if s.Ready() {
		t.Fatal("ready with nothing listening")
	}
	assertAllFail(t, s, 1)
}

func TestCloseEndsSubscribe(t *testing.T) {
	r := sharedRedis(t)
	s, err := New(t.Context(), Config{Addrs: []string{r.Addr}, KeyPrefix: prefix(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	ev := newEvents()
	go func() {
		defer close(done)
		s.Subscribe(context.Background(), ev.handle)
	}()
	if got := ev.next(t, 5*time.Second); got.Kind != EventResync {
		t.Fatalf("first event %+v, want resync", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Subscribe still running after Close")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
