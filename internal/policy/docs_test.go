package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path"
	"regexp"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/extauthz/extauthz/internal/authzen"
	"github.com/extauthz/extauthz/internal/oauthclient"
	"github.com/extauthz/extauthz/internal/policy"
	"github.com/extauthz/extauthz/internal/testing/authzenpdp"
)

// docRule is a rule as docs/policies.md writes it.
type docRule struct {
	Name    string              `yaml:"name"`
	Methods []string            `yaml:"methods"`
	Names   []string            `yaml:"names"`
	Scopes  []string            `yaml:"scopes"`
	Claims  map[string][]string `yaml:"claims"`
	When    string              `yaml:"when"`
	Action  string              `yaml:"action"`
	AuthZEN *struct {
		Endpoint   string `yaml:"endpoint"`
		ClientAuth struct {
			Method          string `yaml:"method"`
			ClientID        string `yaml:"client_id"`
			ClientSecretEnv string `yaml:"client_secret_env"`
		} `yaml:"client_auth"`
		Timeout   time.Duration `yaml:"timeout"`
		CacheTTL  time.Duration `yaml:"cache_ttl"`
		Arguments []string      `yaml:"arguments"`
	} `yaml:"authzen"`

	program *policy.Program
	pdp     *authzen.Client
}

var fence = regexp.MustCompile("(?s)```(yaml|json)\n(.*?)```")

