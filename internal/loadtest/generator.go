package loadtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Defaults of Config.
const (
	DefaultCallers        = 16
	DefaultConnections    = 2
	DefaultGrace          = 5 * time.Second
	DefaultConnectTimeout = 10 * time.Second
)

// Config is one measurement: how hard to call which server, for how long.
type Config struct {
	// Addr is the host:port of the ext_authz gRPC server.
	Addr string
	// Callers is the number of concurrent callers, each with one request in
	// flight at a time (DefaultCallers when zero).
	Callers int
	// Connections is the number of gRPC client connections the callers
	// share, caller i using connection i mod Connections (DefaultConnections
	// when zero).
	Connections int
	// Warmup is how long the callers run before measuring starts; nothing
	// from it is recorded.
	Warmup time.Duration
	// Duration is how long the measurement lasts. Required.
	Duration time.Duration
	// MaxRequests, when positive, ends the measurement after that many
	// measured requests even if Duration has not passed.
	MaxRequests uint64
	// Grace bounds how long calls still in flight when the measurement ends
	// may take before they are cancelled (and counted as errors)
	// (DefaultGrace when zero).
	Grace time.Duration
	// ConnectTimeout bounds establishing the connections
	// (DefaultConnectTimeout when zero).
	ConnectTimeout time.Duration
	// Tokens supplies the Authorization header of each request. Required.
	Tokens TokenSource
	// Now is the clock latencies are read from; time.Now when nil.
	Now func() time.Time
}

// withDefaults returns c with its zero fields set to their defaults.
func (c *Config) withDefaults() Config {
	out := *c
	if out.Callers == 0 {
		out.Callers = DefaultCallers
	}
	if out.Connections == 0 {
		out.Connections = DefaultConnections
	}
	if out.Grace == 0 {
		out.Grace = DefaultGrace
	}
	if out.ConnectTimeout == 0 {
		out.ConnectTimeout = DefaultConnectTimeout
	}
	if out.Now == nil {
		out.Now = time.Now
	}
	return out
}

// validate reports every problem of a Config that has its defaults.
func (c *Config) validate() error {
	var errs []error
	if c.Addr == "" {
		errs = append(errs, errors.New("loadtest: Addr is required"))
	}
	if c.Callers < 1 || c.Connections < 1 {
		errs = append(errs, errors.New("loadtest: Callers and Connections must be positive"))
	}
	if c.Connections > c.Callers {
		errs = append(errs, fmt.Errorf("loadtest: %d connections for %d callers would leave some idle", c.Connections, c.Callers))
	}
	if c.Duration <= 0 {
		errs = append(errs, errors.New("loadtest: Duration must be positive"))
	}
	if c.Warmup < 0 || c.Grace < 0 || c.ConnectTimeout < 0 {
		errs = append(errs, errors.New("loadtest: Warmup, Grace and ConnectTimeout must not be negative"))
	}
	if c.Tokens == nil {
		errs = append(errs, errors.New("loadtest: Tokens is required"))
	}
	return errors.Join(errs...)
}

// Result is what one measurement saw. Only requests answered OK count
// towards throughput and latency: a denial or a failed call is an error, so a
// fast wrong answer never looks like a fast right one.
type Result struct {
	Addr        string `json:"addr"`
	Callers     int    `json:"callers"`
	Connections int    `json:"connections"`
	// Elapsed runs from the start of the measurement until its last request
	// came back.
	Elapsed time.Duration `json:"elapsed_ns"`
	// Requests is the number of measured requests answered OK.
	Requests uint64 `json:"ok_requests"`
	// Errors is the number of measured requests denied or failed.
	Errors uint64 `json:"errors"`
	// ErrorKinds breaks Errors down, most frequent first.
	ErrorKinds []ErrorKind `json:"error_kinds,omitempty"`
	// RPS is Requests per second of Elapsed.
	RPS float64 `json:"rps"`
	// Latencies of the OK requests.
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	Max  time.Duration `json:"max_ns"`
	Mean time.Duration `json:"mean_ns"`
	// TokensExhausted is set when the token source ran out and ended the
	// measurement before Duration.
	TokensExhausted bool `json:"tokens_exhausted,omitempty"`
	// Latency holds every OK latency, for other percentiles.
	Latency *Histogram `json:"-"`
}

// ErrorKind is one kind of error and how often it happened.
type ErrorKind struct {
	// Kind is "denied <gRPC code> http <status>" for an answer that was not
	// OK, or "rpc <gRPC code>" for a call that failed.
	Kind  string `json:"kind"`
	Count uint64 `json:"count"`
	// Example is the status message of the first one.
	Example string `json:"example,omitempty"`
}

// Measurement phases, in order.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// run is the state the callers of one measurement share.
type run struct {
	phase       atomic.Int32
	started     atomic.Uint64
	exhausted   atomic.Bool
	maxRequests uint64
	tokens      TokenSource
	now         func() time.Time
}

func (r *run) stop() { r.phase.Store(phaseStop) }

