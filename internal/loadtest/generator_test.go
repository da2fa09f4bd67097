package loadtest

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// serve starts srv on a fresh loopback port for the test's lifetime.
func serve(t testing.TB, srv authv3.AuthorizationServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	authv3.RegisterAuthorizationServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// serveNoop runs ServeNoop, as the noop subprocess does, until the test ends.
func serveNoop(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- ServeNoop(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("ServeNoop: %v", err)
		}
	})
	return lis.Addr().String()
}

// scripted answers request n (counting from 0) with answer(n) and keeps the
// Authorization headers it saw.
type scripted struct {
	authv3.UnimplementedAuthorizationServer
	answer func(n int64) (*authv3.CheckResponse, error)
	n      atomic.Int64
	mu     sync.Mutex
	seen   map[string]int
	bad    []string
}

func (s *scripted) Check(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	h := req.GetAttributes().GetRequest().GetHttp().GetHeaders()
	s.mu.Lock()
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[h["authorization"]]++
	if h[":path"] != RequestPath || h[":method"] != RequestMethod || h["x-request-id"] == "" {
		s.bad = append(s.bad, h[":method"]+" "+h[":path"])
	}
	s.mu.Unlock()
	return s.answer(s.n.Add(1) - 1)
}

func allow(int64) (*authv3.CheckResponse, error) {
	return NoopServer{}.Check(context.Background(), nil)
}

func deny(int64) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied), Message: "not for you"},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
		}},
	}, nil
}

func TestRunCountsOnlyOKAnswers(t *testing.T) {
	const capped = 400
	tests := []struct {
		name       string
		answer     func(n int64) (*authv3.CheckResponse, error)
		wantOK     uint64
		wantErrors map[string]uint64
	}{
		{name: "all allowed", answer: allow, wantOK: capped},
		{name: "all denied", answer: deny, wantErrors: map[string]uint64{"denied PermissionDenied http 403": capped}},
		{
			name: "a quarter denied, a quarter failed",
			answer: func(n int64) (*authv3.CheckResponse, error) {
				switch n % 4 {
				case 1:
					return deny(n)
				case 2:
					return nil, status.Error(codes.Internal, "boom")
				}
				return allow(n)
			},
			wantOK: capped / 2,
			wantErrors: map[string]uint64{
				"denied PermissionDenied http 403": capped / 4,
				"rpc Internal":                     capped / 4,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &scripted{answer: tt.answer}
			addr := serve(t, srv)
			// No warm-up: the server sees exactly the measured requests.
			res, err := Run(context.Background(), Config{
				Addr:        addr,
				Callers:     4,
				Connections: 2,
				Duration:    time.Minute,
				MaxRequests: capped,
				Tokens:      NewPool([]string{"t1", "t2"}),
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != tt.wantOK || res.Requests+res.Errors != capped {
				t.Errorf("ok %d errors %d, want ok %d of %d", res.Requests, res.Errors, tt.wantOK, capped)
			}
			got := map[string]uint64{}
			for _, k := range res.ErrorKinds {
				got[k.Kind] = k.Count
				if k.Kind == "rpc Internal" && k.Example != "boom" {
					t.Errorf("example of %s = %q, want the status message", k.Kind, k.Example)
				}
			}
			if len(got) != len(tt.wantErrors) {
				t.Errorf("error kinds %v, want %v", got, tt.wantErrors)
			}
			for k, want := range tt.wantErrors {
				if got[k] != want {
					t.Errorf("%s: %d, want %d", k, got[k], want)
				}
			}
			if res.Latency.Count() != res.Requests {
				t.Errorf("%d latencies for %d OK requests", res.Latency.Count(), res.Requests)
			}
			if tt.wantOK > 0 && (res.RPS <= 0 || res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max) {
				t.Errorf("rps %v p50 %v p99 %v max %v", res.RPS, res.P50, res.P99, res.Max)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if srv.seen["Bearer t1"]+srv.seen["Bearer t2"] != capped || len(srv.seen) != 2 {
				t.Errorf("server saw authorization headers %v", srv.seen)
			}
			if len(srv.bad) > 0 {
				t.Errorf("requests not shaped like Envoy's: %v", srv.bad[:min(len(srv.bad), 3)])
			}
		})
	}
}

// TestRunWarmupThenMeasure runs against the noop server with a warm-up and a
// request cap: only the capped number of requests is measured.
func TestRunWarmupThenMeasure(t *testing.T) {
	addr := serveNoop(t)
	res, err := Run(context.Background(), Config{
		Addr:        addr,
		Warmup:      20 * time.Millisecond,
		Duration:    time.Minute,
		MaxRequests: 300,
		Tokens:      NewFixed("tok"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 300 || res.Errors != 0 {
		t.Errorf("ok %d errors %d, want 300 and 0", res.Requests, res.Errors)
	}
	if res.Callers != DefaultCallers || res.Connections != DefaultConnections {
		t.Errorf("callers %d connections %d, want the defaults", res.Callers, res.Connections)
	}
}

// TestRunSequenceUsedUp: a use-once source that runs dry ends the
// measurement early and says so; no token is sent twice.
func TestRunSequenceUsedUp(t *testing.T) {
	srv := &scripted{answer: allow}
	addr := serve(t, srv)
	seq := NewSequence(tokenNames(150))
	res, err := Run(context.Background(), Config{
		Addr:     addr,
		Callers:  3,
		Warmup:   time.Minute, // ended by the source, not the clock
		Duration: time.Minute,
		Tokens:   seq,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TokensExhausted {
		t.Error("TokensExhausted not set")
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for a, n := range srv.seen {
		if n != 1 {
			t.Errorf("%s sent %d times", a, n)
		}
	}
	if len(srv.seen) != 150 {
		t.Errorf("server saw %d distinct tokens, want 150", len(srv.seen))
	}
}

func TestRunUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	_, err = Run(context.Background(), Config{
		Addr:           addr,
		Duration:       time.Second,
		ConnectTimeout: 300 * time.Millisecond,
		Tokens:         NewFixed("tok"),
	})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Run against a closed port: %v, want an error naming %s", err, addr)
	}
}

func TestRunCancelled(t *testing.T) {
	addr := serveNoop(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	_, err := Run(ctx, Config{Addr: addr, Duration: time.Minute, Tokens: NewFixed("tok")})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel: %v, want context.Canceled", err)
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{Addr: "127.0.0.1:1", Duration: time.Second, Tokens: NewFixed("t")}
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string
	}{
		{"defaults are valid", func(*Config) {}, ""},
		{"no address", func(c *Config) { c.Addr = "" }, "Addr"},
		{"no duration", func(c *Config) { c.Duration = 0 }, "Duration"},
		{"no tokens", func(c *Config) { c.Tokens = nil }, "Tokens"},
		{"more connections than callers", func(c *Config) { c.Callers, c.Connections = 2, 3 }, "connections"},
		{"negative warm-up", func(c *Config) { c.Warmup = -1 }, "Warmup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			c = c.withDefaults()
			err := c.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// BenchmarkRunNoop measures the load tool and the noop server together, in
// process: a sanity figure for the tool's own overhead.
func BenchmarkRunNoop(b *testing.B) {
	addr := serveNoop(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Run(context.Background(), Config{
			Addr: addr, Duration: time.Minute, MaxRequests: 2000, Tokens: NewFixed("tok"),
		}); err != nil {
			b.Fatal(err)
		}
	}
}
