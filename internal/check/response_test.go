package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// responseConfig: an MCP route served through ext_proc with rules on
// tools, prompts and resources, one without a response path, and an A2A
// agent's with one.
const responseConfig = `
issuers: [{name: a, secret: ` + secret + `}]
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    rules:
      - {name: writes, methods: [tools/call], names: ["delete_*"], scopes: [files:write]}
      - {name: admin prompts, methods: [prompts/get], names: ["admin_*"], claims: {groups: [admins]}}
      - {name: secrets, methods: [resources/read], names: ["file:///secret/*"], action: deny}
      - {name: no sampling, methods: ["sampling/*"], action: deny}
  - name: plain
    hosts: [plain.example.com]
    protocol: mcp
    issuers: [a]
  - {name: a2a agent, hosts: [a2a.example.com], protocol: a2a, issuers: [a], response_path: true}
`

func responsePipeline(t *testing.T, doc string, deps Deps) (*Pipeline, *clock) {
	t.Helper()
	return responsePipelineWith(t, doc, deps, nil)
}

// responsePipelineWith is responsePipeline on the shared tier st (nil:
// none).
func responsePipelineWith(t *testing.T, doc string, deps Deps, st *shared.Store) (*Pipeline, *clock) {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	deps.Now = clk.Now
	p, err := Compile(t.Context(), cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pl, err := New(p, Options{Now: clk.Now, Shared: st})
	if err != nil {
		t.Fatal(err)
	}
	return pl, clk
}

func responseToken(t *testing.T, sub string, claims jwt.MapClaims) string {
	c := jwt.MapClaims{"sub": sub, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	return testtoken.HMAC(t, "HS256", secret, c)
}

// TestForResponse: the response of a request is processed as allowed only
// for the identity the check allowed, by its metadata or its cached grant,
// and only when the request still passes what the check decided.
func TestForResponse(t *testing.T) {
	pl, _ := responsePipeline(t, responseConfig, Deps{})
	reader := responseToken(t, "alice", jwt.MapClaims{"scope": "files:read"})
	listBody := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	deleteBody := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_all"}}`
	allowed := func(scopes ...string) *Identity {
		return &Identity{Route: "files", Outcome: "allowed", Subject: "alice", Issuer: "a", Scopes: scopes}
	}
	// A checked request leaves its grant in the verdict cache.
	cached := call("mcp.example.com", reader, nil, listBody)
	if v := pl.Check(context.Background(), cached); v.Outcome != Allowed {
		t.Fatalf("check: %v %s", v.Outcome, v.Description)
	}
	tests := []struct {
		name    string
		req     *Request
		id      *Identity
		wantErr error
		subject string
	}{
		{name: "metadata identity", req: call("mcp.example.com", "x.y.z", nil, listBody), id: allowed("files:read"), subject: "alice"},
		{name: "metadata without any token", req: func() *Request {
			r := call("mcp.example.com", "", nil, listBody)
			delete(r.Headers, "authorization")
			return r
		}(), id: allowed(), subject: "alice"},
		{name: "metadata of a denial", req: call("mcp.example.com", reader, nil, listBody), id: &Identity{Route: "files", Outcome: "forbidden", Subject: "alice"}, wantErr: ErrNotAllowed},
		{name: "metadata of a dry run", req: call("mcp.example.com", reader, nil, listBody), id: &Identity{Route: "files", Outcome: "dry_run", Subject: "alice"}, wantErr: ErrNotAllowed},
		{name: "metadata naming a route without a response path", req: call("mcp.example.com", reader, nil, listBody), id: &Identity{Route: "plain", Outcome: "allowed", Subject: "alice"}, wantErr: ErrNoRoute},
		{name: "metadata naming a route no longer there", req: call("mcp.example.com", reader, nil, listBody), id: &Identity{Route: "gone", Outcome: "allowed", Subject: "alice"}, wantErr: ErrNotAllowed},
		{name: "metadata naming the route for another host (context_extensions)", req: call("elsewhere.example.com", reader, nil, listBody), id: allowed("files:read"), subject: "alice"},
		{name: "metadata without a subject", req: call("mcp.example.com", reader, nil, listBody), id: &Identity{Route: "files", Outcome: "allowed"}, wantErr: ErrNotAllowed},
		{name: "metadata whose scopes the rules refuse", req: call("mcp.example.com", reader, nil, deleteBody), id: allowed("files:read"), wantErr: ErrNotAllowed},
		{name: "metadata whose scopes the rules accept", req: call("mcp.example.com", reader, nil, deleteBody), id: allowed("files:write"), subject: "alice"},
		{name: "no metadata: the cached grant", req: call("mcp.example.com", reader, nil, listBody), subject: "alice"},
		{name: "no metadata: the cached grant, refused by the rules", req: call("mcp.example.com", reader, nil, deleteBody), wantErr: ErrNotAllowed},
		{name: "no metadata: a token never checked", req: call("mcp.example.com", responseToken(t, "mallory", nil), nil, listBody), wantErr: ErrNotAllowed},
		{name: "no metadata, no token", req: func() *Request {
			r := call("mcp.example.com", "", nil, listBody)
			delete(r.Headers, "authorization")
			return r
		}(), wantErr: ErrNotAllowed},
		{name: "malformed call", req: call("mcp.example.com", reader, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"x"}`), id: allowed(), wantErr: ErrNotAllowed},
		{name: "route without a response path", req: call("plain.example.com", reader, nil, listBody), id: &Identity{Route: "plain", Outcome: "allowed", Subject: "alice"}, wantErr: ErrNoRoute},
		{name: "no route", req: call("nowhere.example.com", reader, nil, listBody), wantErr: ErrNoRoute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, err := pl.ForResponse(context.Background(), tt.req, tt.id)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (x.Subject() != tt.subject || x.Route() != "files") {
				t.Fatalf("exchange for %q on %q", x.Subject(), x.Route())
			}
		})
	}
}

// TestForResponseRouteVariant: the response path finds its route as the
// check does, refusing a path that has a route's prefix only in another
// case, which an upstream routing as Express does serves as that route's:
// without the check's metadata, the cached grant of the laxer route it
// would fall to must not answer for it.
func TestForResponseRouteVariant(t *testing.T) {
	pl, _ := responsePipeline(t, `
issuers: [{name: a, secret: `+secret+`}]
routes:
  - name: admin
    path_prefix: /admin
    protocol: mcp
    issuers: [a]
    response_path: true
    rules:
      - {methods: ["*"], scopes: [admin]}
  - name: catch-all
    default: true
    protocol: mcp
    issuers: [a]
    response_path: true
`, Deps{})
	tok := responseToken(t, "alice", nil)
	at := func(path string) *Request {
		r := call("mcp.example.com", tok, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		r.Path, r.Headers[":path"] = path, path
		return r
	}
	if v := pl.Check(context.Background(), at("/mcp")); v.Outcome != Allowed {
		t.Fatalf("check: %v %s", v.Outcome, v.Description)
	}
	if x, err := pl.ForResponse(context.Background(), at("/mcp"), nil); err != nil || x.Route() != "catch-all" {
		t.Fatalf("the catch-all's own path: %v", err)
	}
	if _, err := pl.ForResponse(context.Background(), at("/ADMIN"), nil); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("the admin prefix in capitals: err = %v, want %v", err, ErrNotAllowed)
	}
}

// TestKeep: a list entry stays exactly when the caller could make the call
// it stands for; a template stays unless every URI is refused alike.
func TestKeep(t *testing.T) {
	pl, _ := responsePipeline(t, responseConfig+`
  - name: closed
    hosts: [closed.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    default_action: deny
    rules:
      - {name: lists, methods: ["*/list"]}
      - {name: reads, methods: [tools/call], names: ["read_*"]}
`, Deps{})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	user := func(host string, scopes []string, claims RuleClaims) *Exchange {
		route := map[string]string{"mcp.example.com": "files", "closed.example.com": "closed"}[host]
		x, err := pl.ForResponse(context.Background(), call(host, "t", nil, list), &Identity{Route: route, Outcome: "allowed", Subject: "u", Scopes: scopes, Claims: claims})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	reader := user("mcp.example.com", []string{"files:read"}, nil)
	admin := user("mcp.example.com", []string{"files:write"}, RuleClaims{{Name: "groups", Value: []any{"admins"}}})
	closed := user("closed.example.com", nil, nil)
	tests := []struct {
		name        string
		x           *Exchange
		kind, entry string
		want        bool
	}{
		{"reader: a tool no rule names", reader, mcpresponse.KindTool, "read_file", true},
		{"reader: a tool needing a scope it lacks", reader, mcpresponse.KindTool, "delete_file", false},
		{"admin: the same tool", admin, mcpresponse.KindTool, "delete_file", true},
		{"reader: an admin prompt", reader, mcpresponse.KindPrompt, "admin_report", false},
		{"admin: an admin prompt", admin, mcpresponse.KindPrompt, "admin_report", true},
		{"reader: a plain prompt", reader, mcpresponse.KindPrompt, "summary", true},
		{"a denied resource", admin, mcpresponse.KindResource, "file:///secret/key", false},
		{"a denied resource spelled otherwise", admin, mcpresponse.KindResource, "FILE:///secret/%6Bey", false},
		{"an open resource", reader, mcpresponse.KindResource, "file:///docs/a", true},
		{"an unreadable resource URI", reader, mcpresponse.KindResource, "not a uri\x00", false},
		{"a resource URI with dot segments, even inside the open tree", reader, mcpresponse.KindResource, "file:///docs/x/../a", false},
		{"a resource URI with encoded dot segments", reader, mcpresponse.KindResource, "file:///docs/%2E/a", false},
		{"a template: the URI decides", reader, mcpresponse.KindResourceTemplate, "file:///secret/{name}", true},
		{"default deny: a tool no rule allows", closed, mcpresponse.KindTool, "write_file", false},
		{"default deny: an allowed tool", closed, mcpresponse.KindTool, "read_file", true},
		{"default deny: a template nothing allows", closed, mcpresponse.KindResourceTemplate, "file:///{name}", false},
		{"a skill whose files are open", reader, mcpresponse.KindSkill, "file:///docs/hello/SKILL.md", true},
		{"a skill among denied files", reader, mcpresponse.KindSkill, "file:///secret/deploy/SKILL.md", false},
		{"a skill spelled otherwise", reader, mcpresponse.KindSkill, "FILE:///%73ecret/deploy/SKILL.md", false},
		{"a skill whose directory holds the denied ones", reader, mcpresponse.KindSkill, "file:///SKILL.md", false},
		{"a skill URI with dot segments", reader, mcpresponse.KindSkill, "file:///docs/../secret/x/SKILL.md", false},
		{"default deny: a skill nothing allows getting", closed, mcpresponse.KindSkill, "file:///docs/hello/SKILL.md", false},
		{"an unknown kind", reader, "widget", "x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.x.Keep(tt.kind, tt.entry, nil); got != tt.want {
				t.Fatalf("Keep(%s %q) = %v, want %v", tt.kind, tt.entry, got, tt.want)
			}
		})
	}
	// Keep runs once per listed entry: without rule expressions to
	// evaluate, a tool costs no allocation, annotations or not.
	annotations := json.RawMessage(`{"readOnlyHint":true,"title":"Delete"}`)
	for _, name := range []string{"read_file", "delete_file"} {
		if n := testing.AllocsPerRun(20, func() { admin.Keep(mcpresponse.KindTool, name, annotations) }); n != 0 {
			t.Errorf("Keep(%q) allocates %v times", name, n)
		}
	}
}

// TestSessionBorn: the session id an initialize answer creates belongs to
// the caller from then on; on a response-path route an id nobody saw
// created is unborn.
func TestSessionBorn(t *testing.T) {
	pl, clk := responsePipeline(t, responseConfig, Deps{})
	ctx := context.Background()
	r, _ := pl.Policy().routes.ByName("files")
	plain, _ := pl.Policy().routes.ByName("plain")
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"c","version":"1"}}}`
	exchange := func(sub, body string) *Exchange {
		x, err := pl.ForResponse(context.Background(), call("mcp.example.com", "t", nil, body), &Identity{Route: "files", Outcome: "allowed", Subject: sub})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	if !pl.sessionUnborn(ctx, r, "s-1") {
		t.Fatal("an id nobody created is not unborn")
	}
	if pl.sessionUnborn(ctx, plain, "s-1") {
		t.Fatal("a route without a response path refuses unborn ids")
	}
	if exchange("alice", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).SessionBorn(ctx, "s-1") {
		t.Fatal("a session was born of a tools/list answer")
	}
	if !exchange("alice", initialize).SessionBorn(ctx, "s-1") {
		t.Fatal("initialize answer: not bound")
	}
	if pl.sessionUnborn(ctx, r, "s-1") {
		t.Fatal("a born session is unborn")
	}
	if b, _ := pl.state.sessions.Lookup(bindingKey(bindSession, "s-1")); b.Subject != "alice" || !b.ElicitationURL {
		t.Fatalf("binding %+v", b)
	}
	if exchange("mallory", initialize).SessionBorn(ctx, "s-1") {
		t.Fatal("an id another user holds was bound again")
	}
	if exchange("alice", initialize).SessionBorn(ctx, string(bytes.Repeat([]byte("x"), maxSessionID+1))) {
		t.Fatal("an overlong id was bound")
	}
	// A check of the born session by its owner passes; by anybody else it
	// is a conflict.
	alice, mallory := responseToken(t, "alice", nil), responseToken(t, "mallory", nil)
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if v := pl.Check(ctx, call("mcp.example.com", alice, Headers{"mcp-session-id": "s-1"}, list)); v.Outcome != Allowed {
		t.Fatalf("owner: %v %s", v.Outcome, v.Description)
	}
	if v := pl.Check(ctx, call("mcp.example.com", mallory, Headers{"mcp-session-id": "s-1"}, list)); v.Outcome != SessionConflict {
		t.Fatalf("another user: %v", v.Outcome)
	}
	// An id nobody saw created is refused 404 (and not bound) on the
	// response-path route, bound on first sight elsewhere.
	for range 2 {
		v := pl.Check(ctx, call("mcp.example.com", mallory, Headers{"mcp-session-id": "s-guess"}, list))
		if v.Outcome != UnknownSession || v.Status() != 404 || !bytes.Contains(v.Body, []byte(`"id":2`)) {
			t.Fatalf("unborn session: %v %d %s", v.Outcome, v.Status(), v.Body)
		}
	}
	if v, _ := pl.Explain(ctx, call("mcp.example.com", alice, Headers{"mcp-session-id": "s-guess"}, list)); v.Outcome != UnknownSession {
		t.Fatalf("explain: %v", v.Outcome)
	}
	if v := pl.Check(ctx, call("plain.example.com", mallory, Headers{"mcp-session-id": "s-guess"}, list)); v.Outcome != Allowed {
		t.Fatalf("first sight elsewhere: %v %s", v.Outcome, v.Description)
	}
	clk.Advance(2 * time.Hour) // past the idle timeout
	if !pl.sessionUnborn(ctx, r, "s-1") {
		t.Fatal("an expired binding still counts as born")
	}
}

// TestReauthorization: an upstream refusal on an exchanging route becomes
// the in-session re-authorization answer in the form the client reads,
// and the session's exchanged tokens are dropped so the retry gets a new
// one.
func TestReauthorization(t *testing.T) {
	sts := ststest.New(t, ststest.Options{Now: func() time.Time { return t0 }, Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}}})
	doc := fmt.Sprintf(`
issuers: [{name: a, secret: %s}]
exchanges:
  - {name: sts, token_endpoint: %s, client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    exchange: {sts: sts, audience: [https://files.example.com], methods: [tools/call], authorize_url: "https://idp.example.com/authorize?client_id=files"}
  - name: noauthorize
    hosts: [other.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    exchange: {sts: sts, audience: [https://files.example.com]}
`, secret, sts.TokenURL)
	pl, _ := responsePipeline(t, doc, Deps{Getenv: func(string) string { return "sts-secret" }, HTTPClient: sts.Client()})
	ctx := context.Background()
	tok := responseToken(t, "alice", nil)
	toolCall := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file"}}`
	// Two sessions born of initialize answers: s-2's client declared URL
	// elicitation.
	for sid, caps := range map[string]string{"s-1": `{}`, "s-2": `{"elicitation":{"url":{}}}`} {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"c","version":"1"}}}`
		x, err := pl.ForResponse(context.Background(), call("mcp.example.com", tok, nil, init), &Identity{Route: "files", Outcome: "allowed", Subject: "alice", Issuer: "a"})
		if err != nil || !x.SessionBorn(ctx, sid) {
			t.Fatalf("session %s not born: %v", sid, err)
		}
	}
	// A first call exchanges a token for the session.
	if v := pl.Check(ctx, call("mcp.example.com", tok, Headers{"mcp-session-id": "s-1"}, toolCall)); v.Outcome != Allowed {
		t.Fatalf("check: %v %s", v.Outcome, v.Description)
	}
	// Explain says an upstream refusal of the call would be answered so.
	_, steps := pl.Explain(ctx, call("mcp.example.com", tok, Headers{"mcp-session-id": "s-1"}, toolCall))
	if !slices.ContainsFunc(steps, func(s Step) bool { return s.Name == "response" && s.Outcome == "re-authorize" }) {
		t.Fatalf("explain does not tell of re-authorization: %+v", steps)
	}
	calls := sts.Calls()
	tests := []struct {
		name, host, body string
		headers          Headers
		want             string // in the body; "" for no answer
	}{
		{name: "tools/call: isError tool result", host: "mcp.example.com", body: toolCall, headers: Headers{"mcp-session-id": "s-1"}, want: `"isError":true`},
		{name: "the session declared URL elicitation: -32042", host: "mcp.example.com", body: toolCall, headers: Headers{"mcp-session-id": "s-2"}, want: `"code":-32042`},
		{name: "tools/list without URL elicitation", host: "mcp.example.com", body: `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, headers: Headers{"mcp-session-id": "s-1"}, want: ""},
		{name: "a notification", host: "mcp.example.com", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, want: ""},
		{name: "no authorize_url", host: "other.example.com", body: toolCall, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			route := map[string]string{"mcp.example.com": "files", "other.example.com": "noauthorize"}[tt.host]
			x, err := pl.ForResponse(context.Background(), call(tt.host, tok, tt.headers, tt.body), &Identity{Route: route, Outcome: "allowed", Subject: "alice", Issuer: "a"})
			if err != nil {
				t.Fatal(err)
			}
			body, ok := x.Reauthorization(ctx)
			if ok != (tt.want != "") || !bytes.Contains(body, []byte(tt.want)) {
				t.Fatalf("answer %v %s, want %q", ok, body, tt.want)
			}
			if ok && !bytes.Contains(body, []byte(`"id":7`)) {
				t.Fatalf("the answer does not carry the request's id: %s", body)
			}
		})
	}
	// The retry exchanges again: the dropped token is not reused.
	if v := pl.Check(ctx, call("mcp.example.com", tok, Headers{"mcp-session-id": "s-1"}, toolCall)); v.Outcome != Allowed {
		t.Fatalf("retry: %v %s", v.Outcome, v.Description)
	}
	if got := sts.Calls(); got != calls+1 {
		t.Fatalf("STS calls %d, want %d: the retry reused the dropped token", got, calls+1)
	}
	if pl.ElicitationCount() != 2 {
		t.Fatalf("%d elicitations pending, want 2", pl.ElicitationCount())
	}
}

