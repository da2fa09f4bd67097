package check

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/extauthz/extauthz/internal/audit"
	"github.com/extauthz/extauthz/internal/ratelimit"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
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

// auditedFixture is a pipeline on limitedConfig(1) writing every record
// to out, through w.
func auditedFixture(t *testing.T) (*fixture, *audit.Writer, *lockedBuffer) {
	t.Helper()
	clk := newClock()
	p := compileLimited(t, clk, 1)
	out := &lockedBuffer{}
	w, err := audit.New(context.Background(), audit.Config{Sink: audit.SinkStdout, SampleAllowed: 1}, audit.Options{Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(p, Options{Now: clk.Now, Audit: w, RateLimiter: ratelimit.New(ratelimit.Options{Clock: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{pl: pl, clock: clk}, w, out
}

// TestAuditRecords: each decision writes one record with what the
// decision was about, valid against the schema; a denial tells the client
// its decision id; the records hold no token, secret or argument value.
func TestAuditRecords(t *testing.T) {
	f, w, out := auditedFixture(t)
	const argSecret = "sk-live-ARGUMENT-SECRET-123"
	alice := f.hs(t, map[string]any{"azp": "agent-app"})
	expired := f.hs(t, map[string]any{"exp": t0.Add(-2 * time.Hour).Unix()})
	// A presigned URL as a resource URI: its query is a bearer credential.
	const uriSecret = "presigned-URI-SECRET-456"
	bob := f.hs(t, map[string]any{"sub": "bob"})
	secrets := []string{secret, alice, expired, argSecret, "cookie-secret-value", bob, uriSecret}

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
		{"resource read, the URI's query left out", call("mcp.example.com", bob, nil,
			`{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"https://files.example.com/report.pdf?X-Amz-Signature=`+uriSecret+`"}}`),
			Allowed, func(t *testing.T, r audit.Record) {
				if r.Target != "https://files.example.com/report.pdf" || r.TargetKind != "resource" || r.Method != "resources/read" {
					t.Errorf("record %+v", r)
				}
			}, false},
	}
	for _, c := range cases {
		v := f.pl.Check(context.Background(), c.req)
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
	p := compileLimited(t, clk, n+1) // a burst no check reaches
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
	p := compileLimited(t, clk, 1000)
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

// TestAuditReauthorization: the record of a call answered with the
// in-session re-authorization (a token exchange that needs the user's
// consent) has every field right: the denial kind and its reason, the
// status the client got, the caller, the call, the exchange's audience,
// no rule (none decided), the lineage, and no token, secret or elicitation
// state.
func TestAuditReauthorization(t *testing.T) {
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: "sts-client-secret"}}})
	doc := consentDoc(sts.TokenURL, false)
	out := &lockedBuffer{}
	w, err := audit.New(context.Background(), audit.Config{Sink: audit.SinkStdout, SampleAllowed: 1}, audit.Options{Stdout: out})
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	pl := newPipeline(t, doc, Deps{Now: clk.Now, HTTPClient: sts.Client(), Getenv: func(string) string { return "sts-client-secret" }},
		Options{Now: clk.Now, Audit: w})
	tok := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": "https://a.example.com", "sub": "alice", "azp": "agent-app",
		"session_id": "sess-9", "iat": t0.Add(-time.Minute).Unix(), "exp": t0.Add(time.Hour).Unix()})
	req := agentReq(Headers{"authorization": "Bearer " + tok, "content-type": "application/json", "x-request-id": "req-reauth",
		"mcp-session-id": "mcp-sess-1"})
	req.Body = []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"calendar_add","arguments":{"when":"tomorrow","title":"1:1"}}}`)
	req.SourcePrincipal = "spiffe://corp/ns/agents/sa/planner"
	v := pl.Check(context.Background(), req)
	if v.Outcome != AuthorizationRequired {
		t.Fatalf("outcome %v (%s)", v.Outcome, v.Description)
	}
	if id, ok := header(v.ResponseHeaders, DecisionIDHeader); !ok || id != "req-reauth" {
		t.Errorf("decision id header %q %v", id, ok)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	line := bytes.TrimSpace(out.b.Bytes())
	if bytes.Count(line, []byte("\n")) != 0 {
		t.Fatalf("want one record, got:\n%s", line)
	}
	var raw any
	if err := json.Unmarshal(line, &raw); err != nil {
		t.Fatal(err)
	}
	if err := auditSchema(t).Validate(raw); err != nil {
		t.Errorf("the record does not match the schema: %v\n%s", err, line)
	}
	var got audit.Record
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if got.Latency < 0 || got.Time.IsZero() {
		t.Errorf("time %v latency %v", got.Time, got.Latency)
	}
	want := audit.Record{
		Schema: audit.SchemaVersion, Time: got.Time, DecisionID: "req-reauth", Route: "mcp",
		Allowed: false, Outcome: "authorization_required", Reason: v.Description, Status: v.Status(),
		Issuer: "a", Subject: "alice", Session: "sess-9", ClientID: "agent-app",
		SourcePrincipal: "spiffe://corp/ns/agents/sa/planner",
		Protocol:        "mcp", Method: "tools/call", Target: "calendar_add", TargetKind: "tool",
		Arguments:        []audit.Argument{{Name: "when"}, {Name: "title"}},
		Lineage:          audit.Lineage{Root: "mcp-sess-1"}, // the MCP session is the conversation
		ExchangeAudience: "https://calendar.example.com",
		Latency:          got.Latency,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("record\n%+v\nwant\n%+v", got, want)
	}
	if want.Reason == "" || want.Status != 200 && want.Status != 401 && want.Status != 403 {
		t.Errorf("the verdict's reason %q and status %d are not a re-authorization's", want.Reason, want.Status)
	}
	// Nothing the client must not see in the log: the token, the STS
	// secret, the argument values, the elicitation's state.
	secrets := []string{tok, "sts-client-secret", "tomorrow", "1:1"}
	if u := elicitationURL(t, v.Body); u != "" {
		secrets = append(secrets, u)
	}
	for _, s := range secrets {
		if bytes.Contains(line, []byte(s)) {
			t.Errorf("the record holds %.12s...", s)
		}
	}
}

// elicitationURL is the authorization URL a re-authorization answer
// carries (its state is a secret), "" when there is none.
func elicitationURL(t *testing.T, body []byte) string {
	t.Helper()
	var b struct {
		Result struct {
			Meta struct {
				AuthRequired struct {
					URL string `json:"url"`
				} `json:"auth_required"`
			} `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("answer %s: %v", body, err)
	}
	return b.Result.Meta.AuthRequired.URL
}

