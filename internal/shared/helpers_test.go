package shared

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
		sharedServer.stop()
	}
	os.Exit(code)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// redisServer is a redis-server process of the test's own, on a port
// chosen at run time.
type redisServer struct {
	addr string
	port int
	dir  string
	// args replace the plain-TCP listener options (TLS); tlsConfig then
	// reaches the server for the readiness check.
	args      []string
	tlsConfig *tls.Config

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
	out    bytes.Buffer
}

var (
	sharedOnce   sync.Once
	sharedServer *redisServer
	sharedErr    error
)

// sharedRedis returns the server most tests share; each test keeps to its
// own key prefix (newStore).
func sharedRedis(t testing.TB) *redisServer {
	t.Helper()
	needRedis(t)
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "shared-redis-")
		if err != nil {
			sharedErr = err
			return
		}
		sharedServer, sharedErr = launchRedis(dir)
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedServer
}

// ownRedis starts a server only this test uses (and may kill).
func ownRedis(t testing.TB) *redisServer {
	t.Helper()
	needRedis(t)
	r, err := launchRedis(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

// needRedis skips the test when redis-server is not installed, except in
// CI, where the tests must run.
func needRedis(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (install the Debian package redis-server)")
		}
		t.Skip("redis-server is not installed; install the Debian package redis-server to run this test")
	}
}

func launchRedis(dir string) (*redisServer, error) {
	return launchRedisWith(dir, nil, nil)
}

// launchRedisWith starts a server whose listener args builds for the chosen
// port (nil: plain TCP on 127.0.0.1).
func launchRedisWith(dir string, args func(port int) []string, tc *tls.Config) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: dir, tlsConfig: tc}
	if args == nil {
		r.args = []string{"--port", strconv.Itoa(port)}
	} else {
		r.args = args(port)
	}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs redis-server on r.port and waits until it answers PING. A
// server that exits at once (its port briefly held, e.g. by a client's
// connection to itself while nothing listened) is started again.
func (r *redisServer) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range 20 {
		r.out.Reset()
		args := append([]string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir}, r.args...)
		cmd := exec.Command("redis-server", args...)
		cmd.Stdout = &r.out
		cmd.Stderr = &r.out
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(exited)
		}()
		for range 250 { // up to 5s
			if pingRaw(r.addr, r.tlsConfig) {
				r.cmd, r.exited = cmd, exited
				return nil
			}
			select {
			case <-exited:
			case <-time.After(20 * time.Millisecond):
				continue
			}
			break
		}
		_ = cmd.Process.Kill()
		<-exited
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer PING; its output:\n%s", r.addr, r.out.String())
}

// stop kills the server (no shutdown courtesy: this is the crash case).
func (r *redisServer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// pingRaw speaks just enough RESP to tell whether a server answers (a
// server that wants a password first answers too).
func pingRaw(addr string, tc *tls.Config) bool {
	d := &net.Dialer{Timeout: 200 * time.Millisecond}
	var c net.Conn
	var err error
	if tc != nil {
		c, err = tls.DialWithDialer(d, "tcp", addr, tc)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := io.WriteString(c, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH"))
}

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