// Run performs one measurement against cfg.Addr. It returns an error only
// when the measurement could not be made (bad Config, no connection, ctx
// cancelled); denials and failed calls are counted in the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	conns, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()

	r := &run{maxRequests: cfg.MaxRequests, tokens: cfg.Tokens, now: cfg.Now}
	workers := make([]*worker, cfg.Callers)
	for i := range workers {
		var idBase [16]byte
		rand.Read(idBase[:])
		workers[i] = &worker{conn: conns[i%len(conns)], req: newEnvoyRequest(idBase, cfg.Now())}
	}

	// Calls run under their own context so that the ones still in flight
	// after the grace period can be cut off.
	callCtx, cancelCalls := context.WithCancel(ctx)
	defer cancelCalls()

	var start time.Time
	if cfg.Warmup == 0 {
		start = cfg.Now()
		r.phase.Store(phaseMeasure)
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.run(callCtx, r) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	finished := false
	if cfg.Warmup > 0 {
		finished = waitFor(ctx, done, cfg.Warmup)
		start = cfg.Now()
		r.phase.CompareAndSwap(phaseWarmup, phaseMeasure)
	}
	if !finished {
		waitFor(ctx, done, cfg.Duration)
	}
	r.stop()
	if !waitFor(ctx, done, cfg.Grace) {
		cancelCalls()
		<-done
	}
	end := cfg.Now()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	res := &Result{
		Addr:            cfg.Addr,
		Callers:         cfg.Callers,
		Connections:     cfg.Connections,
		Elapsed:         end.Sub(start),
		TokensExhausted: r.exhausted.Load(),
		Latency:         new(Histogram),
	}
	kinds := map[errorKey]*ErrorKind{}
	for _, w := range workers {
		res.Latency.Merge(&w.hist)
		for k, e := range w.errors {
			if sum, ok := kinds[k]; ok {
				sum.Count += e.Count
			} else {
				kinds[k] = e
			}
			res.Errors += e.Count
		}
	}
	for _, e := range kinds {
		res.ErrorKinds = append(res.ErrorKinds, *e)
	}
	slices.SortFunc(res.ErrorKinds, func(a, b ErrorKind) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Kind, b.Kind))
	})
	h := res.Latency
	res.Requests = h.Count()
	if res.Elapsed > 0 {
		res.RPS = float64(res.Requests) / res.Elapsed.Seconds()
	}
	res.P50, res.P90, res.P99 = h.Quantile(0.50), h.Quantile(0.90), h.Quantile(0.99)
	res.Max, res.Mean = h.Max(), h.Mean()
	return res, nil
}

// waitFor waits d, or less when done closes or ctx ends; it reports whether
// done closed.
func waitFor(ctx context.Context, done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// connect opens cfg.Connections connections and waits until each is ready, so
// that an unreachable server is reported at once rather than as a
// measurement full of errors.
func connect(ctx context.Context, cfg Config) ([]*grpc.ClientConn, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	conns := make([]*grpc.ClientConn, 0, cfg.Connections)
	fail := func(err error) ([]*grpc.ClientConn, error) {
		for _, c := range conns {
			c.Close()
		}
		return nil, fmt.Errorf("loadtest: connecting to %s: %w", cfg.Addr, err)
	}
	for range cfg.Connections {
		c, err := grpc.NewClient(cfg.Addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newRequestCodec())))
		if err != nil {
			return fail(err)
		}
		conns = append(conns, c)
		c.Connect()
		for s := c.GetState(); s != connectivity.Ready; s = c.GetState() {
			if !c.WaitForStateChange(ctx, s) {
				return fail(fmt.Errorf("still %s after %s", s, cfg.ConnectTimeout))
			}
		}
	}
	return conns, nil
}

// worker is one caller: one request in flight at a time, its own reused
// request and response messages, and its own records, merged at the end.
type worker struct {
	conn   *grpc.ClientConn
	req    *envoyRequest
	resp   authv3.CheckResponse
	hist   Histogram
	errors map[errorKey]*ErrorKind
}

type errorKey struct {
	failed bool // the call failed, rather than being answered with a denial
	code   codes.Code
	http   int32
}

func (w *worker) run(ctx context.Context, r *run) {
	for {
		phase := r.phase.Load()
		if phase == phaseStop {
			return
		}
		if phase == phaseMeasure && r.maxRequests > 0 && r.started.Add(1) > r.maxRequests {
			r.stop()
			return
		}
		auth, ok := r.tokens.Next()
		if !ok {
			r.exhausted.Store(true)
			r.stop()
			return
		}
		req := w.req.next(auth)
		start := r.now()
		err := w.conn.Invoke(ctx, authv3.Authorization_Check_FullMethodName, req, &w.resp)
		latency := r.now().Sub(start)
		if phase == phaseMeasure {
			w.record(latency, err)
		}
		if err != nil {
			// A failed call may not be done with the request bytes yet.
			w.req.buf = nil
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// record files one measured request: its latency when it was answered OK, an
// error otherwise.
func (w *worker) record(latency time.Duration, err error) {
	var key errorKey
	var msg string
	switch {
	case err != nil:
		st := status.Convert(err)
		key, msg = errorKey{failed: true, code: st.Code()}, st.Message()
	case w.resp.GetStatus().GetCode() != int32(codes.OK):
		key = errorKey{code: codes.Code(w.resp.GetStatus().GetCode())}
		key.http = int32(w.resp.GetDeniedResponse().GetStatus().GetCode())
		msg = w.resp.GetStatus().GetMessage()
	default:
		w.hist.Record(latency)
		return
	}
	if w.errors == nil {
		w.errors = map[errorKey]*ErrorKind{}
	}
	if e, ok := w.errors[key]; ok {
		e.Count++
		return
	}
	w.errors[key] = &ErrorKind{Kind: key.String(), Count: 1, Example: truncate(msg, 200)}
}

func (k errorKey) String() string {
	if k.failed {
		return "rpc " + k.code.String()
	}
	s := "denied " + k.code.String()
	if k.http != 0 {
		s += " http " + strconv.Itoa(int(k.http))
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
