package loadtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"
)

// Target is what the service must reach relative to the do-nothing server
// measured in the same run.
type Target struct {
	// MinRPSRatio is the least service/noop throughput ratio that passes.
	MinRPSRatio float64 `json:"min_rps_ratio"`
	// MaxP99Ratio, when positive, is the largest service/noop p99 latency
	// ratio that passes.
	MaxP99Ratio float64 `json:"max_p99_ratio,omitempty"`
}

func (t Target) String() string {
	s := fmt.Sprintf("rps>=%.2f", t.MinRPSRatio)
	if t.MaxP99Ratio > 0 {
		s += fmt.Sprintf(" p99<=%.2fx", t.MaxP99Ratio)
	}
	return s
}

// TokenPlan tells a Scenario which measurement a token source is for.
type TokenPlan struct {
	// Service is false for the do-nothing server, true for the service.
	Service bool
	// MaxRequests is, for the service, an upper estimate of the requests its
	// measurement will send, warm-up included: the do-nothing server's
	// throughput over the same time, with headroom. A source that hands out
	// each token once needs that many. Zero for the do-nothing server.
	MaxRequests int
}

// Scenario is one kind of traffic and the target the service must meet
// under it.
type Scenario struct {
	Name        string
	Description string
	Target      Target
	// Tokens returns the token source for one measurement. It is called
	// before that measurement's clock starts, first for the do-nothing
	// server and then for the service, so all signing happens outside the
	// measurements.
	Tokens func(ctx context.Context, plan TokenPlan) (TokenSource, error)
}

// ScenarioOptions size the standard scenarios.
type ScenarioOptions struct {
	// PoolSize is the number of distinct RS256 tokens cycled (10,000 when
	// zero).
	PoolSize int
	// FreshMax caps the ES256 tokens signed for the every-token-new
	// scenario, which bounds memory and signing time (400,000 when zero).
	// When the service uses them all up, its measurement ends early and the
	// report says so.
	FreshMax int
	// Log reports token signing, which can take seconds.
	Log *slog.Logger
}

// The standard scenarios' names, in the order they run.
const (
	ScenarioHS256 = "hs256-one"
	ScenarioRS256 = "rs256-pool"
	ScenarioES256 = "es256-fresh"
)

