package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/extauthz/extauthz/internal/adminapi"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
)

// errDenied makes `extauthz check` exit non-zero for a denied request.
var errDenied = errors.New("denied")

var checkCmd = command{
	name: "check",
	args: "REQUEST.json",
	summary: "Decide a CheckRequest offline (protojson; an AttributeContext or an OPA-style {\"attributes\": ...}\n" +
		"also work) and print the decision, every step and the response Envoy would apply, in the\n" +
		"format of `extauthz admin explain`. Exit 1 when the request is denied.",
	examples: []string{"extauthz check --config examples/compose/extauthz.yaml examples/requests/allowed.json"},
}

// checkCommand evaluates a CheckRequest offline: the fastest way to find out
// why a policy decides what it does.
func checkCommand(ctx context.Context, args []string, env Env) error {
	fs := checkCmd.flagSet()
	cfgPath := fs.String("config", "", "configuration file (default: the built-in default, JWT_SECRET and HS256)")
	at := fs.String("time", "", "evaluate as of this RFC 3339 time (default: now), e.g. to replay an old capture")
	wait := fs.Duration("wait", 10*time.Second, "how long to wait for remote key sets to load")
	asJSON := fs.Bool("json", false, "print the explanation as protojson (an extauthz.admin.v1.ExplainResponse)")
	if err := checkCmd.parseFlags(fs, args, env.Stdout, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return checkCmd.usageErr(fs, errors.New("check: want exactly one REQUEST.json"))
	}
	now := time.Now
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return checkCmd.usageErr(fs, fmt.Errorf("--time: %w", err))
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
	cfg, _, err := loadConfig(*cfgPath, env, warnings(env))
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
	e := explain(ctx, pl, req)
	resp, err := e.Proto()
	if err != nil {
		return err
	}
	if err := adminapi.PrintExplanation(env.Stdout, resp, *asJSON); err != nil {
		return err
	}
	if !e.Allowed {
		return errDenied
	}
	return nil
}

// warnings logs only warnings, as text on stderr: the commands besides serve
// say loudly when they run on the development secret, as serve does.
func warnings(env Env) *slog.Logger {
	return slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
