package envoyauthz

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/testing/typical"
)

// TestScale fills the verdict cache with EXTAUTHZ_SCALE distinct tokens
// (make scale: 1,000,000) under a 1 GiB container's memory limit, as serve
// sets it (90%: --memory-limit auto), and reports RSS, live heap and
// cache-hit throughput before and after. It fails when the peak RSS passes
// 1 GiB or hits after the fill run more than 10% slower than before it
// (each the best of three rounds, so that a burst of other work on the
// machine does not decide). It is not part of make test: it runs only when
// EXTAUTHZ_SCALE is set.
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EXTAUTHZ_SCALE"))
	if n <= 0 {
		t.Skip("set EXTAUTHZ_SCALE (make scale)")
	}
	const small = 1000
	limit := int64(1<<30) / 10 * 9
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	defer debug.SetGCPercent(debug.SetGCPercent(400))

	srv := verdictFixture(t, n+small)
	ctx := context.Background()
	iat := time.Now().Unix()
	token := scaleTokens(t, iat)
	check := func(i int) {
		if r, _ := srv.Check(ctx, typicalRequest(token(i))); r.GetStatus().GetCode() != 0 {
			t.Fatalf("token %d denied: %v", i, r)
		}
	}
	// inputs are the requests for the tokens pick(0..k-1): messages for
	// Server.Check (the protobuf API) and encoded ones for the gRPC wire
	// path the service runs (decoded into pooled requests, answers
	// memoized encoded). The small set's are made once, before the fill,
	// and read in both measurements: the service reads requests from
	// buffers it reuses, and what the target compares is the cache, not
	// where the test's own requests land in the heap.
	type inputs struct {
		reqs []*authv3.CheckRequest
		decs []func(any) error
	}
	prepare := func(k int, pick func(int) int) inputs {
		in := inputs{reqs: make([]*authv3.CheckRequest, k), decs: make([]func(any) error, k)}
		for i := range in.reqs {
			in.reqs[i] = typicalRequest(token(pick(i)))
			b, err := proto.Marshal(in.reqs[i])
			if err != nil {
				t.Fatal(err)
			}
			in.decs[i] = func(v any) error { return v.(*wireRequest).decode(b) }
		}
		return in
	}
	// hits checks count cached tokens, in's in turn, and returns checks
	// per second on one goroutine, through the protobuf API or, with
	// wire, the wire path.
	hits := func(count int, in inputs, wire bool) float64 {
		k := len(in.reqs)
		for i := range k { // make the memos of either path
			srv.Check(ctx, in.reqs[i])
			srv.handleWire(nil, ctx, in.decs[i], nil)
		}
		start := time.Now()
		for i := range count {
			if wire {
				srv.handleWire(nil, ctx, in.decs[i%k], nil)
			} else {
				srv.Check(ctx, in.reqs[i%k])
			}
		}
		return float64(count) / time.Since(start).Seconds()
	}
	best := func(count int, in inputs, wire bool) float64 {
		b := 0.0
		for range 3 {
			b = max(b, hits(count, in, wire))
		}
		return b
	}
	for i := range small {
		check(n + i)
	}
	smallSet := prepare(small, func(i int) int { return n + i })
	before, beforeWire := best(200_000, smallSet, false), best(200_000, smallSet, true)
	debug.FreeOSMemory()
	rssBefore, _ := rss(t)
	t.Logf("before: %d verdicts cached, RSS %d MiB, live heap %d MiB, hits %.0f/s wire path, %.0f/s protobuf API (one goroutine, %d tokens in turn)",
		srv.pipeline.CacheStats().Size, rssBefore>>20, liveHeap()>>20, beforeWire, before, small)

	start := time.Now()
	for i := range n {
		check(i)
	}
	fill := time.Since(start)
	rssAfter, peak := rss(t)
	live := liveHeap()
	// The fill made misses at tens of thousands a second, far beyond a
	// replica's rate: its garbage is returned to the system first, so that
	// hits are measured in the steady state of a full cache, not while the
	// runtime is still giving back the burst's memory under the limit.
	debug.FreeOSMemory()
	after, afterWire := best(200_000, smallSet, false), best(200_000, smallSet, true)
	spread := hits(100_000, prepare(20_000, func(i int) int { return (i * 7919) % n }), true)
	_, peakHits := rss(t)
	peak = max(peak, peakHits)
	t.Logf("filled %d distinct tokens in %s (%.0f misses/s)", n, fill.Round(time.Millisecond), float64(n)/fill.Seconds())
	t.Logf("after: %d verdicts cached, RSS %d MiB (peak %d MiB) under a %d MiB limit, live heap %d MiB (%.0f B/verdict)",
		srv.pipeline.CacheStats().Size, rssAfter>>20, peak>>20, limit>>20, live>>20, float64(live)/float64(n+small))
	t.Logf("hits on %d tokens in turn: wire path %.0f/s (%.0f%% of before), protobuf API %.0f/s (%.0f%%); wire path on 20,000 spread over all %d (more than the memo slots: memos rebuilt) %.0f/s",
		small, afterWire, 100*afterWire/beforeWire, after, 100*after/before, n, spread)
	if peak > 1<<30 {
		t.Errorf("peak RSS %d MiB is over the 1 GiB container limit", peak>>20)
	}
	// The target is the service's own path; the protobuf API's figure is
	// reported beside it.
	if afterWire < 0.9*beforeWire {
		t.Errorf("hits after the fill run at %.0f%% of before on the wire path, want at least 90%%", 100*afterWire/beforeWire)
	}
}

// scaleTokens mints user i's typical token (the same string every time for
// the same i) without a JWT library: a million are needed.
func scaleTokens(tb testing.TB, iat int64) func(i int) string {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	return func(i int) string {
		payload, err := json.Marshal(typical.Claims("https://login.example.com", i, time.Unix(iat, 0)))
		if err != nil {
			tb.Fatal(err)
		}
		input := header + "." + enc.EncodeToString(payload)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(input))
		return input + "." + enc.EncodeToString(m.Sum(nil))
	}
}

// rss reads the process's resident set and its peak (Linux).
func rss(t *testing.T) (cur, peak uint64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			cur = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return cur, peak
}