func TestReauthorizationFor(t *testing.T) {
	tests := []struct {
		name   string
		status int
		www    string
		want   bool
	}{
		{"401", 401, `Bearer error="invalid_token"`, true},
		{"401 without a challenge", 401, "", true},
		{"403 insufficient_scope", 403, `Bearer error="insufficient_scope", scope="files:write"`, true},
		{"403 otherwise", 403, "", false},
		{"200", 200, "", false},
		{"500", 500, `Bearer error="invalid_token"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReauthorizationFor(tt.status, tt.www); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

// TestExchangeKeepsItsPolicy: a reload while an answer is being processed
// changes nothing of what is done with it; requests after the reload are
// decided by the new policy.
func TestExchangeKeepsItsPolicy(t *testing.T) {
	pl, _ := responsePipeline(t, responseConfig, Deps{}) // task ownership on by default
	callBody := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","task":{}}}`
	id := &Identity{Route: "files", Outcome: "allowed", Subject: "alice", Issuer: "a", Scopes: []string{"files:read"}}
	x, err := pl.ForResponse(context.Background(), call("mcp.example.com", "t", nil, callBody), id)
	if err != nil {
		t.Fatal(err)
	}

	// The new policy refuses every tool call and binds no tasks.
	after := strings.Replace(responseConfig, "    rules:\n", "    rules:\n      - {name: no tools, methods: [tools/call], action: deny}\n", 1) +
		"sessions: {task_ownership: false}\n"
	cfg, err := config.Parse([]byte(after))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(t.Context(), cfg, Deps{Now: pl.now})
	if err != nil {
		t.Fatal(err)
	}
	old := swap(t, pl, p)
	t.Cleanup(old.Close)

	if !x.BindsTasks() {
		t.Error("the exchange lost its policy's task ownership")
	}
	if !x.Keep(mcpresponse.KindTool, "read_file", nil) {
		t.Error("the exchange filters with the new policy's rules")
	}
	if !x.TaskCreatedBy(context.Background(), "task-1") || pl.TaskCount() != 1 {
		t.Errorf("the task was not bound: %d tasks", pl.TaskCount())
	}
	if _, err := pl.ForResponse(context.Background(), call("mcp.example.com", "t", nil, callBody), id); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("a request after the reload: %v, want %v", err, ErrNotAllowed)
	}
	y, err := pl.ForResponse(context.Background(), call("mcp.example.com", "t", nil, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`), id)
	if err != nil {
		t.Fatal(err)
	}
	if y.BindsTasks() || y.Keep(mcpresponse.KindTool, "read_file", nil) {
		t.Error("an exchange after the reload does not see the new policy")
	}
}

// TestForResponseRequestRules: rules whose expressions read the request
// (its source, headers, the call's arguments) decide the answer's request
// as they decided the check, without the grant's or call's part missing.
func TestForResponseRequestRules(t *testing.T) {
	pl, _ := responsePipeline(t, responseConfig+`
  - name: mesh
    hosts: [mesh.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    rules:
      - {name: mesh only, methods: ["*"], action: deny, when: '!request.source.address.startsWith("10.")'}
      - {name: own files, methods: [tools/call], names: [read_file], when: 'mcp.arguments.path.startsWith("/home/" + identity.subject + "/") && jwt.team == "a"'}
      - {name: finance, methods: [tools/call], names: [refund], when: '"finance" in jwt.groups'}
`, Deps{})
	id := &Identity{Route: "mesh", Outcome: "allowed", Subject: "alice", Issuer: "a", Claims: RuleClaims{{Name: "team", Value: "a"}}}
	read := func(path string) string {
		return `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + path + `"}}}`
	}
	refund := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"refund"}}`
	inGroup := func(group string) *Identity {
		return &Identity{Route: "mesh", Outcome: "allowed", Subject: "alice", Issuer: "a", Claims: RuleClaims{{Name: "groups", Value: []any{group}}}}
	}
	tests := []struct {
		name, addr, body string
		id               *Identity
		wantErr          error
	}{
		{name: "identity-only rule allows", addr: "10.0.0.7", body: refund, id: inGroup("finance")},
		{name: "identity-only rule refuses", addr: "10.0.0.7", body: refund, id: inGroup("sales"), wantErr: ErrNotAllowed},
		{name: "identity-only rule without the claim", addr: "10.0.0.7", body: refund, wantErr: ErrNotAllowed},
		{name: "list from the mesh", addr: "10.0.0.7", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{name: "list from outside", addr: "192.0.2.1", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, wantErr: ErrNotAllowed},
		{name: "list, source unknown", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, wantErr: ErrNotAllowed},
		{name: "own file", addr: "10.0.0.7", body: read("/home/alice/a")},
		{name: "another's file", addr: "10.0.0.7", body: read("/home/bob/a"), wantErr: ErrNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := call("mesh.example.com", "t", nil, tt.body)
			req.SourceAddress = tt.addr
			who := id
			if tt.id != nil {
				who = tt.id
			}
			if _, err := pl.ForResponse(context.Background(), req, who); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestTaskToolSurvivesItsBinding: on a route whose response path records
// the tool each MCP task was created for, a task whose tool is not known
// (its binding idled out, or was pushed out by the user's own newer tasks,
// or its creation was never seen) is judged as a task of any tool: its
// operations pass only what every tool's would. A token that may not call
// delete_* gets no result of a delete_* task by having the binding
// forgotten first; a token that may call every tool, and a route with no
// rule on tools, still reach such tasks, and A2A tasks (never recorded
// with a tool) are not affected.
func TestTaskToolSurvivesItsBinding(t *testing.T) {
	doc := responseConfig + `
  - name: open
    hosts: [open.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
  - name: agent
    hosts: [agent.example.com]
    protocol: a2a
    issuers: [a]
    response_path: true
    rules:
      - {name: writes, methods: [tools/call], names: ["delete_*"], scopes: [files:write]}
  - name: cel
    hosts: [cel.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    rules:
      - {name: no rm, methods: [tools/call], names: ["*"], action: deny, when: 'mcp.name == "rm"'}
  - name: results
    hosts: [results.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    rules:
      - {name: audited results, methods: [tasks/result], names: ["delete_*"], claims: {groups: [audit]}}
sessions: {max_per_subject: 3, idle_timeout: 10m}
`
	writer := responseToken(t, "alice", jwt.MapClaims{"scope": "files:write"})
	reader := responseToken(t, "alice", jwt.MapClaims{"scope": "files:read"})
	ctx := t.Context()
	// created has tok's user create task by a tools/call of tool, which
	// the check allows and the response path records.
	created := func(t *testing.T, pl *Pipeline, tok, task, tool string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","task":{}}}`
		if v := pl.Check(ctx, call("mcp.example.com", tok, nil, body)); v.Outcome != Allowed {
			t.Fatalf("tools/call %s: %v %s", tool, v.Outcome, v.Description)
		}
		x, err := pl.ForResponse(ctx, call("mcp.example.com", tok, nil, body), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !x.TaskCreatedBy(ctx, task) {
			t.Fatalf("task %s not bound", task)
		}
	}
	result := func(task string) string {
		return `{"jsonrpc":"2.0","id":9,"method":"tasks/result","params":{"taskId":"` + task + `"}}`
	}
	for _, tt := range []struct {
		name string
		lose func(t *testing.T, pl *Pipeline, clk *clock)
	}{
		{"known", func(*testing.T, *Pipeline, *clock) {}},
		{"idled out", func(_ *testing.T, _ *Pipeline, clk *clock) { clk.Advance(11 * time.Minute) }},
		{"pushed out by the user's own tasks", func(t *testing.T, pl *Pipeline, _ *clock) {
			for i := range 3 {
				created(t, pl, reader, fmt.Sprint("T-read-", i), "read_file")
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pl, clk := responsePipeline(t, doc, Deps{})
			created(t, pl, writer, "T-del", "delete_all")
			tt.lose(t, pl, clk)
			v := pl.Check(ctx, call("mcp.example.com", reader, nil, result("T-del")))
			if v.Outcome != InsufficientScope || v.Status() != 403 || !strings.Contains(string(v.Body), `"id":9`) {
				t.Fatalf("the reader polls the delete task: %v %d %s, want 403 insufficient_scope with the id", v.Outcome, v.Status(), v.Body)
			}
			if _, err := pl.ForResponse(ctx, call("mcp.example.com", reader, nil, result("T-del")), nil); !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("the response path of the reader's poll: %v, want %v", err, ErrNotAllowed)
			}
			if v := pl.Check(ctx, call("mcp.example.com", writer, nil, result("T-del"))); v.Outcome != Allowed {
				t.Fatalf("the writer polls the delete task: %v %s", v.Outcome, v.Description)
			}
		})
	}
	pl, _ := responsePipeline(t, doc, Deps{})
	for _, tt := range []struct {
		name, host, body string
		want             Outcome
	}{
		{"a task of a route with no rule on tools", "open.example.com", result("T-never-seen"), Allowed},
		{"an A2A task, not recorded at creation", "agent.example.com", `{"jsonrpc":"2.0","id":9,"method":"GetTask","params":{"id":"T-stream"}}`, Allowed},
		{"an A2A v0.3 task", "agent.example.com", `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"id":"T-stream"}}`, Allowed},
		{"a rule deciding by the tool's name cannot decide without it", "cel.example.com", result("T-never-seen"), Forbidden},
		{"a rule on the operation under the tool's name", "results.example.com", result("T-never-seen"), Forbidden},
	} {
		if v := pl.Check(ctx, call(tt.host, reader, nil, tt.body)); v.Outcome != tt.want {
			t.Errorf("%s: %v %s, want %v", tt.name, v.Outcome, v.Description, tt.want)
		}
	}
}

// TestContextCreatedByAcrossReplicas: the context an agent assigned in its
// answer is bound through the shared tier, as one a message names: another
// user is refused it on every replica, an answer naming it on another
// replica does not take it over, and a shared tier that does not answer
// binds nothing. A route that binds no sessions binds no contexts.
func TestContextCreatedByAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	doc := agentDoc(
		"  - {name: agents, hosts: [agents.example.com], protocol: a2a, issuers: [dex], response_path: true}\n",
		"  - {name: open, hosts: [open.example.com], protocol: a2a, issuers: [dex], response_path: true, mcp: {session_binding: false}}\n")
	replica := func() *Pipeline {
		st, err := shared.New(ctx, shared.Config{Addrs: []string{srv.Addr}, OpTimeout: time.Second}, shared.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		p := compileDoc(t, doc, Deps{Now: newClock().Now})
		t.Cleanup(p.Close)
		pl, err := New(p, Options{Now: newClock().Now, Shared: st})
		if err != nil {
			t.Fatal(err)
		}
		return mustLoad(t, pl)
	}
	mint := agentMint(t)
	alice, bob := mint(nil), mint(jwt.MapClaims{"sub": "bob"})
	const send = `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"messageId":"m1","role":"user","parts":[]}}}`
	// answered is what the response path does with an answer on host
	// assigning id to tok's message: whether tok's user holds id.
	answered := func(t *testing.T, pl *Pipeline, host, tok, id string) bool {
		t.Helper()
		if v := pl.Check(ctx, call(host, tok, nil, send)); v.Outcome != Allowed {
			t.Fatalf("message/send: %v %s", v.Outcome, v.Description)
		}
		x, err := pl.ForResponse(ctx, call(host, tok, nil, send), nil)
		if err != nil {
			t.Fatal(err)
		}
		return x.ContextCreatedBy(ctx, id)
	}
	list := `{"jsonrpc":"2.0","id":5,"method":"ListTasks","params":{"contextId":"ctx-server-1"}}`
	a, b := replica(), replica()
	if !answered(t, a, "agents.example.com", alice, "ctx-server-1") {
		t.Fatal("alice's assigned context was not bound")
	}
	// A message naming its context had it bound by the check: its answer
	// is not read for one.
	if x, err := a.ForResponse(ctx, call("agents.example.com", alice, nil, a2aSend("ctx-alice-own")), nil); err != nil || x.BindsContexts() {
		t.Errorf("a message naming its context: %v, answer read for a context %v", err, err == nil && x.BindsContexts())
	}
	for _, tt := range []struct {
		name, tok, body string
		want            Outcome
	}{
		{"bob lists it", bob, list, SessionConflict},
		{"bob sends into it", bob, a2aSend("ctx-server-1"), SessionConflict},
		{"alice lists it", alice, list, Allowed},
		{"alice sends into it", alice, a2aSend("ctx-server-1"), Allowed},
	} {
		if v := b.Check(ctx, call("agents.example.com", tt.tok, nil, tt.body)); v.Outcome != tt.want {
			t.Errorf("%s on another replica: %v %s, want %v", tt.name, v.Outcome, v.Description, tt.want)
		}
	}
	if answered(t, b, "agents.example.com", bob, "ctx-server-1") {
		t.Error("an answer to bob on another replica took alice's context over")
	}
	if v := b.Check(ctx, call("agents.example.com", alice, nil, list)); v.Outcome != Allowed {
		t.Errorf("alice lists her context after bob's answer: %v %s", v.Outcome, v.Description)
	}
	if answered(t, a, "open.example.com", alice, "ctx-open") {
		t.Error("a route that binds no sessions bound a context")
	}
	c := replica()
	srv.Kill()
	if answered(t, c, "agents.example.com", alice, "ctx-server-2") {
		t.Error("a context was bound with the shared tier down")
	}
}
