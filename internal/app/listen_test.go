package app

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serveLimited serves h under l on a loopback port and returns its address
// and the slow clients and refusals counted.
func serveLimited(t *testing.T, h http.Handler, l httpLimits) (addr string, slow, refused *atomic.Int64) {
	t.Helper()
	slow, refused = new(atomic.Int64), new(atomic.Int64)
	srv, wrap := limitedServer(h, l, func(string) { slow.Add(1) }, func(string) { refused.Add(1) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(wrap(lis)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lis.Addr().String(), slow, refused
}

// closedWithin reads c until the server closes it, failing the test if
// that takes longer than d.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %s", d)
	}
}

func TestSlowClients(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, big)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	limits := httpLimits{Name: "t", ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Write: 300 * time.Millisecond, Idle: 200 * time.Millisecond}
	tests := []struct {
		name     string
		send     string // then the client stalls
		read     bool   // the client reads the answer
		wantSlow int64
	}{
		{"headers never finished", "POST / HTTP/1.1\r\nHost: a\r\n", false, 1},
		{"body never finished", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\nabc", false, 1},
		{"answer never read", "GET /big HTTP/1.1\r\nHost: a\r\n\r\n", false, 1},
		{"connected, sent nothing", "", false, 1},
		{"idle keep-alive after an answer", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}", true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, slow, _ := serveLimited(t, handler, limits)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tcp, ok := c.(*net.TCPConn); ok && !tc.read {
				_ = tcp.SetReadBuffer(4 << 10) // so that an unread answer fills the buffers
			}
			if _, err := io.WriteString(c, tc.send); err != nil {
				t.Fatal(err)
			}
			if !tc.read {
				time.Sleep(time.Second) // stall; the server gives up meanwhile
			}
			if tc.name != "answer never read" {
				// (An unread answer still drains from the kernel's buffers
				// after the server closed its end.)
				closedWithin(t, c, 5*time.Second)
			}
			deadline := time.Now().Add(5 * time.Second)
			for slow.Load() < tc.wantSlow && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			if got := slow.Load(); got != tc.wantSlow {
				t.Fatalf("slow clients = %d, want %d", got, tc.wantSlow)
			}
		})
	}
}

// TestBodiesInFlightCapped: beyond MaxBodies requests with a body in
// progress, the next is answered 503 at once, without its body being read;
// requests without a body pass.
func TestBodiesInFlightCapped(t *testing.T) {
	var (
		release = make(chan struct{})
		started = make(chan struct{}, 10)
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release // closed by the test: until then bodies stay in progress
		_, _ = io.Copy(io.Discard, r.Body)
	})
	addr, _, refused := serveLimited(t, handler, httpLimits{Name: "t", Read: 5 * time.Second, MaxBodies: 2})
	defer close(release)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab")
		<-started
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\nab")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || refused.Load() != 1 {
		t.Fatalf("third body: %d Retry-After %q, refused %d", resp.StatusCode, resp.Header.Get("Retry-After"), refused.Load())
	}
}
