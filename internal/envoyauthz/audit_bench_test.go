package envoyauthz

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/audit"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/ratelimit"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// BenchmarkCheckAudited compares a cache-hit check with the audit log on
// (every decision, file sink) and one rate limit against the same check
// without them: "off" and "on" for a bare request and for an MCP
// tools/call with arguments (whose body the record copies). Allocations
// are counted process-wide, so "on" includes the writer goroutine's
// encoding; "stuck" holds that goroutine in a blocked sink, leaving the
// check path's own cost (its records are then dropped, after being built);
// "sampled" keeps one allowed decision in a hundred (sample_allowed: 0.01),
// so that nearly every check pays only for the sampling decision.
func BenchmarkCheckAudited(b *testing.B) {
	const route = "routes: [{name: bench, default: true, issuers: [dev]%s}]\ncache: {max_entries: 100000}\n"
	// A limit high enough never to refuse: the benchmark measures counting.
	const limit = ", limits: [{key: subject, requests: 1000000000, per: 1h}]"
	tok := testtoken.HMAC(b, "HS256", secret, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	bodies := map[string][]byte{
		"bare":       nil,
		"tools-call": []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"quarterly numbers","limit":5}}}`),
	}
	for _, kind := range []string{"bare", "tools-call"} {
		for _, mode := range []string{"off", "on", "stuck", "sampled"} {
			on := mode != "off"
			name := kind + "/" + mode
			b.Run(name, func(b *testing.B) {
				doc := fmt.Sprintf("issuers: [{name: dev, algorithms: [HS256], secret: %s}]\n", secret)
				var opts check.Options
				var w *audit.Writer
				if on {
					doc += fmt.Sprintf(route, limit)
					var err error
					ao := audit.Options{}
					stuck := make(chan struct{})
					if mode == "stuck" {
						ao.Sink = stuckSink(stuck)
					}
					sample := 1.0
					if mode == "sampled" {
						sample = 0.01
					}
					w, err = audit.New(context.Background(), audit.Config{Sink: audit.SinkFile, SampleAllowed: sample,
						File: audit.FileConfig{Path: filepath.Join(b.TempDir(), "audit.jsonl")}}, ao)
					if err != nil {
						b.Fatal(err)
					}
					defer w.Close(context.Background())
					defer close(stuck) // before Close: release a stuck sink first
					opts = check.Options{Audit: w, RateLimiter: ratelimit.New(ratelimit.Options{})}
				} else {
					doc += fmt.Sprintf(route, "")
				}
				srv := NewServer(pipelinetest.New(b, doc, check.Deps{}, opts))
				req := checkRequest(map[string]string{"authorization": "Bearer " + tok})
				if body := bodies[kind]; body != nil {
					req.Attributes.Request.Http.RawBody = body
				}
				ctx := context.Background()
				if r, _ := srv.Check(ctx, req); r.GetStatus().GetCode() != 0 {
					b.Fatalf("denied: %v", r)
				}
				b.ReportAllocs()
				for b.Loop() {
					srv.Check(ctx, req)
				}
				if w != nil {
					b.ReportMetric(float64(w.Dropped())/float64(b.N), "dropped/op")
				}
			})
		}
	}
}

// stuckSink blocks every write until release is closed.
type stuckSink chan struct{}

func (s stuckSink) Write(*audit.Record) error { <-s; return nil }
func (s stuckSink) Flush() error              { return nil }
func (s stuckSink) Close() error              { return nil }
