package policy

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func newEnv(t testing.TB, o Options) *Env {
	t.Helper()
	env, err := NewEnv(o)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func compile(t testing.TB, env *Env, src string) *Program {
	t.Helper()
	p, err := env.Compile(src)
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	return p
}

// alice is a user of the finance group calling read_file through the
// billing agent.
func alice() *Input {
	return &Input{
		JWT: map[string]any{
			"sub":    "alice",
			"groups": []any{"finance", "staff"},
			"level":  float64(3),
			"admin":  false,
			"tenant": map[string]any{"id": "acme"},
		},
		Identity: Identity{Issuer: "corp", Subject: "corp:alice", Session: "s1", ClientID: "billing-agent",
			Scopes: []string{"files:read", "tools:call"}, Actors: []string{"billing-agent"}},
		Request: Request{Method: "POST", Host: "mcp.example.com", Path: "/mcp",
			Headers: map[string]string{"x-tenant": "acme"},
			Source:  Source{Principal: "spiffe://example.com/ns/agents/sa/billing", Address: "10.0.0.7"}},
		MCP: MCP{Method: "tools/call", Name: "read_file", ProtocolVersion: "2025-11-25", Session: "m1",
			Arguments:    `{"path": "/workspace/corp:alice/notes.txt", "limit": 10, "recursive": false, "tags": ["a","b"], "opts": {"mode": "ro"}, "esc\u0061ped": "y\"es"}`,
			BodyComplete: true,
			Annotations:  map[string]any{"destructiveHint": false, "readOnlyHint": true}},
		A2A:     A2A{Method: "SendMessage", ContextID: "c1", TaskID: "t1", Skill: "refund", Tenant: "acme"},
		Lineage: Lineage{Root: "r1", Parent: "p1", Depth: 2, Actors: []string{"planner", "billing-agent"}, Trusted: true},
		Now:     time.Date(2026, 3, 2, 17, 30, 0, 0, time.UTC),
	}
}

// TestVariables reads every field of every variable, as users write them.
func TestVariables(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct {
		name, expr string
		want       bool
	}{
		{"jwt string", `jwt.sub == "alice"`, true},
		{"jwt list", `"finance" in jwt.groups`, true},
		{"jwt number", `jwt.level >= 3`, true},
		{"jwt bool", `!jwt.admin`, true},
		{"jwt nested", `jwt.tenant.id == "acme"`, true},
		{"jwt index", `jwt["sub"] == "alice"`, true},
		{"jwt has", `has(jwt.sub) && !has(jwt.email)`, true},
		{"identity issuer", `identity.issuer == "corp"`, true},
		{"identity subject", `identity.subject == "corp:alice"`, true},
		{"identity session", `identity.session == "s1"`, true},
		{"identity client_id", `identity.client_id == "billing-agent"`, true},
		{"identity scopes", `"files:read" in identity.scopes && !("admin" in identity.scopes)`, true},
		{"identity actors", `identity.actors == ["billing-agent"]`, true},
		{"request method", `request.method == "POST"`, true},
		{"request host", `request.host == "mcp.example.com"`, true},
		{"request path", `request.path.startsWith("/mcp")`, true},
		{"request headers", `request.headers["x-tenant"] == "acme"`, true},
		{"request header absent", `!("x-other" in request.headers)`, true},
		{"request source principal", `request.source.principal.endsWith("/sa/billing")`, true},
		{"request source address", `request.source.address == "10.0.0.7"`, true},
		{"mcp method", `mcp.method == "tools/call"`, true},
		{"mcp name", `mcp.name == "read_file"`, true},
		{"mcp uri empty", `mcp.uri == "" && !has(mcp.uri)`, true},
		{"mcp protocol_version", `mcp.protocol_version >= "2025-06-18"`, true},
		{"mcp session", `mcp.session == "m1"`, true},
		{"mcp arguments string", `mcp.arguments.path == "/workspace/corp:alice/notes.txt"`, true},
		{"mcp arguments number", `mcp.arguments.limit == 10 && mcp.arguments.limit < 11.5`, true},
		{"mcp arguments bool", `mcp.arguments.recursive == false`, true},
		{"mcp arguments list", `mcp.arguments.tags.all(t, t in ["a", "b"]) && size(mcp.arguments.tags) == 2`, true},
		{"mcp arguments object", `mcp.arguments.opts.mode == "ro"`, true},
		{"mcp arguments escaped key and value", `mcp.arguments.escaped == "y\"es"`, true},
		{"mcp arguments size", `size(mcp.arguments) == 6`, true},
		{"mcp arguments in", `"path" in mcp.arguments && !("paths" in mcp.arguments)`, true},
		{"mcp arguments keys", `mcp.arguments.exists(k, k == "opts")`, true},
		{"mcp annotations", `mcp.annotations.readOnlyHint && !mcp.annotations.destructiveHint`, true},
		{"a2a method", `a2a.method == "SendMessage"`, true},
		{"a2a context_id", `a2a.context_id == "c1"`, true},
		{"a2a task_id", `a2a.task_id == "t1"`, true},
		{"a2a skill", `a2a.skill == "refund"`, true},
		{"a2a tenant", `a2a.tenant == "acme"`, true},
		{"lineage root", `lineage.root == "r1"`, true},
		{"lineage parent", `lineage.parent == "p1"`, true},
		{"lineage depth", `lineage.depth < 3`, true},
		{"lineage actors", `lineage.actors[0] == "planner"`, true},
		{"lineage trusted", `lineage.trusted`, true},
		{"now", `now.getHours("UTC") == 17 && now > timestamp("2026-01-01T00:00:00Z")`, true},
		{"now in a zone", `now.getHours("Europe/Berlin") == 18`, true},
		{"strings extension", `mcp.name.lowerAscii().split("_")[0] == "read"`, true},
		{"cleanPath", `cleanPath("/a/b/../../etc/passwd") == "/etc/passwd" && cleanPath("a\\..\\..\\x") == "../x"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := compile(t, env, tt.expr)
			got, err := p.Eval(alice())
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if got != tt.want {
				t.Errorf("Eval = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestZeroInput: an empty input reads as empty values, never panics.
func TestZeroInput(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct {
		name, expr string
		want       bool
		wantErr    bool
	}{
		{"strings empty", `identity.subject == "" && request.source.address == "" && a2a.skill == ""`, true, false},
		{"lists empty", `size(identity.scopes) == 0 && size(lineage.actors) == 0`, true, false},
		{"maps empty", `size(jwt) == 0 && size(request.headers) == 0 && size(mcp.annotations) == 0`, true, false},
		{"has on empty", `!has(identity.subject) && !has(jwt.sub) && !has(request.headers)`, true, false},
		{"arguments without the body", `has(mcp.arguments.path)`, false, true},
		{"missing claim", `jwt.sub == "x"`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := compile(t, env, tt.expr).Eval(&Input{})
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("Eval = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct {
		name, expr string
		want       string // in the message
		line, col  int
	}{
		{"empty", "  ", "empty expression", 0, 0},
		{"syntax", `jwt.sub ==`, "Syntax error", 1, 11},
		{"unknown variable", `user.name == "x"`, "undeclared reference to 'user'", 1, 1},
		{"misspelt field", "identity.subject == \"x\" &&\n  identity.subjct == \"y\"", "undefined field 'subjct'", 2, 11},
		{"not a bool", `identity.subject`, "want bool", 0, 0},
		{"wrong type", `identity.scopes == "admin"`, "no matching overload", 1, 17},
		{"runaway at load", `mcp.arguments.a.all(x, mcp.arguments.b.all(y, mcp.arguments.c.all(z, x == y && y == z)))`, "more than the bound", 0, 0},
		{"too long", strings.Repeat("true && ", MaxExpressionLength/8+1) + "true", "longer than", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := env.Compile(tt.expr)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile error = %v, want a *CompileError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if tt.line != 0 && (ce.Issues[0].Line != tt.line || ce.Issues[0].Column != tt.col) {
				t.Errorf("at line %d column %d, want %d:%d (%v)", ce.Issues[0].Line, ce.Issues[0].Column, tt.line, tt.col, err)
			}
		})
	}
}

func TestReads(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct {
		name, expr   string
		reads        string
		claims       string
		allClaims    bool
		identityOnly bool
		arguments    bool
	}{
		{"claim by field", `jwt.groups.exists(g, g == "finance")`, "jwt", "groups", false, true, false},
		{"claims by index, in and has", `jwt["a"] == "x" || "b" in jwt || has(jwt.c)`, "jwt", "a b c", false, true, false},
		{"identity and claims", `identity.subject == "x" && jwt.dept == "y"`, "jwt identity", "dept", false, true, false},
		{"jwt as a whole", `size(jwt) > 2`, "jwt", "", true, true, false},
		{"jwt by computed key", `jwt[identity.issuer] == "x"`, "jwt identity", "", true, true, false},
		{"jwt iterated", `jwt.exists(k, k == "x")`, "jwt", "", true, true, false},
		{"arguments", `mcp.arguments.path == "/x"`, "mcp", "", false, false, true},
		{"mcp without arguments", `mcp.name == "x"`, "mcp", "", false, false, false},
		{"now is not identity", `jwt.a == "x" && now > timestamp("2020-01-01T00:00:00Z")`, "jwt now", "a", false, false, false},
		{"request", `request.headers["x"] == "y"`, "request", "", false, false, false},
		{"lineage", `lineage.depth < 2`, "lineage", "", false, false, false},
		{"a2a", `a2a.skill == "x"`, "a2a", "", false, false, false},
		{"constant", `true`, "", "", false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := compile(t, env, tt.expr)
			claims, all := p.Claims()
			if got := strings.Join(p.Reads(), " "); got != tt.reads {
				t.Errorf("Reads = %q, want %q", got, tt.reads)
			}
			if got := strings.Join(claims, " "); got != tt.claims || all != tt.allClaims {
				t.Errorf("Claims = %q, %v; want %q, %v", got, all, tt.claims, tt.allClaims)
			}
			if p.IdentityOnly() != tt.identityOnly {
				t.Errorf("IdentityOnly = %v", p.IdentityOnly())
			}
			if p.ReadsArguments() != tt.arguments {
				t.Errorf("ReadsArguments = %v", p.ReadsArguments())
			}
		})
	}
}

// TestHeadersRead: the headers an expression reads by name, which the
// pipeline refuses to decide on when sent more than once.
func TestHeadersRead(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct{ name, expr, headers string }{
		{"by index", `request.headers["x-tenant"] == "acme"`, "x-tenant"},
		{"upper case reads the lower-case name", `request.headers["X-Tenant"] != "blocked"`, "x-tenant"},
		{"by field", `request.headers.tenant == "acme"`, "tenant"},
		{"presence", `"x-debug" in request.headers || has(request.headers.trace)`, "trace x-debug"},
		{"several, once each", `request.headers["b"] == "1" && request.headers["a"] == "2" && request.headers["b"] != "3"`, "a b"},
		{"by a computed name: not listed", `request.headers[jwt.h] == "x"`, ""},
		{"iterated: not listed", `request.headers.exists(k, k == "x")`, ""},
		{"other request fields", `request.method == "POST" && request.path == "/mcp"`, ""},
		{"no request", `jwt.a == "x"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(compile(t, env, tt.expr).Headers(), " "); got != tt.headers {
				t.Errorf("Headers = %q, want %q", got, tt.headers)
			}
		})
	}
}

