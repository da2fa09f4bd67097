package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
)

func validateCommand(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file to check")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return usageError{errors.New("validate: --config is required")}
	}
	f, err := config.Load(*path)
	if err != nil {
		return fmt.Errorf("%s:\n%w", *path, err)
	}
	// Compiling resolves secrets and checks what the schema cannot; it starts
	// no listener, and key fetches stop with ctx.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := check.Compile(cctx, f, check.Deps{Logger: slog.New(slog.DiscardHandler), Getenv: env.Getenv})
	if err != nil {
		return fmt.Errorf("%s:\n%w", *path, err)
	}
	p.Close()
	fmt.Fprintf(env.Stdout, "%s: ok (%d issuers, %d routes)\n", *path, len(f.Issuers), len(f.Routes))
	return nil
}
