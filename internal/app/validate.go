package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/extauthz/extauthz/internal/configcheck"
)

var validateCmd = command{
	name:    "validate",
	summary: "Check a configuration file as serve would, short of network calls: syntax, keys, values,\nenvironment variables and the files it names (secrets, JWK sets, PEM keys, CA bundles,\nactor tokens). Every problem is listed at once with its line; exit 1 when there is one.",
	examples: []string{
		"extauthz validate --config /etc/extauthz/config.yaml",
		"extauthz validate --online --config config.yaml   # also fetch JWK sets and discovery documents",
	},
}

func validateCommand(ctx context.Context, args []string, env Env) error {
	fs := validateCmd.flagSet()
	path := fs.String("config", "", "configuration file to check (required)")
	online := fs.Bool("online", false, "also fetch the JWK set URLs and discovery documents the file names")
	timeout := fs.Duration("timeout", 10*time.Second, "with --online, give up on a fetch after this long")
	if err := validateCmd.parseFlags(fs, args, env.Stdout, 0); err != nil {
		return err
	}
	if *path == "" {
		return validateCmd.usageErr(fs, errors.New("validate: --config is required"))
	}
	o := configcheck.Options{Getenv: env.Getenv, Online: *online, HTTPClient: &http.Client{Timeout: *timeout}}
	r := configcheck.File(ctx, *path, o)
	for _, w := range r.Warnings {
		fmt.Fprintf(env.Stderr, "%s: warning: %s\n", *path, w)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(env.Stderr, "%s: %s:\n", *path, plural(len(r.Problems), "problem"))
		for _, p := range r.Problems {
			fmt.Fprintf(env.Stderr, "  %s\n", p)
		}
		return errReported
	}
	fmt.Fprintf(env.Stdout, "%s: ok (%s, %s)\n", *path, plural(len(r.File.Issuers), "issuer"), plural(len(r.File.Routes), "route"))
	return nil
}

// plural writes n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