// TestAuditCopiesOnlyKeptArguments: a tool call's record costs the check
// path nothing when sampling leaves it out, and a kept one copies the
// arguments object, not the whole request (here padded with 30 KB of
// _meta the record never reads).
func TestAuditCopiesOnlyKeptArguments(t *testing.T) {
	clk := newClock()
	p := compileLimited(t, clk, 100)
	keep := false
	w, err := audit.New(context.Background(), audit.Config{Sink: audit.SinkStdout, SampleAllowed: 0.5, QueueSize: 1},
		audit.Options{Stdout: io.Discard, Rand: func() float64 {
			if keep {
				return 0
			}
			return 0.9
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	pl, err := New(p, Options{Now: clk.Now, Audit: w})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pl: pl, clock: clk}
	pad := strings.Repeat("x", 30<<10)
	req := call("mcp.example.com", f.hs(t, nil), Headers{"x-request-id": "req-1"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{"query":"q"},"_meta":{"pad":"`+pad+`"}}}`)
	v := pl.Check(context.Background(), req)
	if v.Outcome != Allowed {
		t.Fatalf("%v (%s)", v.Outcome, v.Description)
	}
	if got := string(auditArguments(req, &v.Call)); got != `{"query":"q"}` {
		t.Errorf("copied arguments %q", got)
	}
	start := clk.Now()
	if n := testing.AllocsPerRun(50, func() { pl.audit(context.Background(), req, &v, start) }); n != 0 {
		t.Errorf("a record sampled out cost %v allocations", n)
	}
	keep = true
	const runs = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		pl.audit(context.Background(), req, &v, start)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 4<<10 {
		t.Errorf("a kept record allocated %d bytes, want the arguments copied, not the %d-byte request", per, len(req.Body))
	}
}

// TestAuditURIMethodsDropQuery: every method named by a resource URI
// (jsonrpc.IsURIMethod) leaves the URI's query out of its audit record,
// where a presigned URL carries its credential, and names it a resource.
func TestAuditURIMethodsDropQuery(t *testing.T) {
	for _, method := range []string{"resources/read", "resources/subscribe", "skills/get", "resources/directory/read"} {
		t.Run(method, func(t *testing.T) {
			f, w, out := auditedFixture(t)
			pl := f.pl
			const secret = "presigned-URI-SECRET-789"
			tok := f.hs(t, map[string]any{"sub": "bob"})
			v := pl.Check(context.Background(), call("mcp.example.com", tok, nil,
				`{"jsonrpc":"2.0","id":6,"method":"`+method+`","params":{"uri":"https://files.example.com/x/?X-Amz-Signature=`+secret+`"}}`))
			if v.Outcome != Allowed {
				t.Fatalf("%v (%s)", v.Outcome, v.Description)
			}
			if err := w.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			rec := out.b.String()
			if strings.Contains(rec, secret) {
				t.Errorf("the record holds the URI's query:\n%s", rec)
			}
			if !strings.Contains(rec, `"target":"https://files.example.com/x/"`) || !strings.Contains(rec, `"resource"`) {
				t.Errorf("the record does not name the resource without its query:\n%s", rec)
			}
		})
	}
}
