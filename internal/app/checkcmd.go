package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
)

// errDenied makes `extauthz check` exit non-zero for a denied request.
var errDenied = errors.New("denied")

// checkCommand evaluates a CheckRequest offline: the fastest way to find out
// why a policy decides what it does.
func checkCommand(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file (default: the built-in default)")
	at := fs.String("time", "", "evaluate as of this RFC 3339 time (default: now), e.g. to replay an old capture")
	wait := fs.Duration("wait", 10*time.Second, "how long to wait for remote key sets to load")
	fs.SetOutput(env.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usageError{errors.New("check: want exactly one REQUEST.json")}
	}
	now := time.Now
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return usageError{fmt.Errorf("--time: %w", err)}
		}
		now = func() time.Time { return t }
	}
	b, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	req, err := envoyauthz.DecodeCheckRequest(b)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	quiet := slog.New(slog.DiscardHandler)
	cfg, _, err := loadConfig(*cfgPath, env, quiet)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := check.Compile(cctx, cfg, check.Deps{Logger: quiet, Getenv: env.Getenv, Now: now})
	if err != nil {
		return err
	}
	defer p.Close()
	for deadline := time.Now().Add(*wait); !p.Ready() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	pl, err := check.New(p, check.Options{Logger: quiet, Now: now})
	if err != nil {
		return err
	}
	in := envoyauthz.Input(req)
	v, steps := pl.Explain(ctx, &in)
	w := env.Stdout
	fmt.Fprintf(w, "decision: %s (HTTP %d)", v.Outcome, v.Status())
	if v.Description != "" {
		fmt.Fprintf(w, ": %s", v.Description)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "steps:")
	for i, s := range steps {
		fmt.Fprintf(w, "  %d. %-10s %-18s %s\n", i+1, s.Name, s.Outcome, s.Detail)
	}
	resp := envoyauthz.Response(&v)
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(resp)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "response:\n%s\n", out)
	if !v.Outcome.Allow() {
		return errDenied
	}
	return nil
}
