package app

import (
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/sync/semaphore"
)

// httpLimits protect an HTTP listener from slow and numerous clients: a
// client that trickles its request or never reads the answer is
// disconnected, and connections and request bodies in flight are capped.
type httpLimits struct {
	// Name labels the listener in metrics and logs.
	Name string
	// ReadHeader bounds the request line and headers; Read the whole
	// request, body included; Write the answer; Idle a keep-alive
	// connection between requests. 0 is no bound.
	ReadHeader, Read, Write, Idle time.Duration
	// MaxConns bounds open connections: beyond it, new ones wait in the
	// kernel's accept queue until one closes. 0 is no bound.
	MaxConns int
	// MaxBodies bounds requests with a body being served at once: beyond
	// it, they are answered 503 with Retry-After before any of the body
	// is read. 0 is no bound.
	MaxBodies int
	// MaxHeaderBytes bounds the request line and headers (0: net/http's
	// default, 1 MiB).
	MaxHeaderBytes int
}

// frontLimits are the forward-auth front end's: proxies keep a few
// keep-alive connections each and send small requests.
func frontLimits(o ServeOptions) httpLimits {
	return httpLimits{
		Name: "http", ReadHeader: 5 * time.Second, Read: o.HTTPReadTimeout, Write: o.HTTPReadTimeout + 5*time.Second,
		Idle: 90 * time.Second, MaxConns: o.HTTPMaxConns, MaxBodies: o.HTTPMaxBodies, MaxHeaderBytes: 64 << 10,
	}
}

// adminLimits are the admin and ops listeners': probes, scrapes and
// operators, few at a time. Writes may take a while (a CPU profile runs
// 30 s by default).
func adminLimits(name string) httpLimits {
	return httpLimits{Name: name, ReadHeader: 5 * time.Second, Read: 10 * time.Second, Write: 60 * time.Second, Idle: 60 * time.Second, MaxConns: 128, MaxBodies: 32}
}

// limitedServer returns a server for h under l and the listener wrapper to
// serve it on; onSlow counts a connection closed for slowness, onRefused a
// request refused for too many bodies.
func limitedServer(h http.Handler, l httpLimits, onSlow, onRefused func(listener string)) (*http.Server, func(net.Listener) net.Listener) {
	if l.MaxBodies > 0 {
		h = limitBodies(h, l.MaxBodies, func() { onRefused(l.Name) })
	}
	s := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		WriteTimeout:      l.Write,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
	wrap := func(lis net.Listener) net.Listener {
		if l.MaxConns > 0 {
			lis = netutil.LimitListener(lis, l.MaxConns)
		}
		return &slowListener{Listener: lis, onSlow: func() { onSlow(l.Name) }}
	}
	return s, wrap
}

// limitBodies answers 503 at once, before reading a byte of it, a request
// with a body when max of them are being served already. Bodies are what
// a slow client makes the service hold; requests without one pass.
func limitBodies(h http.Handler, max int, onRefused func()) http.Handler {
	sem := semaphore.NewWeighted(int64(max))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if !sem.TryAcquire(1) {
			onRefused()
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"overloaded","error_description":"too many requests with a body in progress","status":503}`))
			return
		}
		defer sem.Release(1)
		h.ServeHTTP(w, r)
	})
}

// slowListener hands out connections that report, once each, when the
// server gives up on them for slowness: a read deadline passing in the
// middle of a request, or a write deadline passing at all. A keep-alive
// connection closing idle between requests is not slow, nor is net/http
// aborting its own background read (a deadline set in the past).
type slowListener struct {
	net.Listener
	onSlow func()
}

func (l *slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: c, onSlow: l.onSlow}, nil
}

type slowConn struct {
	net.Conn
	onSlow func()

	mu sync.Mutex
	// abort is set when the read deadline was set in the past (an
	// immediate wake-up, not a timeout).
	abort bool
	// answered is set by a write and cleared by a read of request bytes:
	// a read timeout while answered is a keep-alive connection idling.
	answered bool
	counted  atomic.Bool
}

func (c *slowConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if n > 0 {
		c.answered = false
	}
	slow := isTimeout(err) && !c.abort && !c.answered
	c.mu.Unlock()
	if slow {
		c.slow()
	}
	return n, err
}

func (c *slowConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if isTimeout(err) {
		c.slow()
	}
	c.mu.Lock()
	c.answered = true
	c.mu.Unlock()
	return n, err
}

func (c *slowConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.abort = !t.IsZero() && !t.After(time.Now())
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *slowConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.abort = !t.IsZero() && !t.After(time.Now())
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *slowConn) slow() {
	if c.counted.CompareAndSwap(false, true) {
		c.onSlow()
	}
}

func isTimeout(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// limitListener applies wrap to lis; a listener that is off (nil) stays off.
func limitListener(lis net.Listener, wrap func(net.Listener) net.Listener) net.Listener {
	if lis == nil {
		return nil
	}
	return wrap(lis)
}
