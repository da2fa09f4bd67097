package exchange_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// BenchmarkExchangeCached is the hot path: a request whose exchanged token
// is cached. It must not allocate.
func BenchmarkExchangeCached(b *testing.B) {
	for _, withActor := range []bool{false, true} {
		name := "no actor"
		if withActor {
			name = "actor"
		}
		b.Run(name, func(b *testing.B) {
			c := newClock()
			sts := newSTS(b, c, ststest.Options{})
			var edit func(*exchange.Config)
			if withActor {
				path := b.TempDir() + "/token"
				writeActor(b, c, path)
				edit = func(cfg *exchange.Config) { cfg.ActorTokenFile = path }
			}
			e := newExchanger(b, c, sts, edit)
			ctx := context.Background()
			subject := subjectToken(b, c, "alice", nil)
			target := exchange.Target{Audience: []string{"docs-api"}, Resource: []string{"https://docs.example/mcp"}, Scope: "docs.read"}
			if _, err := e.Exchange(ctx, subject, target, alice); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Exchange(ctx, subject, target, alice); err != nil {
					b.Fatal(err)
				}
			}
			if sts.Calls() != 1 {
				b.Fatalf("STS calls = %d", sts.Calls())
			}
		})
	}
}

// BenchmarkExchangeMiss is a full exchange against the loopback STS: form,
// client authentication, HTTP, the STS signing a JWT, response checks.
func BenchmarkExchangeMiss(b *testing.B) {
	c := newClock()
	sts := newSTS(b, c, ststest.Options{})
	e := newExchanger(b, c, sts, func(cfg *exchange.Config) { cfg.CacheSize = 1024 })
	ctx := context.Background()
	subject := subjectToken(b, c, "alice", nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := e.Exchange(ctx, subject, docsAPI, exchange.Owner{Subject: "alice", Session: strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExchangedTokenMemory reports the live heap per cached exchanged
// token (B/token) after n distinct exchanges, and the length of the token
// the STS issued (token-bytes), which the cache must hold in any case: the
// difference is what the cache adds to it.
func BenchmarkExchangedTokenMemory(b *testing.B) {
	const n, warm = 5_000, 1_000
	c := newClock()
	sts := newSTS(b, c, ststest.Options{})
	e := newExchanger(b, c, sts, func(cfg *exchange.Config) { cfg.CacheSize = n + warm })
	ctx := context.Background()
	subject := subjectToken(b, c, "alice", nil)
	// One user per session: a user holds at most CachePerSubject tokens.
	exchangeFor := func(o exchange.Owner) exchange.Token {
		tok, err := e.Exchange(ctx, subject, docsAPI, o)
		if err != nil {
			b.Fatal(err)
		}
		return tok
	}
	owner := func(session string) exchange.Owner {
		return exchange.Owner{Subject: "user-" + session, Session: session}
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// The STS's discovery, the client's connection, and the last requests
	// the test STS remembers (ststest keeps 1,000): from here on the STS
	// holds as much as before.
	for i := range warm {
		exchangeFor(owner("warm-" + strconv.Itoa(i)))
	}
	before := heap()
	var length int
	for i := range n {
		length += len(exchangeFor(owner(strconv.Itoa(i))).Value)
	}
	per := float64(int64(heap())-int64(before)) / n
	seven := owner("7")
	for b.Loop() {
		exchangeFor(seven)
	}
	if got := sts.Calls(); got != n+warm {
		b.Fatalf("STS calls = %d, want %d: a cached token was not used", got, n+warm)
	}
	b.ReportMetric(per, "B/token")
	b.ReportMetric(float64(length)/n, "token-bytes")
}
