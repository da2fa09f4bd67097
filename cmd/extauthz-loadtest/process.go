package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/extauthz/extauthz/internal/bounded"
)

// child is a server process the run started and must stop.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited
	waitErr error
}

// startChild starts path with args and env, its stderr (and stdout, unless
// stdout is given) appended to logPath.
func startChild(name, path string, args, env []string, logPath string, stdout io.Writer) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		logFile.Close()
		close(c.done)
	}()
	return c, nil
}

// exitError describes how the process ended, once it has.
func (c *child) exitError() error {
	select {
	case <-c.done:
		if c.waitErr != nil {
			return fmt.Errorf("%s exited: %v%s", c.name, c.waitErr, c.logTail())
		}
		return fmt.Errorf("%s exited%s", c.name, c.logTail())
	default:
		return nil
	}
}

// logTail is the end of the process's log, to explain a failure.
func (c *child) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	lines = lines[max(0, len(lines)-15):]
	return "; last lines of its log (" + c.logPath + "):\n  " + strings.Join(lines, "\n  ")
}

// stop asks the process to terminate, and kills it when it has not after
// grace.
func (c *child) stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// startNoop starts this program's noop command on a free loopback port and
// returns its address once it listens.
func startNoop(ctx context.Context, self, logPath string, timeout time.Duration) (*child, string, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, "", err
	}
	c, err := startChild("noop server", self, []string{"noop", "-addr", "127.0.0.1:0"}, os.Environ(), logPath, pw)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, "", err
	}
	lines := make(chan string, 1)
	go func() {
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line := <-lines:
		addr, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			c.stop(time.Second)
			return nil, "", fmt.Errorf("noop server said %q, not \"listening ADDR\"", line)
		}
		return c, addr, nil
	case <-c.done:
		return nil, "", c.exitError()
	case <-t.C:
		c.stop(time.Second)
		return nil, "", fmt.Errorf("noop server did not listen within %s", timeout)
	case <-ctx.Done():
		c.stop(time.Second)
		return nil, "", ctx.Err()
	}
}

// freeLoopbackAddr returns a loopback address with a port that was free a
// moment ago, for a child that must be told its port.
func freeLoopbackAddr() (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer lis.Close()
	return lis.Addr().String(), nil
}

// waitReady polls url until it answers 200, the child exits, or timeout
// passes.
func waitReady(ctx context.Context, client *http.Client, url string, c *child, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			bounded.Drain(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s answered %s", url, resp.Status)
		} else {
			last = err
		}
		select {
		case <-c.done:
			return c.exitError()
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s not ready within %s: %v%s", c.name, timeout, last, c.logTail())
		case <-tick.C:
		}
	}
}
