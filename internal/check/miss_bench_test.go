package check

import (
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/testing/typical"
)

// missFixture is a pipeline over the configuration of a typical MCP route
// (three issuers, a claim header, one rule) and a source of requests, each
// with an HS256 token never seen before: what a cache miss costs in this
// package, beside the signature.
func missFixture(tb testing.TB) (*Pipeline, func(i int) *Request) {
	issuers := typical.NewIssuers(tb, secret)
	pl := newPipeline(tb, issuers.Config(), Deps{}, Options{})
	body := []byte(typical.ToolsCall)
	req := func(i int) *Request {
		tok := issuers.Token(tb, "HS256", i)
		return &Request{Method: "POST", Scheme: "https", Host: "mcp.example.com", Path: "/mcp", Protocol: "HTTP/1.1",
			Headers: Headers{":authority": "mcp.example.com", ":method": "POST", ":path": "/mcp", ":scheme": "https",
				"content-type": "application/json", "x-request-id": "8f2d7a4e-1b2c-4d3e-9f00-123456789abc", "x-forwarded-proto": "https",
				"authorization": "Bearer " + tok, "accept": "application/json, text/event-stream"},
			Body: body, RequestID: "8f2d7a4e-1b2c-4d3e-9f00-123456789abc"}
	}
	return pl, req
}

// BenchmarkCheckMiss measures Check on tokens it has not seen: signature,
// claims, grant, the call and every later stage.
func BenchmarkCheckMiss(b *testing.B) {
	pl, newReq := missFixture(b)
	seq := int(time.Now().UnixNano() % 1_000_000_000)
	const n = 1000
	reqs := make([]*Request, n)
	fresh := func() {
		for i := range reqs {
			seq++
			reqs[i] = newReq(seq)
		}
	}
	fresh()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n {
			b.StopTimer()
			fresh()
			i = 0
			b.StartTimer()
		}
		if v := pl.Check(b.Context(), reqs[i]); v.Outcome != Allowed || v.CacheHit {
			b.Fatalf("%v (%s), cached %v", v.Outcome, v.Description, v.CacheHit)
		}
		i++
	}
}

// TestCheckMissAllocations guards the allocations of a cache miss on a
// typical MCP route, signature verification included.
func TestCheckMissAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	pl, newReq := missFixture(t)
	const n = 200
	reqs := make([]*Request, n)
	for i := range reqs {
		reqs[i] = newReq(i)
	}
	i := 0
	got := testing.AllocsPerRun(n-1, func() {
		if v := pl.Check(t.Context(), reqs[i]); v.Outcome != Allowed || v.CacheHit {
			t.Fatalf("%v (%s), cached %v", v.Outcome, v.Description, v.CacheHit)
		}
		i++
	})
	// The verifier's claims and their payload (an allocation of its own,
	// sized to it: see jwtauth.Claims), the call's id and strings, the
	// budget, the grant with its headers and their packed values, the
	// lineage headers set (those stripped are shared: withLineageRemoved).
	const want = 8
	if got > want {
		t.Errorf("a miss allocates %v times, want at most %v", got, want)
	}
}

// TestClockReadsPerCheck: a check reads the pipeline's clock once and
// hands that instant to every stage and to the caches (a clock read costs
// some 50 ns on a virtual machine, a thirtieth of a cache hit); a miss
// adds the verifier's own read for the token's dates.
func TestClockReadsPerCheck(t *testing.T) {
	issuers := typical.NewIssuers(t, secret)
	var pipelineReads, verifierReads int
	start := time.Now()
	counting := func(n *int) func() time.Time {
		return func() time.Time { *n++; return start }
	}
	pl := newPipeline(t, issuers.Config(), Deps{Now: counting(&verifierReads)}, Options{Now: counting(&pipelineReads)})
	tok := issuers.Token(t, "HS256", 1)
	req := &Request{Method: "POST", Scheme: "https", Host: "mcp.example.com", Path: "/mcp", Protocol: "HTTP/1.1",
		Headers: Headers{":authority": "mcp.example.com", ":method": "POST", ":path": "/mcp", ":scheme": "https",
			"content-type": "application/json", "authorization": "Bearer " + tok, "accept": "application/json, text/event-stream"},
		Body: []byte(typical.ToolsCall)}
	tests := []struct {
		name               string
		pipeline, verifier int
		hit                bool
	}{
		{name: "miss", pipeline: 1, verifier: 1},
		{name: "hit", pipeline: 1, verifier: 0, hit: true},
	}
	for _, tt := range tests {
		pipelineReads, verifierReads = 0, 0
		v := pl.Check(t.Context(), req)
		if v.Outcome != Allowed || v.CacheHit != tt.hit {
			t.Fatalf("%s: %v (%s), cached %v", tt.name, v.Outcome, v.Description, v.CacheHit)
		}
		if pipelineReads != tt.pipeline || verifierReads != tt.verifier {
			t.Errorf("%s: the pipeline's clock read %d times and the verifier's %d, want %d and %d",
				tt.name, pipelineReads, verifierReads, tt.pipeline, tt.verifier)
		}
	}
	// Explain decides at one instant too, its cache reads included.
	pipelineReads = 0
	if v, _ := pl.Explain(t.Context(), req); v.Outcome != Allowed || pipelineReads != 1 {
		t.Errorf("explain: %v, the pipeline's clock read %d times, want once", v.Outcome, pipelineReads)
	}
}

// BenchmarkNewGrant measures building the grant of a verified token alone,
// the typical route's claim header and rule claim included, on claims of
// tokens the loop has not used in its last 999 calls.
func BenchmarkNewGrant(b *testing.B) {
	pl, newReq := missFixture(b)
	p := pl.Policy()
	const n = 1000
	var r *Route
	claims := make([]*jwtauth.Claims, n)
	for i := range claims {
		req := newReq(i)
		if r == nil {
			var ok bool
			if r, ok, _ = p.lookupRoute(req); !ok {
				b.Fatal("no route")
			}
		}
		tok := strings.TrimPrefix(req.Headers["authorization"], "Bearer ")
		c, err := p.verifier.Verify(b.Context(), tok, r, false)
		if err != nil {
			b.Fatal(err)
		}
		claims[i] = c
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := p.newGrant(r, claims[i]); err != nil {
			b.Fatal(err)
		}
		if i++; i == n {
			i = 0
		}
	}
}
