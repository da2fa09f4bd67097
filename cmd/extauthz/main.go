// Command extauthz is the Envoy ext_authz server for MCP servers and A2A
// agents. See the README for its commands and configuration.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/extauthz/extauthz/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], app.Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
