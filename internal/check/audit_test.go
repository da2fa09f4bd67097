package check

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/extauthz/extauthz/internal/audit"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/ratelimit"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// auditSchema is docs/audit.schema.json, resolved.
func auditSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	b, err := os.ReadFile("../../docs/audit.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestAuditRecords: each decision writes one record with what the
// decision was about, valid against the schema; a denial tells the client
// its decision id; the records hold no token, secret or argument value.
func TestAuditRecords(t *testing.T) {
	clk := newClock()
	cfg, err := config.Parse([]byte(limitedConfig(1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(t.Context(), cfg, Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out := &lockedBuffer{}
	w, err := audit.New(context.Background(), audit.Config{Sink: audit.SinkStdout, SampleAllowed: 1}, audit.Options{Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(p, Options{Now: clk.Now, Audit: w, RateLimiter: ratelimit.New(ratelimit.Options{Clock: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pl: pl, clock: clk}
	const argSecret = "sk-live-ARGUMENT-SECRET-123"
	alice := f.hs(t, map[string]any{"azp": "agent-app"})
	expired := f.hs(t, map[string]any{"exp": t0.Add(-2 * time.Hour).Unix()})
	secrets := []string{secret, alice, expired, argSecret, "cookie-secret-value"}

	withArgs := call("mcp.example.com", alice, Headers{"x-request-id": "req-1", "cookie": "at=cookie-secret-value"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"`+argSecret+`","limit":3}}}`)
	cases := []struct {
		name     string
		req      *Request
		outcome  Outcome
		check    func(t *testing.T, r audit.Record)
		idHeader bool // the client is told the decision id
	}{
		{"allowed call", withArgs, Allowed, func(t *testing.T, r audit.Record) {
			if r.DecisionID != "req-1" || r.Subject != "dev:alice" && r.Subject != "alice" || r.ClientID != "agent-app" ||
				r.Issuer != "dev" || r.Method != "tools/call" || r.Target != "search" || r.TargetKind != "tool" ||
				r.Rule != "everything" || r.Status != 200 || !r.Allowed || r.Protocol != "mcp" {
				t.Errorf("record %+v", r)
			}
			if len(r.Arguments) != 2 || r.Arguments[0].Name != "query" || r.Arguments[0].Value != "" {
				t.Errorf("arguments %+v", r.Arguments)
			}
		}, false},
		{"missing token", &Request{Method: "POST", Scheme: "https", Host: "mcp.example.com", Path: "/",
			Headers: Headers{":authority": "mcp.example.com", ":path": "/", "x-request-id": "req-2"}}, MissingToken,
			func(t *testing.T, r audit.Record) {
				if r.DecisionID != "req-2" || r.Status != 401 || r.Allowed || r.Subject != "" {
					t.Errorf("record %+v", r)
				}
			}, true},
		{"expired token, no request id", toolCall(expired, 3, "search"), InvalidToken, func(t *testing.T, r audit.Record) {
			if len(r.DecisionID) != 36 || r.Outcome != "invalid_token" || r.Reason == "" {
				t.Errorf("record %+v", r)
			}
		}, true},
		{"denied by a rule", toolCall(alice, 4, "delete_repo"), Forbidden, func(t *testing.T, r audit.Record) {
			if r.Rule != "no-delete" || r.Status != 403 || r.Target != "delete_repo" {
				t.Errorf("record %+v", r)
			}
		}, true},
		{"rate limited", toolCall(alice, 5, "search"), RateLimited, func(t *testing.T, r audit.Record) {
			if r.RateLimit != "tools/limits[0]" || r.Status != 429 || r.Outcome != "rate_limited" {
				t.Errorf("record %+v", r)
			}
		}, true},
	}
	for _, c := range cases {
		v := pl.Check(context.Background(), c.req)
		if v.Outcome != c.outcome {
			t.Fatalf("%s: %v (%s)", c.name, v.Outcome, v.Description)
		}
		id, ok := header(v.ResponseHeaders, DecisionIDHeader)
		if ok != c.idHeader || (ok && id == "") {
			t.Errorf("%s: decision id header %q %v", c.name, id, ok)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.b.Bytes()
	for _, s := range secrets {
		if bytes.Contains(got, []byte(s)) {
			t.Errorf("the audit log holds a secret or token: %.20s...", s)
		}
	}
	schema := auditSchema(t)
	sc := bufio.NewScanner(bytes.NewReader(got))
	i := 0
	for ; sc.Scan(); i++ {
		var raw any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(raw); err != nil {
			t.Errorf("record %d does not match the schema: %v\n%s", i, err, sc.Bytes())
		}
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if i < len(cases) {
			t.Run(cases[i].name, func(t *testing.T) { cases[i].check(t, r) })
		}
	}
	if i != len(cases) {
		t.Errorf("%d records, want %d:\n%s", i, len(cases), got)
	}
	if strings.Count(string(got), `"schema":1`) != len(cases) {
		t.Error("a record without its schema version")
	}
}

// stuckWriter is a file on a full disk: Write blocks until released.
type stuckWriter struct {
	entered, release chan struct{}
	once             sync.Once
}

func (s *stuckWriter) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return len(p), nil
}

// TestAuditSinkStuck: with the sink stuck, 10,000 checks are all answered
// as usual; the records beyond the queue are dropped and counted.
func TestAuditSinkStuck(t *testing.T) {
	const queue, n = 16, 10000
	clk := newClock()
	cfg, err := config.Parse([]byte(limitedConfig(1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(t.Context(), cfg, Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	sw := &stuckWriter{entered: make(chan struct{}), release: make(chan struct{})}
	w, err := audit.New(context.Background(), audit.Config{Sink: audit.SinkStdout, SampleAllowed: 1, QueueSize: queue}, audit.Options{Stdout: sw})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(sw.release); _ = w.Close(context.Background()) }()
	pl, err := New(p, Options{Now: clk.Now, Audit: w})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pl: pl, clock: clk}
	req := toolCall(f.hs(t, nil), 1, "search")
	pl.Check(context.Background(), req)
	<-sw.entered
	for i := range n {
		if v := pl.Check(context.Background(), req); v.Outcome != Allowed {
			t.Fatalf("check %d: %v", i, v.Outcome)
		}
	}
	if got := w.Dropped(); got != n-queue {
		t.Errorf("dropped %d, want %d", got, n-queue)
	}
}

// TestDecisionIDHeaderOwned: the decision id upstream is the service's. A
// client's own copy is stripped, and a generated id is the request's own:
// two requests of one grant without x-request-id get different ids, never
// the first one's memoized headers.
func TestDecisionIDHeaderOwned(t *testing.T) {
	clk := newClock()
	cfg, err := config.Parse([]byte(limitedConfig(1000)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(t.Context(), cfg, Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w, err := audit.New(context.Background(), audit.Config{Sink: audit.SinkStdout, SampleAllowed: 1}, audit.Options{Stdout: &lockedBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	pl, err := New(p, Options{Now: clk.Now, Audit: w})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pl: pl, clock: clk}
	alice := f.hs(t, nil)

	forged := call("mcp.example.com", alice, Headers{"x-request-id": "req-9", DecisionIDHeader: "req-1"}, mcpPing)
	v := pl.Check(context.Background(), forged)
	if !v.Outcome.Allow() || !has(v.Remove, DecisionIDHeader) {
		t.Fatalf("a client's decision id is not stripped: %v remove %v", v.Outcome, v.Remove)
	}
	if got, ok := header(v.Set, DecisionIDHeader); ok {
		t.Fatalf("decision id %q set although the request had its own x-request-id", got)
	}

	var ids []string
	for range 3 {
		v := pl.Check(context.Background(), call("mcp.example.com", alice, nil, mcpPing))
		id, ok := header(v.Set, DecisionIDHeader)
		if !ok || has(v.Remove, DecisionIDHeader) || v.HeadersID != 0 {
			t.Fatalf("generated id %q set=%v removed=%v headersID=%d", id, ok, has(v.Remove, DecisionIDHeader), v.HeadersID)
		}
		if slices.Contains(ids, id) {
			t.Fatalf("decision id %q reused", id)
		}
		ids = append(ids, id)
	}
}