// TestDocsPolicies evaluates every example of docs/policies.md against
// named callers and calls.
func TestDocsPolicies(t *testing.T) {
	doc, err := os.ReadFile("../../docs/policies.md")
	if err != nil {
		t.Fatal(err)
	}
	env, err := policy.NewEnv(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pdp := authzenpdp.Start(func(r authzenpdp.Request) (bool, map[string]any) {
		args, _ := r.Context["arguments"].(map[string]any)
		amount, _ := args["amount"].(float64)
		return r.Resource.Type == "mcp_tool" && amount <= 1000 && args["currency"] == "EUR", nil
	})
	defer pdp.Close()

	var examples [][]docRule
	var jsonExamples []string
	for _, m := range fence.FindAllSubmatch(doc, -1) {
		if string(m[1]) == "json" {
			jsonExamples = append(jsonExamples, string(m[2]))
			continue
		}
		var block struct {
			Rules []docRule `yaml:"rules"`
		}
		dec := yaml.NewDecoder(bytes.NewReader(m[2]))
		dec.KnownFields(true)
		if err := dec.Decode(&block); err != nil {
			t.Fatalf("example %d: %v\n%s", len(examples)+1, err, m[2])
		}
		for i := range block.Rules {
			r := &block.Rules[i]
			if r.When != "" {
				if r.program, err = env.Compile(r.When); err != nil {
					t.Fatalf("rule %q: %v", r.Name, err)
				}
			}
			if r.AuthZEN != nil {
				// The example's endpoint, pointed at the test PDP.
				if _, err := (authzen.Config{Endpoint: r.AuthZEN.Endpoint}).Validate(); err != nil {
					t.Fatalf("rule %q: %v", r.Name, err)
				}
				ca := oauthclient.Config{Method: r.AuthZEN.ClientAuth.Method, ClientID: r.AuthZEN.ClientAuth.ClientID, ClientSecret: "from " + r.AuthZEN.ClientAuth.ClientSecretEnv}
				if r.pdp, err = authzen.New(authzen.Config{Endpoint: pdp.Endpoint(), ClientAuth: ca, Timeout: r.AuthZEN.Timeout, CacheTTL: r.AuthZEN.CacheTTL}, authzen.Options{}); err != nil {
					t.Fatalf("rule %q: %v", r.Name, err)
				}
			}
		}
		examples = append(examples, block.Rules)
	}

	tested := map[string]bool{}
	for _, c := range docCases() {
		t.Run(c.rule+"/"+c.name, func(t *testing.T) {
			var rules []docRule
			for _, ex := range examples {
				if slices.ContainsFunc(ex, func(r docRule) bool { return r.Name == c.rule }) {
					rules = ex
				}
			}
			if rules == nil {
				t.Fatalf("no example has a rule %q", c.rule)
			}
			tested[c.rule] = true
			got, by := decide(t, rules, c.in)
			if got != c.want {
				t.Errorf("%s (by %q), want %s", got, by, c.want)
			}
		})
	}
	// Every example is tested through its first rule (the ones after it
	// decide what it lets through).
	for _, ex := range examples {
		if len(ex) > 0 && !tested[ex[0].Name] {
			t.Errorf("the example with rule %q has no test case", ex[0].Name)
		}
	}

	// The AuthZEN request shown is the one sent.
	if len(jsonExamples) != 1 {
		t.Fatalf("%d JSON examples, want 1", len(jsonExamples))
	}
	in := caller("corp:alice", []string{"payments"}, "payments_refund", `{"amount": 120, "currency": "EUR", "iban": "not sent"}`)
	in.Identity.ClientID, in.Identity.Actors = "billing-agent", []string{"billing-agent"}
	in.Lineage = policy.Lineage{Root: "…", Depth: 1, Actors: []string{"billing-agent"}}
	sent, _ := json.Marshal(authzen.Build(in, []string{"amount", "currency"}))
	var want, got any
	if err := json.Unmarshal([]byte(jsonExamples[0]), &want); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(sent, &got)
	if !jsonEqual(got, want) {
		t.Errorf("Build sends\n%s\nthe documentation shows\n%s", sent, jsonExamples[0])
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// decide applies rules as the service does: the first rule whose methods
// and names match decides; a deny rule's when narrows its match.
func decide(t *testing.T, rules []docRule, in *policy.Input) (outcome, string) {
	t.Helper()
	for i := range rules {
		r := &rules[i]
		if !globs(r.Methods, in.MCP.Method) || !globs(r.Names, in.MCP.Name) {
			continue
		}
		ok := true
		if r.program != nil {
			var err error
			if ok, err = r.program.Eval(in); err != nil {
				return policyError, r.Name
			}
		}
		if r.Action == "deny" {
			if ok {
				return deny, r.Name
			}
			continue
		}
		for _, s := range r.Scopes {
			ok = ok && slices.Contains(in.Identity.Scopes, s)
		}
		if ok && r.pdp != nil {
			d, err := r.pdp.Evaluate(context.Background(), authzen.Build(in, r.AuthZEN.Arguments))
			if err != nil {
				return unavailable, r.Name
			}
			ok = d.Allowed
		}
		if ok {
			return allow, r.Name
		}
		return deny, r.Name
	}
	return noMatch, ""
}

func globs(patterns []string, s string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

type outcome string

const (
	allow       outcome = "allowed"
	deny        outcome = "denied"
	policyError outcome = "denied (policy_error)"
	unavailable outcome = "unavailable"
	noMatch     outcome = "no rule matches"
)

type docCase struct {
	rule, name string
	in         *policy.Input
	want       outcome
}

// caller is a tools/call of tool with args by subject holding scopes.
func caller(subject string, scopes []string, tool, args string) *policy.Input {
	return &policy.Input{
		JWT:      map[string]any{},
		Identity: policy.Identity{Issuer: "corp", Subject: subject, Scopes: scopes},
		MCP:      policy.MCP{Method: "tools/call", Name: tool, Arguments: args, BodyComplete: true},
		Now:      time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC),
	}
}

func with(in *policy.Input, f func(*policy.Input)) *policy.Input { f(in); return in }

func docCases() []docCase {
	read := []string{"files:read"}
	alice := func(args string) *policy.Input { return caller("corp:alice", read, "read_file", args) }
	finance := func(actors ...string) *policy.Input {
		return with(caller("corp:alice", nil, "refund", `{}`), func(in *policy.Input) {
			in.JWT["groups"] = []any{"finance"}
			in.Identity.Actors = actors
		})
	}
	// 19:30 in Berlin (UTC+1 in March).
	evening := time.Date(2026, 3, 2, 18, 30, 0, 0, time.UTC)
	tool := func(annotations map[string]any, groups []any, at time.Time) *policy.Input {
		return with(caller("corp:alice", []string{"tools:call"}, "drop_table", `{}`), func(in *policy.Input) {
			in.MCP.Annotations, in.JWT["groups"], in.Now = annotations, groups, at
		})
	}
	destructive := map[string]any{"destructiveHint": true}
	readOnly := map[string]any{"readOnlyHint": true}
	approve := func(args string, limit any) *policy.Input {
		return with(caller("corp:alice", nil, "approve_expense", args), func(in *policy.Input) {
			if limit != nil {
				in.JWT["approval_limit"] = limit
			}
		})
	}
	pay := func(args string) *policy.Input {
		return caller("corp:alice", []string{"payments"}, "payments_refund", args)
	}
	message := func(skill string, groups ...any) *policy.Input {
		return with(caller("corp:alice", nil, "", `{}`), func(in *policy.Input) {
			in.MCP = policy.MCP{Method: "SendMessage"} // the method the rule names
			in.A2A = policy.A2A{Method: "SendMessage", Skill: skill}
			in.JWT["groups"] = groups
		})
	}
	// A task of tenant asked for by a caller whose tenant claim is claim
	// (none when nil).
	ofTenant := func(tenant string, claim any) *policy.Input {
		return with(caller("corp:alice", nil, "", `{}`), func(in *policy.Input) {
			in.MCP = policy.MCP{Method: "GetTask"}
			in.A2A = policy.A2A{Method: "GetTask", TaskID: "t-1", Tenant: tenant}
			if claim != nil {
				in.JWT["tenant"] = claim
			}
		})
	}
	return []docCase{
		{"own tenant only", "a task of the caller's tenant", ofTenant("acme", "acme"), noMatch},
		{"own tenant only", "a task of another tenant", ofTenant("globex", "acme"), deny},
		{"own tenant only", "no tenant named", ofTenant("", "acme"), deny},
		{"own tenant only", "a caller without a tenant", ofTenant("acme", nil), policyError},
		{"refunds only for finance", "a refund asked by a finance member", message("refund", "finance"), noMatch},
		{"refunds only for finance", "a refund asked by another", message("refund", "sales"), deny},
		{"refunds only for finance", "another skill", message("summarize"), noMatch},
		{"refunds only for finance", "no skill named", message(""), noMatch},
		{"own workspace", "alice reads her notes", alice(`{"path": "/workspace/corp:alice/notes.txt"}`), allow},
		{"own workspace", "alice climbs into bob's", alice(`{"path": "/workspace/corp:alice/../corp:bob/x"}`), deny},
		{"own workspace", "a workspace sharing alice's prefix", alice(`{"path": "/workspace/corp:alice-evil/x"}`), deny},
		{"own workspace", "no path", alice(`{"file": "/workspace/corp:alice/x"}`), policyError},
		{"own workspace", "path not a string", alice(`{"path": ["/workspace/corp:alice/x"]}`), policyError},
		{"own workspace", "body not sent", with(alice(`{"path": "/workspace/corp:alice/x"}`), func(in *policy.Input) { in.MCP.BodyComplete = false }), policyError},
		{"own workspace", "without the scope", with(alice(`{"path": "/workspace/corp:alice/x"}`), func(in *policy.Input) { in.Identity.Scopes = nil }), deny},

		{"refunds by the billing agent for finance", "billing agent for a finance member", finance("billing-agent"), allow},
		{"refunds by the billing agent for finance", "planner through the billing agent", finance("billing-agent", "planner"), deny},
		{"refunds by the billing agent for finance", "the user without an agent", finance(), deny},
		{"refunds by the billing agent for finance", "another agent", finance("support-agent"), deny},
		{"refunds by the billing agent for finance", "billing agent for someone outside finance", with(finance("billing-agent"), func(in *policy.Input) { in.JWT["groups"] = []any{"sales"} }), deny},

		{"no destructive tools after hours", "destructive, evening", tool(destructive, []any{}, evening), deny},
		{"no destructive tools after hours", "destructive, evening, on call", tool(destructive, []any{"oncall"}, evening), allow},
		{"no destructive tools after hours", "read-only, evening", tool(readOnly, []any{}, evening), allow},
		{"no destructive tools after hours", "destructive, morning", tool(destructive, []any{}, time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)), allow},
		{"no destructive tools after hours", "destructive, before dawn", tool(destructive, []any{}, time.Date(2026, 3, 2, 4, 0, 0, 0, time.UTC)), deny},
		{"no destructive tools after hours", "annotations unknown, evening", tool(nil, []any{}, evening), deny},
		{"no destructive tools after hours", "destructiveHint false, evening", tool(map[string]any{"destructiveHint": false}, []any{}, evening), allow},

		{"destructive tools need admin", "destructive without admin", tool(destructive, nil, evening), deny},
		{"destructive tools need admin", "destructive with admin", with(tool(destructive, nil, evening), func(in *policy.Input) { in.Identity.Scopes = []string{"admin"} }), noMatch},
		{"destructive tools need admin", "read-only", tool(readOnly, nil, evening), noMatch},
		{"destructive tools need admin", "hint as a string", tool(map[string]any{"destructiveHint": "true"}, nil, evening), noMatch},

		{"approve within limit", "within the limit", approve(`{"amount": 100, "submitter": "corp:bob"}`, float64(500)), allow},
		{"approve within limit", "over the limit", approve(`{"amount": 900, "submitter": "corp:bob"}`, float64(500)), deny},
		{"approve within limit", "own expense", approve(`{"amount": 100, "submitter": "corp:alice"}`, float64(500)), deny},
		{"approve within limit", "no limit claim", approve(`{"amount": 1, "submitter": "corp:bob"}`, nil), deny},
		{"approve within limit", "amount as a string", approve(`{"amount": "100", "submitter": "corp:bob"}`, float64(500)), policyError},
		{"approve within limit", "limit as a string", approve(`{"amount": 100, "submitter": "corp:bob"}`, "500"), policyError},

		{"payments decided by the PDP", "the PDP allows", pay(`{"amount": 120, "currency": "EUR"}`), allow},
		{"payments decided by the PDP", "the PDP denies", pay(`{"amount": 5000, "currency": "EUR"}`), deny},
		{"payments decided by the PDP", "without the scope the PDP is not asked", with(pay(`{"amount": 120, "currency": "EUR"}`), func(in *policy.Input) { in.Identity.Scopes = nil }), deny},
	}
}

// TestReadmePolicies evaluates the rules README.md shows, as users would
// copy them.
func TestReadmePolicies(t *testing.T) {
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	env, err := policy.NewEnv(policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rules []docRule
	for _, m := range fence.FindAllSubmatch(doc, -1) {
		if string(m[1]) != "yaml" || !bytes.HasPrefix(m[2], []byte("rules:")) {
			continue
		}
		var block struct {
			Rules []docRule `yaml:"rules"`
		}
		dec := yaml.NewDecoder(bytes.NewReader(m[2]))
		dec.KnownFields(true)
		if err := dec.Decode(&block); err != nil {
			t.Fatalf("README rules: %v\n%s", err, m[2])
		}
		rules = append(rules, block.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("README.md shows no rules")
	}
	for i := range rules {
		if rules[i].When != "" {
			if rules[i].program, err = env.Compile(rules[i].When); err != nil {
				t.Fatalf("rule %q: %v", rules[i].Name, err)
			}
		}
	}
	admin := []string{"admin"}
	destructive := func(scopes []string) *policy.Input {
		return with(caller("corp:alice", scopes, "drop_table", `{}`), func(in *policy.Input) {
			in.MCP.Annotations = map[string]any{"destructiveHint": true}
		})
	}
	tests := []struct {
		name string
		in   *policy.Input
		want outcome
	}{
		{"a file in one's own workspace", caller("corp:alice", nil, "read_file", `{"path":"/workspace/corp:alice/notes.md"}`), allow},
		{"a file in another's workspace", caller("corp:alice", nil, "read_file", `{"path":"/workspace/corp:bob/notes.md"}`), deny},
		{"climbing out of one's workspace", caller("corp:alice", nil, "write_file", `{"path":"/workspace/corp:alice/../corp:bob/x"}`), deny},
		{"no path at all", caller("corp:alice", nil, "read_file", `{}`), policyError},
		{"a destructive tool without admin", destructive(nil), deny},
		{"a destructive tool with admin", destructive(admin), noMatch},
		{"a tool without annotations", caller("corp:alice", nil, "drop_table", `{}`), noMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, by := decide(t, rules, tt.in); got != tt.want {
				t.Errorf("%s (by %q), want %s", got, by, tt.want)
			}
		})
	}
}