func TestCanCall(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct {
		name, expr string
		want       Decision
	}{
		{"arguments decide", `mcp.arguments.path.startsWith("/workspace/")`, DependsOnArguments},
		{"identity denies whatever the arguments", `"admin" in identity.scopes && mcp.arguments.path == "/x"`, Denied},
		{"identity allows whatever the arguments", `"files:read" in identity.scopes || mcp.arguments.path == "/x"`, Allowed},
		{"identity allows, arguments still decide", `"files:read" in identity.scopes && has(mcp.arguments.path)`, DependsOnArguments},
		{"annotations deny", `!mcp.annotations.readOnlyHint || mcp.arguments.force == true`, DependsOnArguments},
		{"annotations allow", `mcp.annotations.readOnlyHint || mcp.arguments.force == true`, Allowed},
		{"no arguments read: allowed", `mcp.name == "read_file"`, Allowed},
		{"no arguments read: denied", `mcp.name == "write_file"`, Denied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := alice()
			in.MCP.Arguments, in.MCP.BodyComplete = "", false // a tools/list entry: no call yet
			got, err := compile(t, env, tt.expr).CanCall(in)
			if err != nil {
				t.Fatalf("CanCall: %v", err)
			}
			if got != tt.want {
				t.Errorf("CanCall = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCanCallError: an expression that fails without the arguments is
// denied, with the error. One that fails and reads the arguments is
// reported as depending on them (CEL's unknowns win over errors): the tool
// stays listed, and the call itself is denied.
func TestCanCallError(t *testing.T) {
	env := newEnv(t, Options{})
	d, err := compile(t, env, `jwt.missing == "x" || mcp.name == "x"`).CanCall(&Input{})
	if d != Denied || err == nil {
		t.Errorf("CanCall = %v, %v; want denied with an error", d, err)
	}
	p := compile(t, env, `jwt.missing == "x" && mcp.arguments.a == 1`)
	if d, err := p.CanCall(&Input{}); d != DependsOnArguments || err != nil {
		t.Errorf("CanCall = %v, %v; want depends-on-arguments", d, err)
	}
	in := &Input{MCP: MCP{Arguments: `{"a": 1}`, BodyComplete: true}}
	if ok, err := p.Eval(in); ok || err == nil {
		t.Errorf("Eval = %v, %v; want an error", ok, err)
	}
}

// TestConcurrentEval: one program, many inputs at once (run with -race).
func TestConcurrentEval(t *testing.T) {
	env := newEnv(t, Options{})
	p := compile(t, env, `cleanPath(mcp.arguments.path).startsWith("/workspace/" + identity.subject + "/")`)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			in := alice()
			if i%2 == 1 {
				in.MCP.Arguments = `{"path": "/workspace/corp:bob/x"}`
			}
			for range 100 {
				got, err := p.Eval(in)
				if err != nil || got != (i%2 == 0) {
					t.Errorf("goroutine %d: Eval = %v, %v", i, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestArgument(t *testing.T) {
	in := alice()
	tests := []struct {
		name string
		want any
		ok   bool
	}{
		{"path", "/workspace/corp:alice/notes.txt", true},
		{"limit", float64(10), true},
		{"recursive", false, true},
		{"tags", []any{"a", "b"}, true},
		{"opts", map[string]any{"mode": "ro"}, true},
		{"escaped", `y"es`, true},
		{"missing", nil, false},
	}
	for _, tt := range tests {
		got, ok := in.Argument(tt.name)
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Argument(%q) = %#v, %v; want %#v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	in.MCP.BodyComplete = false
	if _, ok := in.Argument("path"); ok {
		t.Error("Argument reads a partial body")
	}
}

// TestCanCallUnknown: variables named unknown make what depends on them
// undecided, never denied.
func TestCanCallUnknown(t *testing.T) {
	env := newEnv(t, Options{})
	p := compile(t, env, `request.headers["x-tenant"] == "acme" && "files:read" in identity.scopes`)
	if d, err := p.CanCall(&Input{Identity: Identity{Scopes: []string{"files:read"}}}, VarRequest); d != DependsOnArguments || err != nil {
		t.Errorf("CanCall = %v, %v; want depends", d, err)
	}
	if d, err := p.CanCall(&Input{}, VarRequest); d != Denied || err != nil {
		t.Errorf("CanCall without the scope = %v, %v; want denied", d, err)
	}
}

func TestValues(t *testing.T) {
	env := newEnv(t, Options{})
	p := compile(t, env, `cleanPath(mcp.arguments.path).startsWith("/workspace/" + identity.subject + "/") && has(jwt.groups) && now > timestamp("2020-01-01T00:00:00Z")`)
	got := strings.Join(p.Values(alice()), "\n")
	want := "mcp.arguments.path = \"/workspace/corp:alice/notes.txt\"\nidentity.subject = \"corp:alice\"\njwt = "
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "\nnow = ") {
		t.Errorf("Values =\n%s\nwant it to start with\n%s", got, want)
	}
}

// TestValuesHideCredentials: explanations never show header values that
// may be credentials.
func TestValuesHideCredentials(t *testing.T) {
	env := newEnv(t, Options{})
	in := alice()
	in.Request.Headers = map[string]string{"authorization": "Bearer secret-token", "x-api-key": "k-123", "x-tenant": "acme",
		"dpop": "proof-jwt"}
	for _, expr := range []string{
		`request.headers["authorization"].startsWith("Bearer ")`,
		`request.headers.authorization.startsWith("Bearer ") && request.headers.x_api_key != ""`,
		`"x-api-key" in request.headers && request.headers["x-tenant"] == "acme"`,
		// A DPoP proof is a credential too, and one Explain did not spend.
		`request.headers.dpop != ""`,
	} {
		got := strings.Join(compile(t, env, expr).Values(in), "; ")
		if strings.Contains(got, "secret-token") || strings.Contains(got, "k-123") || strings.Contains(got, "proof-jwt") {
			t.Errorf("%s: Values = %s", expr, got)
		}
	}
}