// StandardScenarios returns the three scenarios of the service's
// performance targets: one HS256 token for everything; a pool of distinct
// RS256 tokens cycled, so each is verified once and then served from the
// cache; a new ES256 token for every request, so nothing is cached. Their
// Tokens functions keep what they signed for the do-nothing server to reuse
// it for the service: give each Runner.Run a fresh set.
func StandardScenarios(m *Minter, opts ScenarioOptions) []Scenario {
	if opts.PoolSize == 0 {
		opts.PoolSize = 10_000
	}
	if opts.FreshMax == 0 {
		opts.FreshMax = 400_000
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mint := func(ctx context.Context, alg Alg, first, count int) ([]string, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		toks, err := m.Tokens(alg, first, count)
		if err == nil && count > 1 {
			log.Info("signed tokens", slog.String("alg", string(alg)), slog.Int("count", count), slog.Duration("took", time.Since(start).Round(time.Millisecond)))
		}
		return toks, err
	}
	return []Scenario{
		{
			Name:        ScenarioHS256,
			Description: "one valid HS256 token on every request",
			Target:      Target{MinRPSRatio: 0.90, MaxP99Ratio: 1.2},
			Tokens: func(ctx context.Context, _ TokenPlan) (TokenSource, error) {
				toks, err := mint(ctx, HS256, 0, 1)
				if err != nil {
					return nil, err
				}
				return NewFixed(toks[0]), nil
			},
		},
		{
			Name:        ScenarioRS256,
			Description: fmt.Sprintf("%d distinct RS256 tokens cycled (cached after first use)", opts.PoolSize),
			Target:      Target{MinRPSRatio: 0.85},
			Tokens:      poolTokens(mint, opts.PoolSize),
		},
		{
			Name:        ScenarioES256,
			Description: "a new ES256 token on every request (nothing cached)",
			Target:      Target{MinRPSRatio: 0.40},
			Tokens:      freshTokens(mint, opts.FreshMax),
		},
	}
}

type mintFunc func(ctx context.Context, alg Alg, first, count int) ([]string, error)

// poolTokens signs the RS256 pool once and cycles it for both servers.
func poolTokens(mint mintFunc, size int) func(context.Context, TokenPlan) (TokenSource, error) {
	var pool []string
	return func(ctx context.Context, _ TokenPlan) (TokenSource, error) {
		if pool == nil {
			toks, err := mint(ctx, RS256, 0, size)
			if err != nil {
				return nil, err
			}
			pool = toks
		}
		return NewPool(pool), nil
	}
}

// freshNoop is how many fresh-scenario tokens the do-nothing server cycles:
// it does not care whether it has seen a token, but it should get requests
// of the same size.
const freshNoop = 20_000

// freshTokens gives the do-nothing server a cycled sample of ES256 tokens,
// then signs enough more for the service to see each token once.
func freshTokens(mint mintFunc, maxTokens int) func(context.Context, TokenPlan) (TokenSource, error) {
	var signed []string
	return func(ctx context.Context, plan TokenPlan) (TokenSource, error) {
		want := min(freshNoop, maxTokens)
		if plan.Service {
			want = min(max(plan.MaxRequests, want), maxTokens)
		}
		if n := want - len(signed); n > 0 {
			more, err := mint(ctx, ES256, len(signed), n)
			if err != nil {
				return nil, err
			}
			signed = append(signed, more...)
		}
		if !plan.Service {
			return NewPool(signed[:want]), nil
		}
		seq := NewSequence(signed[:want])
		signed = nil // the sequence holds what it needs
		return seq, nil
	}
}

// Runner measures scenarios: for each, the do-nothing server and then the
// service, back to back, with the same load.
type Runner struct {
	// NoopAddr and ServiceAddr are the gRPC addresses of the do-nothing
	// server and of the service.
	NoopAddr    string
	ServiceAddr string
	// Load is the load of every measurement; Addr and Tokens are filled in
	// per measurement.
	Load Config
	Log  *slog.Logger
	// Rounds alternates the two servers this many times per scenario, each
	// slice lasting Duration/Rounds, and adds the slices up: a machine whose
	// speed drifts during the run then affects both alike (default 1).
	Rounds int
}

// Run measures each scenario in turn and returns the report. An error means
// a measurement could not be made; a service that misses its targets is a
// failing report, not an error.
func (r *Runner) Run(ctx context.Context, scenarios []Scenario) (*Report, error) {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if r.NoopAddr == "" || r.ServiceAddr == "" {
		return nil, errors.New("loadtest: NoopAddr and ServiceAddr are required")
	}
	load := r.Load.withDefaults()
	rep := &Report{
		Callers:     load.Callers,
		Connections: load.Connections,
		Warmup:      load.Warmup,
		Duration:    load.Duration,
		MaxRequests: load.MaxRequests,
	}
	rounds := max(r.Rounds, 1)
	for _, sc := range scenarios {
		noopTokens, err := sc.Tokens(ctx, TokenPlan{})
		if err != nil {
			return nil, fmt.Errorf("scenario %s: tokens for noop: %w", sc.Name, err)
		}
		var noop, svc *Result
		var svcTokens TokenSource
		for round := range rounds {
			n, err := r.measure(ctx, log, sc, "noop", r.NoopAddr, noopTokens, rounds)
			if err != nil {
				return nil, err
			}
			noop = merge(noop, n)
			if round == 0 {
				// Sized from the first do-nothing slice, for every slice.
				plan := TokenPlan{Service: true, MaxRequests: expectedRequests(n, load) * rounds}
				if svcTokens, err = sc.Tokens(ctx, plan); err != nil {
					return nil, fmt.Errorf("scenario %s: tokens for service: %w", sc.Name, err)
				}
			}
			v, err := r.measure(ctx, log, sc, "service", r.ServiceAddr, svcTokens, rounds)
			if err != nil {
				return nil, err
			}
			svc = merge(svc, v)
		}
		rep.Scenarios = append(rep.Scenarios, Evaluate(sc, noop, svc))
	}
	return rep, nil
}

// merge adds measurement b to a (nil: b): requests, errors and elapsed time
// add up, latencies merge.
func merge(a, b *Result) *Result {
	if a == nil {
		return b
	}
	out := *a
	out.Elapsed += b.Elapsed
	out.Requests += b.Requests
	out.Errors += b.Errors
	out.TokensExhausted = a.TokensExhausted || b.TokensExhausted
	kinds := map[string]int{}
	for i, k := range out.ErrorKinds {
		kinds[k.Kind] = i
	}
	out.ErrorKinds = append([]ErrorKind(nil), a.ErrorKinds...)
	for _, k := range b.ErrorKinds {
		if i, ok := kinds[k.Kind]; ok {
			out.ErrorKinds[i].Count += k.Count
		} else {
			out.ErrorKinds = append(out.ErrorKinds, k)
		}
	}
	if out.Elapsed > 0 {
		out.RPS = float64(out.Requests) / out.Elapsed.Seconds()
	}
	if a.Latency != nil && b.Latency != nil {
		h := &Histogram{}
		h.Merge(a.Latency)
		h.Merge(b.Latency)
		out.Latency = h
		out.P50, out.P90, out.P99 = h.Quantile(0.50), h.Quantile(0.90), h.Quantile(0.99)
		out.Max, out.Mean = h.Max(), h.Mean()
	}
	return &out
}

func (r *Runner) measure(ctx context.Context, log *slog.Logger, sc Scenario, server, addr string, tokens TokenSource, rounds int) (*Result, error) {
	cfg := r.Load
	cfg.Addr, cfg.Tokens = addr, tokens
	if rounds > 1 {
		cfg.Duration /= time.Duration(rounds)
		if cfg.MaxRequests > 0 {
			cfg.MaxRequests = max(cfg.MaxRequests/uint64(rounds), 1)
		}
	}
	log.Info("measuring", slog.String("scenario", sc.Name), slog.String("server", server), slog.String("addr", addr))
	res, err := Run(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %s: %w", sc.Name, server, err)
	}
	log.Info("measured", slog.String("scenario", sc.Name), slog.String("server", server),
		slog.Int("rps", int(res.RPS)), slog.Duration("p99", res.P99), slog.Uint64("errors", res.Errors))
	return res, nil
}

// expectedRequests estimates, from the do-nothing server's throughput, the
// most requests the service's measurement can send: the service is not
// expected to outrun it by a quarter.
func expectedRequests(noop *Result, load Config) int {
	total := (load.Warmup + load.Duration).Seconds()
	if load.MaxRequests > 0 {
		total = load.Warmup.Seconds() + min(load.Duration.Seconds(), float64(load.MaxRequests)/max(noop.RPS, 1))
	}
	return int(math.Ceil(noop.RPS*total*1.25)) + load.Callers
}

// Evaluate compares the service's measurement with the do-nothing server's
// against the scenario's target.
func Evaluate(sc Scenario, noop, svc *Result) ScenarioResult {
	out := ScenarioResult{
		Name:        sc.Name,
		Description: sc.Description,
		Target:      sc.Target,
		Noop:        noop,
		Service:     svc,
	}
	if noop.RPS > 0 {
		out.RPSRatio = svc.RPS / noop.RPS
	}
	if noop.P99 > 0 {
		out.P99Ratio = float64(svc.P99) / float64(noop.P99)
	}
	var fails []string
	if noop.Errors > 0 {
		fails = append(fails, fmt.Sprintf("do-nothing server: %d errors (the load tool or the machine is broken): %s", noop.Errors, describeErrors(noop)))
	}
	if svc.Errors > 0 {
		fails = append(fails, fmt.Sprintf("service: %d errors: %s", svc.Errors, describeErrors(svc)))
	}
	if noop.Requests == 0 || svc.Requests == 0 {
		fails = append(fails, "no request was answered OK by one of the servers")
	}
	if out.RPSRatio < sc.Target.MinRPSRatio {
		fails = append(fails, fmt.Sprintf("throughput %.2f of the do-nothing server's, below %.2f", out.RPSRatio, sc.Target.MinRPSRatio))
	}
	if sc.Target.MaxP99Ratio > 0 && (out.P99Ratio > sc.Target.MaxP99Ratio || out.P99Ratio == 0) {
		fails = append(fails, fmt.Sprintf("p99 latency %.2f times the do-nothing server's, above %.2f", out.P99Ratio, sc.Target.MaxP99Ratio))
	}
	out.Pass = len(fails) == 0
	out.Failures = fails
	return out
}

func describeErrors(r *Result) string {
	if len(r.ErrorKinds) == 0 {
		return "unknown"
	}
	var parts []string
	for _, k := range r.ErrorKinds {
		p := fmt.Sprintf("%s x%d", k.Kind, k.Count)
		if k.Example != "" {
			p += fmt.Sprintf(" (%q)", k.Example)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
