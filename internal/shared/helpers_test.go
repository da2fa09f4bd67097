package shared

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/extauthz/extauthz/internal/testing/redistest"
)

// testKey and otherKey are AES-256 keys for tests.
var (
	testKey  = bytes.Repeat([]byte{0x11}, keySize)
	otherKey = bytes.Repeat([]byte{0x22}, keySize)
)

func TestMain(m *testing.M) {
	// go-redis logs dial failures through a process-wide logger; the
	// failure tests provoke plenty of them.
	redis.SetLogger(quietLogger{})
	code := m.Run()
	if sharedServer != nil {
		sharedServer.Kill()
	}
	os.Exit(code)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// redisServer is a redis-server process of the test's own.
type redisServer = redistest.Server

var (
	sharedOnce   sync.Once
	sharedServer *redisServer
	sharedErr    error
)

// sharedRedis returns the server most tests share; each test keeps to its
// own key prefix (newStore).
func sharedRedis(t testing.TB) *redisServer {
	t.Helper()
	redistest.Need(t)
	sharedOnce.Do(func() { sharedServer, sharedErr = redistest.Launch(redistest.Options{}) })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedServer
}

// ownRedis starts a server only this test uses (and may kill).
func ownRedis(t testing.TB) *redisServer { return redistest.Start(t) }

var freePort = redistest.FreePort

// rawClient is a plain client for looking at what the Store wrote.
func rawClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// observed counts Observe calls.
type observed struct {
	mu sync.Mutex
	m  map[[2]string]int
}

func (o *observed) observe(op, result string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[[2]string]int)
	}
	o.m[[2]string{op, result}]++
}

func (o *observed) count(op, result string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[[2]string{op, result}]
}

var (
	prefixMu sync.Mutex
	prefixes = map[testing.TB]string{}
)

// prefix gives each test its own keys on the shared server, fresh on every
// run of it (-count).
func prefix(t testing.TB) string {
	prefixMu.Lock()
	defer prefixMu.Unlock()
	p, ok := prefixes[t]
	if !ok {
		p = fmt.Sprintf("test:%s:%d:", strings.ReplaceAll(t.Name(), "/", ":"), len(prefixes))
		prefixes[t] = p
	}
	return p
}

// newStore returns a Store on addr with testKey, closed at cleanup; edit
// adjusts the Config and Options first.
func newStore(t testing.TB, addr string, edit func(*Config, *Options)) *Store {
	t.Helper()
	c := Config{Addrs: []string{addr}, KeyPrefix: prefix(t), EncryptionKey: testKey}
	o := Options{Logger: slog.New(slog.DiscardHandler)}
	if edit != nil {
		edit(&c, &o)
	}
	s, err := New(t.Context(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// eventually polls cond every 10ms, at most n times, and reports whether it
// became true.
func eventually(n int, cond func() bool) bool {
	for range n {
		if cond() {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cond()
}

// events collects what a Subscribe handler receives.
type events struct {
	ch chan Event
}

func newEvents() *events { return &events{ch: make(chan Event, 100)} }

func (e *events) handle(ev Event) { e.ch <- ev }

// next returns the next event, or fails the test after within.
func (e *events) next(t testing.TB, within time.Duration) Event {
	t.Helper()
	select {
	case ev := <-e.ch:
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
		return Event{}
	}
}

// none asserts that no event is waiting.
func (e *events) none(t testing.TB) {
	t.Helper()
	select {
	case ev := <-e.ch:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

// subscribe runs s.Subscribe until the test ends.
func subscribe(t testing.TB, s *Store) *events {
	t.Helper()
	ev := newEvents()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Subscribe(ctx, ev.handle)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ev
}
