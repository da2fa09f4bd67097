package envoyauthz

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
	"github.com/extauthz/extauthz/internal/testing/typical"
)

// verdictFixture is a route as a typical deployment has it: one issuer with
// an audience, a rule on a claim, a claim carried in a header; and a
// pipeline with room for n verdicts.
func verdictFixture(tb testing.TB, n int) *Server {
	doc := fmt.Sprintf(`issuers:
  - {name: corp, issuer: https://login.example.com, algorithms: [HS256], secret: %s}
%scache: {max_entries: %d}
`, secret, typical.Route("corp"), n)
	pl := pipelinetest.New(tb, doc, check.Deps{}, check.Options{})
	return NewServer(pl)
}

// typicalToken is user i's typical token, signed by verdictFixture's issuer.
func typicalToken(tb testing.TB, i int) string {
	return testtoken.HMAC(tb, "HS256", secret, typical.Claims("https://login.example.com", i, time.Now()))
}

const toolsCallBody = typical.ToolsCall

func typicalRequest(token string) *authv3.CheckRequest {
	req := checkRequest(map[string]string{"authorization": "Bearer " + token, "accept": "application/json, text/event-stream"})
	req.Attributes.Request.Http.Body = toolsCallBody
	return req
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// verdictBytes checks n distinct tokens twice each through check and
// returns the live heap they left behind, per token: the verdict cache
// entry, its grant and the memoized response.
func verdictBytes(tb testing.TB, n int, check func(*Server, int)) float64 {
	srv := verdictFixture(tb, n)
	before := liveHeap()
	for i := range n {
		check(srv, i)
	}
	for i := range n {
		check(srv, i)
	}
	after := liveHeap()
	runtime.KeepAlive(srv)
	if got := srv.pipeline.CacheStats().Size; got != n {
		tb.Fatalf("cache holds %d verdicts, want %d", got, n)
	}
	return float64(int64(after)-int64(before)) / float64(n)
}

// BenchmarkVerdictMemory reports the live heap per cached verdict (B/verdict)
// after 100,000 and 200,000 distinct HS256 tokens were each checked twice,
// and the time of a cache hit in a cache that full. "check" goes through
// Server.Check (the protobuf API), "wire" through the gRPC wire path the
// service uses, which also keeps the encoded response.
func BenchmarkVerdictMemory(b *testing.B) {
	sizes := []int{100_000, 200_000}
	most := sizes[len(sizes)-1]
	tokens := make([]*authv3.CheckRequest, most)
	wire := make([][]byte, most)
	for i := range tokens {
		tokens[i] = typicalRequest(typicalToken(b, i))
		var err error
		if wire[i], err = proto.Marshal(tokens[i]); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	checkProto := func(s *Server, i int) {
		if r, _ := s.Check(ctx, tokens[i]); r.GetStatus().GetCode() != 0 {
			b.Fatalf("denied: %v", r)
		}
	}
	checkWire := func(s *Server, i int) {
		w := wirePool.Get().(*wireRequest)
		if err := w.decode(wire[i]); err != nil {
			b.Fatal(err)
		}
		s.checkWire(ctx, w)
		w.release()
	}
	for _, path := range []struct {
		name  string
		check func(*Server, int)
	}{{"check", checkProto}, {"wire", checkWire}} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/%d", path.name, n), func(b *testing.B) {
				var srv *Server
				per := verdictBytes(b, n, func(s *Server, i int) {
					srv = s
					path.check(s, i)
				})
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					path.check(srv, i%n)
					i++
				}
				b.ReportMetric(per, "B/verdict")
			})
		}
	}
	runtime.KeepAlive(tokens)
	runtime.KeepAlive(wire)
}
