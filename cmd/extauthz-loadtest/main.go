// Command extauthz-loadtest checks extauthz's performance targets: it runs
// the service and a do-nothing ext_authz server as separate processes on
// loopback, puts the same load on each in turn, and reports the service's
// throughput and p99 latency as ratios of the do-nothing server's.
//
//	extauthz-loadtest [flags]          start bin/extauthz and measure (run -h)
//	extauthz-loadtest noop [-addr A]   serve the do-nothing ext_authz server
//	extauthz-loadtest setup -dir DIR   write keys and a config for -target
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], defaultEnv())
	stop()
	os.Exit(code)
}
