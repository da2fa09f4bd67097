package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const binarySecret = "binary-test-secret-binary-test-secret-xx"

// buildBinary builds cmd/extauthz for the test.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "extauthz")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/extauthz").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// process is a running extauthz binary.
type process struct {
	cmd                         *exec.Cmd
	grpcAddr, opsAddr, httpAddr string
	exited                      chan struct{} // closed when it exited, with exitErr
	exitErr                     error
}

// startBinary runs bin serve with args on loopback ports, in the built-in
// default mode, and waits for its "serving" line.
func startBinary(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--log-level", "info"}, args...)...)
	cmd.Env = append(os.Environ(), "JWT_SECRET="+binarySecret)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "serving" {
			p.grpcAddr, _ = line["grpc_addr"].(string)
			p.opsAddr, _ = line["ops_addr"].(string)
			p.httpAddr, _ = line["http_addr"].(string)
			break
		}
	}
	if p.grpcAddr == "" {
		_ = cmd.Process.Kill()
		t.Fatal("no serving line")
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// rss is the resident set size of pid in bytes, from /proc.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no VmRSS in /proc status")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

func metricValue(t *testing.T, opsAddr, series string) float64 {
	t.Helper()
	_, body := httpGet(t, "http://"+opsAddr+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return 0
}

// TestStalledUploads: 300 clients announce a 1 MB body on the forward-auth
// front end, send 1 KiB of it and stall. The service's RSS (of the built
// binary, read from /proc/<pid>/status) stays within 50 MB of its
// baseline, every connection is closed within the read timeout (plus a
// second of slack), and each is counted: as a slow client, or as refused
// at once when --http-max-bodies were already in progress.
func TestStalledUploads(t *testing.T) {
	const (
		stalled     = 300
		readTimeout = 2 * time.Second
	)
	bin := buildBinary(t)
	p := startBinary(t, bin, "--http-addr", "127.0.0.1:0", "--http-read-timeout", readTimeout.String(), "--drain-period", "0s")
	// Warm up with complete requests, then take the baseline.
	for range 20 {
		c, err := net.Dial("tcp", p.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: mcp.example.com\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}
	base := rss(t, p.cmd.Process.Pid)

	chunk := strings.Repeat("x", 1024)
	conns := make([]net.Conn, 0, stalled)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	start := time.Now()
	for range stalled {
		c, err := net.Dial("tcp", p.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: mcp.example.com\r\nContent-Type: application/json\r\nContent-Length: 1048000\r\n\r\n%s", chunk)
	}
	time.Sleep(readTimeout / 2)
	peak := rss(t, p.cmd.Process.Pid)

	var (
		wg     sync.WaitGroup
		open   atomic.Int64
		latest atomic.Int64
	)
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(start.Add(readTimeout + time.Second))
			_, err := io.Copy(io.Discard, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open.Add(1) // still open when the service should have closed it
				return
			}
			if d := int64(time.Since(start)); d > latest.Load() {
				latest.Store(d)
			}
		}()
	}
	wg.Wait()
	t.Logf("RSS: baseline %.1f MB, with %d stalled uploads %.1f MB (+%.1f MB); last connection closed after %s",
		float64(base)/(1<<20), stalled, float64(peak)/(1<<20), float64(peak-base)/(1<<20), time.Duration(latest.Load()).Round(time.Millisecond))
	if peak-base > 50<<20 {
		t.Fatalf("RSS grew by %.1f MB with %d stalled uploads, want under 50 MB", float64(peak-base)/(1<<20), stalled)
	}
	if n := open.Load(); n > 0 {
		t.Fatalf("%d of %d stalled connections still open after the read timeout (%s) plus 1 s", n, stalled, readTimeout)
	}
	slow := metricValue(t, p.opsAddr, `extauthz_slow_clients_total{listener="http"}`)
	refused := metricValue(t, p.opsAddr, `extauthz_http_refused_total{listener="http"}`)
	if slow+refused != stalled || slow == 0 {
		t.Fatalf("slow clients %v + refused %v, want %d with some slow", slow, refused, stalled)
	}
}

// TestRollingRestartUnderLoad: two replicas under load; one gets SIGTERM
// (as Kubernetes sends it at a rolling update), drains and exits. A client
// that retries a failed check on the other replica (as Envoy does with two
// endpoints) sees no failed check; the terminated replica reports not
// ready at once but keeps answering checks for its drain period.
func TestRollingRestartUnderLoad(t *testing.T) {
	bin := buildBinary(t)
	const drainPeriod = time.Second
	a := startBinary(t, bin, "--drain-period", drainPeriod.String(), "--shutdown-timeout", "5s")
	b := startBinary(t, bin, "--drain-period", drainPeriod.String(), "--shutdown-timeout", "5s")
	clientA, clientB := dial(t, a.grpcAddr), dial(t, b.grpcAddr)
	tok := testtoken.HMAC(t, "HS256", binarySecret, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})

	var (
		stop                  atomic.Bool
		terminated            atomic.Bool
		wg                    sync.WaitGroup
		checks, failed, retry atomic.Int64
		answeredByAAfterTerm  atomic.Int64
		refusedInDrain        atomic.Int64
		termAt                atomic.Int64 // unix nanoseconds of the SIGTERM
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 1_000_000 && !stop.Load(); n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // Envoy's ext_authz timeout
				code, err := statusWith(ctx, clientA, tok)
				if err == nil && code == 200 && terminated.Load() {
					answeredByAAfterTerm.Add(1)
				}
				if err != nil || code != 200 {
					if at := termAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < drainPeriod*9/10 {
						refusedInDrain.Add(1)
					}
					retry.Add(1)
					code, err = statusWith(ctx, clientB, tok)
				}
				cancel()
				checks.Add(1)
				if err != nil || code != 200 {
					failed.Add(1)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	termAt.Store(time.Now().UnixNano())
	terminated.Store(true)
	signalled := time.Unix(0, termAt.Load())
	// Not ready at once.
	for {
		code, _ := httpGet(t, "http://"+a.opsAddr+"/readyz")
		if code == 503 {
			break
		}
		if time.Since(signalled) > drainPeriod/2 {
			t.Fatal("/readyz still ready half a drain period after SIGTERM")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-a.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("the replica did not exit after SIGTERM")
	}
	exitedAfter := time.Since(signalled)
	time.Sleep(300 * time.Millisecond) // load on the remaining replica
	stop.Store(true)
	wg.Wait()
	t.Logf("%d checks, %d retried on the other replica, %d failed; the terminated replica answered %d checks after SIGTERM and exited after %s",
		checks.Load(), retry.Load(), failed.Load(), answeredByAAfterTerm.Load(), exitedAfter.Round(time.Millisecond))
	if a.exitErr != nil {
		t.Fatalf("exit after SIGTERM: %v", a.exitErr)
	}
	if n := refusedInDrain.Load(); n != 0 {
		t.Fatalf("the terminated replica refused %d checks during its drain period", n)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d of %d checks failed on both replicas during the rolling restart", failed.Load(), checks.Load())
	}
	if answeredByAAfterTerm.Load() == 0 || exitedAfter < drainPeriod {
		t.Fatalf("the terminated replica answered %d checks after SIGTERM and exited after %s: no drain period", answeredByAAfterTerm.Load(), exitedAfter)
	}
}
