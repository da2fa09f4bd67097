package extprocauthz_test

import (
	"context"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// blockingVerifier holds every verification until released.
type blockingVerifier struct{ entered, release chan struct{} }

func (b *blockingVerifier) Verify(ctx context.Context, _ string, _, _ []string) (*jwtauth.Claims, error) {
	b.entered <- struct{}{}
	<-b.release
	return &jwtauth.Claims{IssuerName: "a", Subject: "alice", ExpiresAt: time.Now().Add(time.Hour), Raw: map[string]any{"sub": "alice"}}, nil
}

// TestOverloadedFailsClosed: beyond limits.max_concurrent_checks the
// response path's decision is shed like a check: a list answer is then
// refused, not passed unfiltered.
func TestOverloadedFailsClosed(t *testing.T) {
	cfg, err := config.Parse([]byte(`issuers: [{name: a, secret: ` + secret + `}]
routes:
  - name: files
    default: true
    protocol: mcp
    issuers: [a]
    response_path: true
    rules: [{methods: [tools/call], names: ["delete_*"], scopes: [files:write]}]
limits: {max_concurrent_checks: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	bv := &blockingVerifier{entered: make(chan struct{}, 1), release: make(chan struct{})}
	p, err := check.Compile(t.Context(), cfg, check.Deps{Verifier: bv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pl, err := check.New(p, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{n: map[string]int{}, opened: make(chan struct{}, 1)}
	conn := envoytest.NewExtProcServer(t, extprocauthz.NewServer(pl, extprocauthz.Options{Observer: c}))
	// One check in progress fills the limit.
	go pl.Check(context.Background(), &check.Request{Method: "POST", Host: "mcp.example.com", Path: "/mcp",
		Headers: check.Headers{"authorization": "Bearer a.b.c", ":method": "POST", ":path": "/mcp", ":authority": "mcp.example.com"}})
	<-bv.entered
	defer close(bv.release)
	md := metadataFor(t, map[string]any{"route": "files", "outcome": "allowed", "user": "alice", "issuer": "a"})
	res := envoytest.ExtProc(t, conn, recommended(md), envoytest.ExtProcExchange{
		Request:  mcpRequest("mcp.example.com", toolsList, nil),
		Response: jsonResponse(toolsResult, nil),
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := string(res.Downstream.Body()); got != `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error","data":{"reason":"the list response could not be filtered"}}}` {
		t.Fatalf("overloaded: client got %s", got)
	}
	if c.get(extprocauthz.ActionOverloaded) != 1 {
		t.Fatal("the shed decision is not counted")
	}
}
