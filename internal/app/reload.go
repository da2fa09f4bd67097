package app

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/metrics"
)

// reloader replaces the pipeline's policy when the configuration file
// changes (polled, so that Kubernetes' ConfigMap symlink swaps are seen) or
// on SIGHUP. A new file is parsed, validated and compiled completely before
// it is swapped in; an invalid one, or one that would rename the users of
// an issuer (check.Pipeline.Swap), is logged and counted while the old
// policy keeps serving.
type reloader struct {
	path     string
	pipeline *check.Pipeline
	deps     check.Deps
	metrics  *metrics.Metrics
	log      *slog.Logger
	// lifetime bounds the background work of compiled policies.
	lifetime context.Context
	// grace is how long a replaced policy stays open for checks in flight.
	grace time.Duration

	// publish, when set, tells the other replicas a new file was loaded.
	publish func()

	mu   sync.Mutex
	last [sha256.Size]byte
}

// reload loads the file. With force false an unchanged file is left alone.
func (r *reloader) reload(force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := os.ReadFile(r.path)
	if err != nil {
		return r.failed(err)
	}
	sum := sha256.Sum256(b)
	if !force && sum == r.last {
		return nil
	}
	f, err := config.Parse(b)
	if err != nil {
		r.last = sum // do not retry the same broken file every tick
		return r.failed(err)
	}
	p, err := check.Compile(r.lifetime, f, r.deps)
	if err != nil {
		r.last = sum
		return r.failed(err)
	}
	r.last = sum
	old, err := r.pipeline.Swap(p)
	if err != nil {
		p.Close()
		return r.failed(err)
	}
	// Key sources the new policy does not share stop refreshing now (50
	// reloads must not mean 50 sources fetching); the rest of the old
	// policy stays open for the checks still using it.
	old.Retire()
	time.AfterFunc(r.grace, old.Close)
	r.metrics.Reloaded(nil)
	if r.publish != nil {
		r.publish()
	}
	r.log.Info("configuration reloaded", slog.String("file", r.path), slog.Int("routes", len(f.Routes)), slog.Int("issuers", len(f.Issuers)))
	return nil
}

func (r *reloader) failed(err error) error {
	r.metrics.Reloaded(err)
	r.log.Error("configuration rejected; the previous one keeps serving", slog.String("file", r.path), slog.String("error", err.Error()))
	return fmt.Errorf("reload %s: %w", r.path, err)
}

// remember records the content the service started with.
func (r *reloader) remember(b []byte) { r.last = sha256.Sum256(b) }

// watch polls the file until ctx ends.
func (r *reloader) watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = r.reload(false)
		}
	}
}
