// Package redistest runs throwaway redis-server processes on 127.0.0.1
// ports chosen at run time, for tests of the shared tier.
package redistest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options shape a server.
type Options struct {
	// Dir is the server's working directory (a temporary one when empty).
	Dir string
	// Args replace the plain-TCP listener options for the chosen port (for
	// example to listen with TLS); TLS then reaches the server's port for
	// the readiness check.
	Args func(port int) []string
	TLS  *tls.Config
	// Persist keeps the data across Kill and Restart: every write is
	// appended to a file in Dir and synced before it is answered, so a
	// killed server comes back with what it had.
	Persist bool
}

// Server is a redis-server process the test owns and may kill.
type Server struct {
	Addr    string
	port    int
	dir     string
	args    []string
	tls     *tls.Config
	persist bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    bytes.Buffer
}

// Need skips the test when redis-server is not installed, except in CI
// (CI=true), where the tests must run.
func Need(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (Debian package redis-server)")
		}
		t.Skip("redis-server is not installed; install the Debian package redis-server to run this test")
	}
}

// Start runs a plain server until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	Need(t)
	s, err := Launch(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// StartPersistent runs a server until the test ends whose data survive
// Kill and Restart (Options.Persist).
func StartPersistent(t testing.TB) *Server {
	t.Helper()
	Need(t)
	s, err := Launch(Options{Dir: t.TempDir(), Persist: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Launch starts a server and waits until it answers; the caller kills it.
func Launch(o Options) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	if o.Dir == "" {
		if o.Dir, err = os.MkdirTemp("", "redistest-"); err != nil {
			return nil, err
		}
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: o.Dir, tls: o.TLS, persist: o.Persist,
		args: []string{"--port", strconv.Itoa(port)}}
	if o.Args != nil {
		s.args = o.Args(port)
	}
	if err := s.Restart(); err != nil {
		return nil, err
	}
	return s, nil
}

// Port is the server's port.
func (s *Server) Port() int { return s.port }

// Restart starts the server again on its port and waits until it answers
// PING. A server that exits at once (its port briefly held, e.g. by a
// client's connection to itself while nothing listened) is started again.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 20 {
		s.out.Reset()
		persistence := []string{"--appendonly", "no"}
		if s.persist {
			persistence = []string{"--appendonly", "yes", "--appendfsync", "always"}
		}
		args := append(append([]string{"--bind", "127.0.0.1", "--save", "", "--dir", s.dir}, persistence...), s.args...)
		cmd := exec.Command("redis-server", args...)
		cmd.Stdout, cmd.Stderr = &s.out, &s.out
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		for range 250 { // up to 5s
			if Ping(s.Addr, s.tls) {
				s.cmd, s.exited = cmd, exited
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
	return fmt.Errorf("redis-server on %s did not answer PING; its output:\n%s", s.Addr, s.out.String())
}

// Kill stops the server abruptly (the crash case).
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// FreePort returns a port nothing listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Ping speaks just enough RESP to tell whether a server answers (one that
// wants a password first answers too).
func Ping(addr string, tc *tls.Config) bool {
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
