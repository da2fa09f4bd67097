package app

import (
	"context"
	"errors"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/extauthz/extauthz/internal/adminapi"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
)

// adminBackend serves the admin API from the running pipeline.
type adminBackend struct {
	pipeline *check.Pipeline
	started  time.Time
}

var _ adminapi.Backend = (*adminBackend)(nil)

func (b *adminBackend) InvalidateSession(ctx context.Context, session string) (adminapi.Counts, error) {
	return counts(b.pipeline.InvalidateSession(ctx, session)), nil
}

func (b *adminBackend) RevokeSubject(ctx context.Context, issuer, subject string) (adminapi.Counts, error) {
	user, err := b.pipeline.Policy().User(issuer, subject)
	if err != nil {
		return adminapi.Counts{}, status.Error(codes.InvalidArgument, err.Error())
	}
	d, err := b.pipeline.RevokeSubject(ctx, user)
	// Cached introspections of the subject's opaque tokens go too: the
	// next use asks the authorization server again.
	b.pipeline.Policy().DropIntrospections(subject)
	if err != nil {
		return adminapi.Counts{}, status.Error(codes.Unavailable, "the user is revoked on this replica only: the shared store is unavailable; revoke again")
	}
	return counts(d), nil
}

func (b *adminBackend) RevokeAPIKey(ctx context.Context, issuer, id string) (adminapi.KeyRevocation, error) {
	r, err := b.pipeline.RevokeAPIKey(ctx, issuer, id)
	switch {
	case errors.Is(err, check.ErrSharedUnavailable):
		return adminapi.KeyRevocation{}, status.Error(codes.Unavailable, "the key is revoked on this replica only: the shared store is unavailable; revoke again")
	case err != nil:
		return adminapi.KeyRevocation{}, status.Error(codes.InvalidArgument, err.Error())
	}
	return adminapi.KeyRevocation{Dropped: counts(r.Invalidated), Until: r.Until, Known: r.Known}, nil
}

func (b *adminBackend) Explain(ctx context.Context, req *authv3.CheckRequest) (adminapi.Explanation, error) {
	return explain(ctx, b.pipeline, req), nil
}

// explain decides req without side effects; `check` and the admin API's
// Explain both print what it returns.
func explain(ctx context.Context, pl *check.Pipeline, req *authv3.CheckRequest) adminapi.Explanation {
	in := envoyauthz.Input(req)
	v, steps := pl.Explain(ctx, &in)
	e := adminapi.Explanation{
		Route: v.Route, Outcome: v.Outcome.String(), Allowed: v.Outcome.Allow(), HTTPStatus: v.Status(),
		Description: v.Description, Response: envoyauthz.Response(&v),
	}
	for _, s := range steps {
		e.Steps = append(e.Steps, adminapi.Step{Name: s.Name, Outcome: s.Outcome, Detail: s.Detail})
	}
	return e
}

func (b *adminBackend) Stats(context.Context) (adminapi.Stats, error) {
	gen, loaded := b.pipeline.Generation()
	v := b.pipeline.CacheStats()
	return adminapi.Stats{
		Version: version(), StartedAt: b.started, ConfigGeneration: gen, ConfigLoadedAt: loaded,
		Caches: []adminapi.CacheStats{
			{Name: adminapi.CacheVerdicts, Hits: v.Hits, Misses: v.Misses, Evictions: v.Evictions, Size: v.Size},
			{Name: adminapi.CacheSessions, Size: b.pipeline.SessionCount()},
			{Name: adminapi.CacheElicitations, Size: b.pipeline.ElicitationCount()},
			exchanged(b.pipeline),
		},
	}, nil
}

func counts(d check.Invalidated) adminapi.Counts {
	return adminapi.Counts{Verdicts: d.Verdicts, SessionBindings: d.SessionBindings, ExchangedTokens: d.ExchangedTokens, Elicitations: d.Elicitations}
}

func exchanged(pl *check.Pipeline) adminapi.CacheStats {
	s := exchangedStats(pl)
	return adminapi.CacheStats{Name: adminapi.CacheExchangedTokens, Hits: s.Hits, Misses: s.Misses, Evictions: s.Evictions, Size: s.Size}
}
