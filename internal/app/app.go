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

// errReported says the command has printed why it failed (exit status 1).
var errReported = errors.New("problems reported")

// Main runs the command line args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if err := run(ctx, args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errDenied) || errors.Is(err, errReported) {
			return 1 // the decision or the problems are already printed
		}
		fmt.Fprintf(env.Stderr, "extauthz: %v\n", err)
		var wh withHelp
		if errors.As(err, &wh) {
			fmt.Fprintf(env.Stderr, "\n%s", wh.help)
		}
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		if errors.Is(err, adminapi.ErrUsage) {
			fmt.Fprintf(env.Stderr, "\n%s", adminapi.Usage)
			return 2
		}
		return 1
	}
	return 0
}

func run(ctx context.Context, args []string, env Env) error {
	cmd := "serve"
	if len(args) > 0 && isHelp(args[0]) {
		usage(env.Stdout)
		return flag.ErrHelp
	}
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
	case "apikey":
		return apikeyCommand(args, env)
	case "check":
		return checkCommand(ctx, args, env)
	case "admin":
		err := adminapi.RunCLI(ctx, args, env.Stdout, env.Stderr)
		if errors.Is(err, adminapi.ErrDenied) {
			return errDenied
		}
		return err
	case "envoy-check":
		return envoyCheckCommand(args, env)
	case "version":
		return versionCommand(args, env)
	case "help":
		usage(env.Stdout)
		return nil
	default:
		var b strings.Builder
		usage(&b)
		return withHelp{error: usageError{fmt.Errorf("unknown command %q", cmd)}, help: b.String()}
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `extauthz: Envoy ext_authz and forward-auth server for MCP servers and A2A agents

Usage:
  extauthz [serve] [flags]              serve ext_authz (gRPC), forward-auth (HTTP) and the operational endpoints
  extauthz validate [--online] --config FILE
                                        check a configuration file as serve would, listing every problem
  extauthz token --sub USER [flags]     print a token the built-in default accepts
  extauthz apikey new --subject S [flags]
                                        generate an API key and its keys-file entry
  extauthz check [--config FILE] [--json] REQUEST.json
                                        decide a CheckRequest offline and show every step
  extauthz admin [--addr H:P] invalidate-session ID | revoke-subject --issuer ISS SUB | explain REQUEST.json | stats
                                        call the admin API of a running service
  extauthz envoy-check FILE...          check Envoy, Istio and Envoy Gateway configuration offline
  extauthz version                      print the version

Run "extauthz COMMAND -h" for a command's flags and an example.

Example:
  JWT_SECRET=$(head -c 32 /dev/urandom | base64) extauthz serve --log-format text
`)
}

var versionCmd = command{name: "version", summary: "Print the version.", examples: []string{"extauthz version"}}

func versionCommand(args []string, env Env) error {
	fs := versionCmd.flagSet()
	if err := versionCmd.parseFlags(fs, args, env.Stdout, 0); err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, version())
	return nil
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

// newLogger builds the service's logger: JSON or text on stderr.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level: %q is not one of %s", level, strings.Join(logLevels, ", "))}
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
