package loadtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

func result(rps float64, p99 time.Duration, errs uint64) *Result {
	r := &Result{RPS: rps, P99: p99, Errors: errs, Requests: uint64(rps)}
	if errs > 0 {
		r.ErrorKinds = []ErrorKind{{Kind: "denied Unauthenticated http 401", Count: errs, Example: "token expired"}}
	}
	return r
}

func TestEvaluate(t *testing.T) {
	strict := Scenario{Name: "s", Target: Target{MinRPSRatio: 0.9, MaxP99Ratio: 1.2}}
	loose := Scenario{Name: "l", Target: Target{MinRPSRatio: 0.4}}
	ms := time.Millisecond
	tests := []struct {
		name      string
		sc        Scenario
		noop, svc *Result
		wantPass  bool
		wantFail  string
		wantRatio float64
	}{
		{"meets both targets", strict, result(1000, ms, 0), result(950, 1100*time.Microsecond, 0), true, "", 0.95},
		{"exactly at the targets", strict, result(1000, 10*ms, 0), result(900, 12*ms, 0), true, "", 0.90},
		{"throughput too low", strict, result(1000, ms, 0), result(899, ms, 0), false, "throughput 0.90", 0.899},
		{"p99 too high", strict, result(1000, ms, 0), result(1000, 1300*time.Microsecond, 0), false, "p99 latency 1.30", 1},
		{"no p99 target", loose, result(1000, ms, 0), result(410, 9*ms, 0), true, "", 0.41},
		{"fast but wrong: denials fail", loose, result(1000, ms, 0), result(990, ms, 7), false, "service: 7 errors: denied Unauthenticated http 401 x7", 0.99},
		{"errors on the do-nothing server", loose, result(1000, ms, 3), result(990, ms, 0), false, "do-nothing server: 3 errors", 0.99},
		{"nothing answered", loose, result(1000, ms, 0), result(0, 0, 0), false, "no request was answered OK", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Evaluate(tt.sc, tt.noop, tt.svc)
			if got.Pass != tt.wantPass {
				t.Errorf("Pass = %v, want %v (failures %q)", got.Pass, tt.wantPass, got.Failures)
			}
			if diff := got.RPSRatio - tt.wantRatio; diff > 1e-9 || diff < -1e-9 {
				t.Errorf("RPSRatio = %v, want %v", got.RPSRatio, tt.wantRatio)
			}
			joined := strings.Join(got.Failures, "\n")
			if tt.wantFail != "" && !strings.Contains(joined, tt.wantFail) {
				t.Errorf("failures %q, want one containing %q", got.Failures, tt.wantFail)
			}
			if tt.wantPass && len(got.Failures) > 0 {
				t.Errorf("passed with failures %q", got.Failures)
			}
		})
	}
}

