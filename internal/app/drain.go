package app

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/metrics"
)

// drain keeps the listeners serving for period after SIGTERM, while
// readiness already says NOT_SERVING: the proxy's health checks and
// Kubernetes' endpoint removal take a moment, and checks they still send
// here must be answered, not refused. A listener failing ends it early.
// The forward-auth front end stops keeping connections alive, so proxies
// open their next ones to other replicas.
func drain(log *slog.Logger, period time.Duration, errc <-chan error, front *http.Server) {
	if period <= 0 {
		return
	}
	if front != nil {
		front.SetKeepAlivesEnabled(false)
	}
	log.Info("shutting down: not ready, answering checks for the drain period", slog.Duration("drain_period", period))
	t := time.NewTimer(period)
	defer t.Stop()
	select {
	case <-t.C:
	case <-errc:
	}
}

// stopServing stops the listeners and lets the checks in flight finish
// within timeout; connections still open then are closed. The operators'
// servers (admin, ops) stop last, so probes and scrapes see the shutdown.
func stopServing(ctx context.Context, log *slog.Logger, timeout time.Duration, gs *grpc.Server, front *http.Server, operators ...*http.Server) {
	log.Info("shutting down: finishing in-flight checks", slog.Duration("shutdown_timeout", timeout))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	drained := make(chan struct{})
	go func() { gs.GracefulStop(); close(drained) }()
	if front != nil {
		front.SetKeepAlivesEnabled(false)
		if front.Shutdown(sctx) != nil {
			_ = front.Close()
		}
	}
	select {
	case <-drained:
	case <-sctx.Done():
		log.Warn("drain timed out; closing remaining connections")
		gs.Stop()
	}
	for _, srv := range operators {
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
	}
}

// newKeySources keeps issuers' key sources across reloads. A key the
// issuer drops from its set ends the cached verdicts of tokens signed with
// it (the pipeline is read through current, set once it exists).
func newKeySources(ctx context.Context, cfg *config.File, client *http.Client, log *slog.Logger, m *metrics.Metrics, current *atomic.Pointer[check.Pipeline]) *jwtauth.Sources {
	return jwtauth.NewSources(ctx, jwtauth.Options{
		HTTPClient: client, Logger: log, OnFetch: m.JWKSFetch, MaxWaiting: cfg.Limits.MaxWaitingPerDependency,
		OnKeysRemoved: func(issuer string, kids []string) {
			pl := current.Load()
			if pl == nil {
				return
			}
			if n := pl.DropKeys(issuer, kids); n > 0 {
				m.VerdictsDropped("key_removed", n)
				log.Info("cached verdicts dropped: their signing key left the issuer's key set", slog.String("issuer", issuer), slog.Int("verdicts", n))
			}
		},
	})
}
