package exchange_test

import (
	"context"
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