func TestExpectedRequests(t *testing.T) {
	tests := []struct {
		name string
		noop float64
		load Config
		want int
	}{
		{"duration bound", 1000, Config{Warmup: 2 * time.Second, Duration: 10 * time.Second, Callers: 16}, 15000 + 16},
		{"request cap bound", 1000, Config{Warmup: time.Second, Duration: 10 * time.Second, MaxRequests: 500, Callers: 4}, 1875 + 4},
		{"nothing measured", 0, Config{Duration: time.Second, Callers: 16}, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expectedRequests(&Result{RPS: tt.noop}, tt.load); got != tt.want {
				t.Errorf("expectedRequests = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestFreshTokensPlan: the do-nothing server cycles a sample; the service
// gets a use-once sequence as long as the plan asks, within the cap, and
// nothing is signed twice.
func TestFreshTokensPlan(t *testing.T) {
	tests := []struct {
		name        string
		maxTokens   int
		serviceWant int
		wantNoopLen int
		wantSvcLen  int
		wantSigned  int
	}{
		{"service needs more than the sample", 100_000, 50_000, freshNoop, 50_000, 50_000},
		{"service needs less than the sample", 100_000, 500, freshNoop, freshNoop, freshNoop},
		{"capped", 30_000, 50_000, freshNoop, 30_000, 30_000},
		{"cap below the sample", 1000, 50_000, 1000, 1000, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signed := 0
			next := 0
			mint := func(_ context.Context, alg Alg, first, count int) ([]string, error) {
				if alg != ES256 || first != next {
					t.Fatalf("mint(%s, %d, %d), want ES256 from %d", alg, first, count, next)
				}
				next += count
				signed += count
				return tokenNames(count), nil
			}
			tokens := freshTokens(mint, tt.maxTokens)
			noop, err := tokens(context.Background(), TokenPlan{})
			if err != nil {
				t.Fatal(err)
			}
			pool, ok := noop.(*Pool)
			if !ok || pool.Len() != tt.wantNoopLen {
				t.Fatalf("noop source %T of %d, want a Pool of %d", noop, pool.Len(), tt.wantNoopLen)
			}
			svc, err := tokens(context.Background(), TokenPlan{Service: true, MaxRequests: tt.serviceWant})
			if err != nil {
				t.Fatal(err)
			}
			seq, ok := svc.(*Sequence)
			if !ok || seq.Len() != tt.wantSvcLen {
				t.Fatalf("service source %T of %d, want a Sequence of %d", svc, seq.Len(), tt.wantSvcLen)
			}
			if signed != tt.wantSigned {
				t.Errorf("signed %d tokens, want %d", signed, tt.wantSigned)
			}
		})
	}
}

// TestRunnerAgainstTwoNoops runs the standard scenarios with the runner
// against two do-nothing servers: the whole path, bounded by a request cap.
func TestRunnerAgainstTwoNoops(t *testing.T) {
	m := NewMinter(sharedKeys(t), time.Now)
	scenarios := StandardScenarios(m, ScenarioOptions{PoolSize: 8, FreshMax: 3000})
	r := &Runner{
		NoopAddr:    serveNoop(t),
		ServiceAddr: serveNoop(t),
		Load: Config{
			Callers:     4,
			Connections: 2,
			Warmup:      10 * time.Millisecond,
			Duration:    time.Minute,
			MaxRequests: 200,
		},
	}
	rep, err := r.Run(context.Background(), scenarios)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{ScenarioHS256, ScenarioRS256, ScenarioES256}
	if len(rep.Scenarios) != len(names) {
		t.Fatalf("%d scenarios in the report, want %d", len(rep.Scenarios), len(names))
	}
	for i, s := range rep.Scenarios {
		if s.Name != names[i] {
			t.Errorf("scenario %d is %s, want %s", i, s.Name, names[i])
		}
		for server, res := range map[string]*Result{"noop": s.Noop, "service": s.Service} {
			if res.Errors != 0 || res.Requests == 0 || res.Requests > 200 {
				t.Errorf("%s %s: ok %d errors %d", s.Name, server, res.Requests, res.Errors)
			}
			if !res.TokensExhausted && res.Requests != 200 {
				t.Errorf("%s %s: ok %d, want the cap of 200", s.Name, server, res.Requests)
			}
		}
		if s.RPSRatio <= 0 || s.P99Ratio <= 0 {
			t.Errorf("%s: ratios %v %v", s.Name, s.RPSRatio, s.P99Ratio)
		}
	}
	if rep.Callers != 4 || rep.Connections != 2 || rep.MaxRequests != 200 {
		t.Errorf("report load: %d callers %d connections cap %d", rep.Callers, rep.Connections, rep.MaxRequests)
	}
}

func TestRunnerNeedsAddresses(t *testing.T) {
	r := &Runner{Load: Config{Duration: time.Second}}
	if _, err := r.Run(context.Background(), nil); err == nil {
		t.Error("Run without addresses succeeded")
	}
}

func TestMergeAddsSlicesUp(t *testing.T) {
	mk := func(reqs uint64, elapsed time.Duration, lat ...time.Duration) *Result {
		h := &Histogram{}
		for _, d := range lat {
			h.Record(d)
		}
		return &Result{Requests: reqs, Elapsed: elapsed, RPS: float64(reqs) / elapsed.Seconds(), Latency: h,
			Errors: 1, ErrorKinds: []ErrorKind{{Kind: "rpc Unavailable", Count: 1}}}
	}
	a := mk(1000, time.Second, time.Millisecond, time.Millisecond)
	b := mk(3000, time.Second, 10*time.Millisecond, 10*time.Millisecond)
	m := merge(merge(nil, a), b)
	if m.Requests != 4000 || m.Elapsed != 2*time.Second || m.RPS != 2000 {
		t.Fatalf("merged %d requests in %v = %v rps", m.Requests, m.Elapsed, m.RPS)
	}
	if m.Errors != 2 || len(m.ErrorKinds) != 1 || m.ErrorKinds[0].Count != 2 {
		t.Fatalf("errors %d %+v", m.Errors, m.ErrorKinds)
	}
	if m.Latency.Count() != 4 || m.Max < 10*time.Millisecond || m.P50 > 11*time.Millisecond {
		t.Fatalf("latency count %d max %v p50 %v", m.Latency.Count(), m.Max, m.P50)
	}
	if a.Requests != 1000 || a.Latency.Count() != 2 {
		t.Fatal("merge changed its input")
	}
}
