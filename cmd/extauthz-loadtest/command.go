package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/loadtest"
)

// env is what the command takes from its surroundings, so that tests can
// run it in-process.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// self is this program, started again as the noop subprocess.
	self string
	// http polls the service's readiness endpoint.
	http *http.Client
	now  func() time.Time
}

func defaultEnv() env {
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	return env{
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
		self:   self,
		http:   &http.Client{Timeout: 2 * time.Second},
		now:    time.Now,
	}
}

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // an error, or a missed target with -enforce
	exitUsage  = 2
)

// usageError marks a problem in how the command was called.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// Main runs the command line args (without the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, e env) int {
	err := dispatch(ctx, args, e)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errTargetMissed):
		return exitFailed
	}
	fmt.Fprintf(e.stderr, "extauthz-loadtest: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailed
}

func dispatch(ctx context.Context, args []string, e env) error {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCommand(ctx, args, e)
	case "noop":
		return noopCommand(ctx, args, e)
	case "setup":
		return setupCommand(args, e)
	case "help":
		fmt.Fprint(e.stdout, usage)
		return nil
	}
	fmt.Fprint(e.stderr, usage)
	return usageError{fmt.Errorf("unknown command %q", cmd)}
}

const usage = `extauthz-loadtest: measure extauthz against a do-nothing ext_authz server

Usage:
  extauthz-loadtest [run] [flags]     start the service and the do-nothing server, measure, report
  extauthz-loadtest noop [-addr A]    serve the do-nothing ext_authz server (prints "listening ADDR")
  extauthz-loadtest setup -dir DIR    write keys and a service config, for run -target

Run "extauthz-loadtest COMMAND -h" for a command's flags.
`

// parseFlags parses args, collecting every problem into one usage error.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	return nil
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // the report carries the numbers; times are noise
			}
			return a
		},
	}))
}

// noopCommand serves the do-nothing server until ctx ends. It prints
// "listening ADDR" once it accepts connections, which is how the run
// command learns the port it picked.
func noopCommand(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("noop", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on; port 0 picks a free one")
	if err := parseFlags(fs, args, e.stderr); err != nil {
		return err
	}
	if err := checkLoopback(*addr); err != nil {
		return usageError{fmt.Errorf("-addr: %w", err)}
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "listening %s\n", lis.Addr())
	return loadtest.ServeNoop(ctx, lis)
}

// checkLoopback accepts host:port addresses on the loopback interface only:
// the benchmark never listens anywhere else.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback IP address", host)
	}
	return nil
}

// setupCommand writes fresh keys, the JWKS and a service configuration into
// a directory, so that a service started by hand can be measured with
// run -target -dir.
func setupCommand(args []string, e env) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write the keys, JWKS and config into (created if missing)")
	if err := parseFlags(fs, args, e.stderr); err != nil {
		return err
	}
	if *dir == "" {
		return usageError{errors.New("-dir is required")}
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	// The secret is not written down: it travels in the environment.
	keys, err := loadtest.GenerateKeys([]byte("unused"))
	if err != nil {
		return err
	}
	s, err := loadtest.WriteSetup(*dir, keys)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, `wrote %s and %s
start the service, with %s set to the same value for it and for the load test, e.g.:
  export %s=$(head -c 32 /dev/urandom | base64)
  extauthz serve --config %s --grpc-addr 127.0.0.1:9191 --ops-addr 127.0.0.1:9090
then measure it:
  extauthz-loadtest -target 127.0.0.1:9191 -dir %s
`, s.ConfigFile, s.JWKSFile, loadtest.SecretEnv, loadtest.SecretEnv, s.ConfigFile, s.Dir)
	return nil
}
