// Package redistest runs a throwaway redis-server on a 127.0.0.1 port
// chosen at run time, for tests of the shared tier.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Server is a redis-server process that the test owns and may kill.
type Server struct {
	Addr string
	port int
	dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	out    bytes.Buffer
}

// Start runs a server until the test ends. Without the binary the test is
// skipped, except in CI (CI=true), where it fails.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed (Debian package redis-server)")
		}
		t.Skip("redis-server is not installed; install the Debian package redis-server to run this test")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), port: port, dir: t.TempDir()}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Restart starts the server again on the same port and waits for PING.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 20 {
		s.out.Reset()
		cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.port),
			"--save", "", "--appendonly", "no", "--dir", s.dir)
		cmd.Stdout, cmd.Stderr = &s.out, &s.out
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		for range 250 {
			if ping(s.Addr) {
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
	return fmt.Errorf("redis-server on %s did not answer PING:\n%s", s.Addr, s.out.String())
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

func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && len(line) > 0 && (line[0] == '+' || line[0] == '-')
}
