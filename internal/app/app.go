// Package app is the extauthz command: it parses arguments, wires the
// pipeline to its front ends and runs them until told to stop. main only
// calls Main, so start-up and shutdown are testable in-process.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/extauthz/extauthz/internal/adminapi"
)

// Version is set at build time with -ldflags "-X .../internal/app.Version=v1.2.3".
var Version = ""

// Env is what the command reads from its surroundings.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// Main runs the command line args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if err := run(ctx, args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errDenied) {
			return 1 // the decision is already printed
		}
		fmt.Fprintf(env.Stderr, "extauthz: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func run(ctx context.Context, args []string, env Env) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serveCommand(ctx, args, env)
	case "validate":
		return validateCommand(ctx, args, env)
	case "token":
		return tokenCommand(args, env)
	case "check":
		return checkCommand(ctx, args, env)
	case "admin":
		err := adminapi.RunCLI(ctx, args, env.Stdout, env.Stderr)
		switch {
		case errors.Is(err, adminapi.ErrUsage):
			return usageError{err}
		case errors.Is(err, adminapi.ErrDenied):
			return errDenied
		}
		return err
	case "version":
		fmt.Fprintln(env.Stdout, version())
		return nil
	case "help":
		usage(env.Stdout)
		return nil
	default:
		usage(env.Stderr)
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `extauthz: Envoy ext_authz server for MCP servers and A2A agents

Usage:
  extauthz [serve] [flags]            serve ext_authz v3 (gRPC) and the admin endpoints
  extauthz validate --config FILE     check a configuration file
  extauthz token --sub USER [flags]   print a token the built-in default accepts
  extauthz check [--config FILE] REQUEST.json
                                      decide a CheckRequest offline and show every step
  extauthz admin [--addr H:P] invalidate-session ID | revoke-subject --issuer ISS SUB | explain REQUEST.json | stats
                                      call the admin API of a running service
  extauthz version                    print the version

Run "extauthz COMMAND -h" for a command's flags.
`)
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

// parseFlags parses args, collecting every problem.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
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

// newLogger builds the service's logger: JSON or text on stderr.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Errorf("--log-format: %q is neither json nor text", format)}
}
