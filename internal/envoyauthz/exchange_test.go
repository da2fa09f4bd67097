package envoyauthz_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

type exchangeFixture struct {
	protoFixture
	sts *ststest.Server
	pl  *check.Pipeline
}

func newExchangeFixture(t testing.TB) *exchangeFixture {
	t.Helper()
	pl, sts := pipelinetest.Exchanging(t)
	return &exchangeFixture{protoFixture: protoFixture{srv: envoyauthz.NewServer(pl)}, sts: sts, pl: pl}
}

func (f *exchangeFixture) mcp(t *testing.T, tok, method, params string, headers map[string]string) result {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"` + method + `","params":` + params + `}`)
	r, _ := http.NewRequest("POST", "http://mcp.example.com/mcp", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return f.send(t, r, body, envoytest.BuildOptions{})
}

// TestExchangedTokenEncoding: the exchanged token replaces the inbound one
// in the upstream request; an STS outage is a 503 whose Retry-After reaches
// the client. The exchange decisions are check's tables.
func TestExchangedTokenEncoding(t *testing.T) {
	f := newExchangeFixture(t)
	tok := token(t, "alice", nil)
	res := f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, nil)
	got := strings.TrimPrefix(res.upstream.Get("Authorization"), "Bearer ")
	if res.status != 200 || got == "" || got == tok {
		t.Fatalf("status %d, upstream authorization %q: want the exchanged token", res.status, got)
	}
	if _, err := f.sts.Verify(got); err != nil {
		t.Fatalf("upstream token not issued by the STS: %v", err)
	}
	f.sts.SetFault(ststest.Fault{Status: 503, Body: `{"error":"temporarily_unavailable"}`})
	res = f.mcp(t, token(t, "bob", nil), "tools/call", `{"name":"read_file"}`, nil)
	if res.status != 503 || res.header.Get("Retry-After") == "" {
		t.Fatalf("STS down: %d retry-after=%q", res.status, res.header.Get("Retry-After"))
	}
}

// BenchmarkCheckExchanged compares a cache-hit tools/call on a route that
// exchanges the token (exchanged token cached) with the same call on a
// route that does not.
func BenchmarkCheckExchanged(b *testing.B) {
	f := newExchangeFixture(b)
	tok := token(b, "alice", jwt.MapClaims{"session_id": "sess-1"})
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"read_file"}}`)
	for _, host := range []string{"plain.example.com", "mcp.example.com"} {
		name := map[string]string{"plain.example.com": "no-exchange", "mcp.example.com": "exchanged"}[host]
		b.Run(name, func(b *testing.B) {
			r, _ := http.NewRequest("POST", "http://"+host+"/mcp", bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+tok)
			req := envoytest.BuildCheckRequest(r, body, envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 16})
			ctx := b.Context()
			if resp, _ := f.srv.Check(ctx, req); resp.GetStatus().GetCode() != 0 {
				b.Fatalf("denied: %v", resp)
			}
			b.ReportAllocs()
			for b.Loop() {
				f.srv.Check(ctx, req)
			}
		})
	}
}
