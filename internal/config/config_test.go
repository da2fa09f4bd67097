package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseFull(t *testing.T) {
	b, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Identity.UserHeader; got != "x-user-id" {
		t.Errorf("user header = %q, want lower-cased x-user-id", got)
	}
	if got := f.Identity.SessionClaim; got != DefaultSessionClaim {
		t.Errorf("session claim default = %q", got)
	}
	if got := f.Cache.NegativeTTL.D(); got != 3*time.Second {
		t.Errorf("negative ttl = %v", got)
	}
	if got := f.Issuers[1].Leeway.D(); got != DefaultLeeway {
		t.Errorf("default leeway = %v", got)
	}
	r := f.Routes[0]
	if r.Hosts[1] != "*.mcp.example.com" || r.ClaimHeaders[0].Header != "x-user-email" || r.Credentials.Cookie != "session" {
		t.Errorf("route decoded wrong: %+v", r)
	}
	if !f.Routes[1].Default {
		t.Error("default route flag lost")
	}
}

func TestParseErrors(t *testing.T) {
	const base = `issuers: [{name: a, secret: s}]
routes: [{name: r, issuers: [a]}]
`
	tests := []struct {
		name string
		doc  string
		want []string // every substring must appear in the error
	}{
		{
			name: "unknown key names key and line",
			doc:  "issuers: [{name: a, secret: s}]\nroutes:\n  - name: r\n    issuers: [a]\n    isuers: [b]\n",
			want: []string{"line 5", "isuers"},
		},
		{
			name: "several unknown keys reported at once",
			doc:  "issuers: [{name: a, secret: s, colour: red}]\nroutes: [{name: r, issuers: [a], size: 2}]\n",
			want: []string{"line 1", "colour", "line 2", "size"},
		},
		{
			name: "rules on a protocol http route name the line",
			doc:  "issuers: [{name: a, secret: s}]\nroutes:\n  - name: r\n    issuers: [a]\n    protocol: http\n    rules:\n      - {methods: [tools/call], action: deny}\n",
			want: []string{"line 5", "routes[0] (r).protocol: http", "could never apply"},
		},
		{
			name: "bad duration",
			doc:  base + "cache: {negative_ttl: soon}\n",
			want: []string{"invalid duration", "soon"},
		},
		{
			name: "empty document",
			doc:  "",
			want: []string{"at least one issuer", "at least one route"},
		},
		{
			name: "alg none",
			doc:  "issuers: [{name: a, secret: s, algorithms: [none]}]\nroutes: [{name: r, issuers: [a]}]\n",
			want: []string{"none is never accepted"},
		},
		{
			name: "hmac alg with public keys and asymmetric alg with secret",
			doc:  "issuers: [{name: a, jwks_file: k.json, algorithms: [HS256]}, {name: b, secret: s, algorithms: [RS256]}]\nroutes: [{name: r, issuers: [a, b]}]\n",
			want: []string{"HMAC algorithm HS256 needs an HMAC secret", "RS256 needs a public key source"},
		},
		{
			name: "credential kinds",
			doc: "issuers: [{name: o, issuer: https://as.example, introspection: {client_auth: {method: client_secret_basic}, jwt_response: true}}, " +
				"{name: o2, introspection: {endpoint: ftp://x}}, {name: both, api_keys: {file: k.yaml}, peer: {trust_domains: [a]}}, " +
				"{name: k, api_keys: {header: \"bad header\"}}, {name: m, secret: s, peer: {xfcc_from: [nonsense]}}]\n" +
				"routes: [{name: r, issuers: [o, o2]}]\n",
			want: []string{
				"issuers[0] (o).introspection.client_auth: client_secret_basic needs client_secret_env or client_secret_file",
				"issuers[0] (o).introspection.jwt_response: needs issuer and client_auth.client_id",
				"issuers[0] (o).introspection.jwt_response: needs jwks_url or discovery",
				"issuers[1] (o2).introspection.endpoint",
				"issuers[2] (both): give at most one of introspection, api_keys and peer",
				"issuers[3] (k).api_keys.file: required",
				"issuers[3] (k).api_keys.header",
				"issuers[4] (m): a peer issuer has no key source",
				"issuers[4] (m).peer.trust_domains: at least one is required",
				`issuers[4] (m).peer.xfcc_from[0]: "nonsense" is not an address or CIDR`,
				"routes[0] (r).issuers: at most one introspection issuer",
			},
		},
		{
			name: "two key sources",
			doc:  "issuers: [{name: a, secret: s, jwks_file: k.json}]\nroutes: [{name: r, issuers: [a]}]\n",
			want: []string{"exactly one key source"},
		},
		{
			name: "unknown issuer and duplicate names and two defaults",
			doc:  "issuers: [{name: a, secret: s}, {name: a, secret: t}]\nroutes: [{name: r, issuers: [b], default: true}, {name: r, issuers: [a], default: true}]\n",
			want: []string{`unknown issuer "b"`, "duplicate issuer name", "duplicate route name", "at most one route"},
		},
		{
			name: "bad header names",
			doc:  base + "identity: {user_header: 'x user', session_header: x-envoy-session}\n",
			want: []string{`"x user" is not a valid header name`, `"x-envoy-session" cannot be used`},
		},
		{
			name: "claim header clashes with identity header",
			doc:  "issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], claim_headers: [{claim: email, header: x-user-id}]}]\n",
			want: []string{"already set by the service"},
		},
		{
			name: "bad paths hosts and urls",
			doc:  "issuers: [{name: a, jwks_url: 'ftp://x'}, {name: b, discovery: true}]\nroutes: [{name: r, issuers: [a, b], path_prefix: mcp, hosts: ['a/b'], public_paths: ['/a*b'], resource_metadata: nope}]\n",
			want: []string{"not an http(s) URL", "discovery needs issuer", "must start with /", "neither a host name", "may only end in *"},
		},
		{
			name: "elicitations over redis without a shared state key",
			doc: "issuers: [{name: a, secret: s}]\nredis: {addrs: ['127.0.0.1:6379'], encryption_key_env: K}\n" +
				"exchanges: [{name: x, token_endpoint: 'https://sts.example/token', client_auth: {method: none, client_id: c}}]\n" +
				"routes: [{name: r, issuers: [a], exchange: {sts: x, audience: [https://b.example], authorize_url: 'https://idp.example/authorize'}}]\n",
			want: []string{"elicitations.state_key_env or state_key_file: required with redis"},
		},
		{
			name: "exchange with the inbound token in the body or forwarded",
			doc: "issuers: [{name: a, secret: s}]\n" +
				"exchanges: [{name: x, token_endpoint: 'https://sts.example/token', client_auth: {method: none, client_id: c}}]\n" +
				"routes: [{name: r, issuers: [a], mcp: {token_in_meta: true}, forward_authorization: true, exchange: {sts: x, audience: [https://b.example]}}]\n",
			want: []string{"mcp.token_in_meta cannot be combined with exchange", "forward_authorization cannot be combined with exchange"},
		},
		{
			name: "negative exchange cache bound per subject",
			doc: "issuers: [{name: a, secret: s}]\n" +
				"exchanges: [{name: x, token_endpoint: 'https://sts.example/token', cache_per_subject: -1, client_auth: {method: none, client_id: c}}]\n" +
				"routes: [{name: r, issuers: [a], exchange: {sts: x, audience: [https://b.example]}}]\n",
			want: []string{"exchanges[0].cache_per_subject: must not be negative"},
		},
		{
			name: "two state keys",
			doc:  "issuers: [{name: a, secret: s}]\nelicitations: {state_key_env: K, state_key_file: k}\nroutes: [{name: r, issuers: [a]}]\n",
			want: []string{"state_key_env and state_key_file exclude each other"},
		},
		{
			name: "rules on a route without the body name the options that fix it",
			doc:  "issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: mcp, request_body: none, rules: [{methods: [tools/call], names: [rm], action: deny}]}]\n",
			want: []string{"request_body is none", "with_request_body", "forwardBody", "njs", "upstream_validates_mcp_headers: true"},
		},
		{
			name: "default deny on a route without the body",
			doc:  "issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: mcp, request_body: none, default_action: deny}]\n",
			want: []string{"request_body is none"},
		},
		{
			name: "task ownership on an a2a route without the body",
			doc:  "issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: a2a, request_body: none}]\n",
			want: []string{"routes[0] (r)", "task_ownership", "request_body is none", "drop request_body", "sessions.task_ownership: false", "protocol: mcp"},
		},
		{
			name: "task ownership on an auto route without the body",
			doc:  "issuers: [{name: a, secret: s}]\nsessions: {task_ownership: true}\nroutes: [{name: r, issuers: [a], request_body: none}]\n",
			want: []string{"task_ownership"},
		},
		{
			name: "unknown request_body",
			doc:  "issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], request_body: partial}]\n",
			want: []string{"request_body", "partial"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestRequestBodyNoneAccepted: without the body, a route may have rules
// only when its upstream checks Mcp-Method and Mcp-Name, and carry JSON-RPC
// only when tasks are not bound (or it carries plain HTTP).
func TestRequestBodyNoneAccepted(t *testing.T) {
	for _, doc := range []string{
		"issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: mcp, request_body: none}]\n",
		"issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: mcp, request_body: none, upstream_validates_mcp_headers: true, rules: [{methods: [tools/call], names: [rm], action: deny}]}]\n",
		"issuers: [{name: a, secret: s}]\nsessions: {task_ownership: false}\nroutes: [{name: r, issuers: [a], protocol: a2a, request_body: none}]\n",
		"issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: http, request_body: none}]\n",
		"issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: a2a, request_body: sent}]\n",
		"issuers: [{name: a, secret: s}]\nroutes: [{name: r, issuers: [a], protocol: mcp, request_body: sent, rules: [{methods: [tools/call], names: [rm], action: deny}]}]\n",
	} {
		if _, err := Parse([]byte(doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		wantAlg     string
		wantWarning bool
		wantErr     bool
	}{
		{name: "no secret warns", env: nil, wantAlg: "HS256", wantWarning: true},
		{name: "secret from env", env: map[string]string{"JWT_SECRET": "s3cret"}, wantAlg: "HS256"},
		{name: "algorithm from env", env: map[string]string{"JWT_SECRET": "s", "JWT_ALGORITHM": "hs512"}, wantAlg: "HS512"},
		{name: "asymmetric algorithm refused", env: map[string]string{"JWT_ALGORITHM": "RS256"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, warns, err := Default(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			if got := f.Issuers[0].Algorithms[0]; got != tt.wantAlg {
				t.Errorf("alg = %s, want %s", got, tt.wantAlg)
			}
			if (len(warns) > 0) != tt.wantWarning {
				t.Errorf("warnings = %v", warns)
			}
			if tt.wantWarning && f.Issuers[0].Secret != DevSecret {
				t.Error("development secret not used")
			}
			if !f.Routes[0].Default || len(f.Routes[0].Audiences) != 0 || f.Issuers[0].Issuer != "" {
				t.Errorf("default route should be a catch-all with no aud/iss: %+v", f.Routes[0])
			}
		})
	}
}

func TestSubjectNamespace(t *testing.T) {
	tests := []struct {
		name    string
		issuers string
		want    map[string]string
	}{
		{"one issuer: plain subjects", `[{name: a, secret: s}]`, map[string]string{"a": ""}},
		{"several: the issuer's name", `[{name: a, secret: s}, {name: b, secret: s}]`, map[string]string{"a": "a:", "b": "b:"}},
		{"explicit prefix", `[{name: a, secret: s, subject_prefix: "corp/"}, {name: b, secret: s}]`, map[string]string{"a": "corp/", "b": "b:"}},
		{"shared subjects", `[{name: a, secret: s, shared_subjects: true}, {name: b, secret: s, shared_subjects: true}]`, map[string]string{"a": "", "b": ""}},
		{"empty prefix", `[{name: a, secret: s, subject_prefix: ""}, {name: b, secret: s}]`, map[string]string{"a": "", "b": "b:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte("issuers: " + tc.issuers + "\nroutes: [{name: r, default: true, issuers: [a]}]\n"))
			if err != nil {
				t.Fatal(err)
			}
			for is, want := range tc.want {
				if got := f.SubjectNamespace(is); got != want {
					t.Errorf("SubjectNamespace(%s) = %q, want %q", is, got, want)
				}
			}
		})
	}
}

func TestIdentityErrors(t *testing.T) {
	const routes = "routes: [{name: r, default: true, issuers: [a]}]\n"
	const two = "issuers: [{name: a, secret: s}, {name: b, secret: s}]\n"
	tests := []struct {
		name, doc, want string
	}{
		{"overlapping prefixes", `issuers: [{name: a, secret: s, subject_prefix: "x:"}, {name: b, secret: s, subject_prefix: "x:y:"}]` + "\n" + routes, "overlaps"},
		{"prefix and shared", `issuers: [{name: a, secret: s, subject_prefix: "x:", shared_subjects: true}]` + "\n" + routes, "exclude each other"},
		{"unsafe prefix", `issuers: [{name: a, secret: s, subject_prefix: "../"}]` + "\nidentity: {safe_values: path-segment}\n" + routes, "not a safe path segment"},
		{"marker prefix", `issuers: [{name: a, secret: s, subject_prefix: "~x:"}]` + "\nidentity: {safe_values: path-segment}\n" + routes, "not a safe path segment"},
		{"bad safe_values", "issuers: [{name: a, secret: s}]\nidentity: {safe_values: yes}\n" + routes, "identity.safe_values"},
		{"bad unsafe_values", "issuers: [{name: a, secret: s}]\nidentity: {unsafe_values: drop}\n" + routes, "identity.unsafe_values"},
		{"per subject above max", "issuers: [{name: a, secret: s}]\nsessions: {max_entries: 10, max_per_subject: 11}\n" + routes, "max_per_subject"},
		{"unknown session source", "issuers: [{name: a, secret: s}]\nidentity: {session_sources: [cookie]}\n" + routes, "identity.session_sources"},
		{"claim source without a name", "issuers: [{name: a, secret: s}]\nidentity: {session_sources: [\"claim:\"]}\n" + routes, "identity.session_sources"},
		{"delegate naming nobody", "issuers: [{name: a, secret: s}]\nsessions: {delegates: [{name: x}]}\n" + routes, "sessions.delegates"},
		{"bare client id with two issuers", two + "sessions: {delegates: [{client_ids: [helper]}]}\n" + routes, `sessions.delegates[0].client_ids[0]: "helper" names no issuer's client`},
		{"bare act subject with two issuers", two + "sessions: {delegates: [{act_subjects: [\"a:ok\", planner]}]}\n" + routes, `sessions.delegates[0].act_subjects[1]: "planner" names no issuer's subject`},
		{"a namespace alone", two + "lineage: {trust: {client_ids: [\"a:\"]}}\n" + routes, `lineage.trust.client_ids[0]: "a:"`},
		{"bare route lineage client id", two + "routes: [{name: r, default: true, issuers: [a], lineage: {trust: {client_ids: [x]}}}]\n", `routes (r).lineage.trust.client_ids[0]: "x"`},
		{"bare exchange agent", two + "exchanges: [{name: sts, token_endpoint: \"https://sts.example.com/token\", client_auth: {method: none, client_id: x}}]\n" +
			"routes: [{name: r, default: true, issuers: [a], exchange: {sts: sts, audience: [https://d.example.com], agents: [{act_subjects: [x], audience: [https://e.example.com]}]}}]\n",
			`routes (r).exchange.agents[0].act_subjects[0]: "x"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestCallerNamesAccepted: a client id or act subject naming a trusted
// caller is bare with one issuer or an issuer without a namespace, and
// written in its issuer's namespace otherwise.
func TestCallerNamesAccepted(t *testing.T) {
	const routes = "routes: [{name: r, default: true, issuers: [a]}]\n"
	for name, doc := range map[string]string{
		"one issuer":                  "issuers: [{name: a, secret: s}]\nsessions: {delegates: [{client_ids: [helper]}]}\n",
		"namespaced":                  "issuers: [{name: a, secret: s}, {name: b, secret: s}]\nsessions: {delegates: [{client_ids: [\"a:helper\"], act_subjects: [\"b:planner\"]}]}\n",
		"an issuer without namespace": "issuers: [{name: a, secret: s, subject_prefix: \"\"}, {name: b, secret: s}]\nlineage: {trust: {client_ids: [helper, \"b:builder\"]}}\n",
		"shared subjects":             "issuers: [{name: a, secret: s, shared_subjects: true}, {name: b, secret: s, shared_subjects: true}]\nsessions: {delegates: [{client_ids: [helper]}]}\n",
	} {
		if _, err := Parse([]byte(doc + routes)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSessionSourcesDefault(t *testing.T) {
	f, err := Parse([]byte("issuers: [{name: a, secret: s}]\nroutes: [{name: r, default: true, issuers: [a]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"claim:session_id", "claim:sid", SessionSourceMCP, SessionSourceA2A, SessionSourceDefault}
	if strings.Join(f.Identity.SessionSources, " ") != strings.Join(want, " ") {
		t.Fatalf("default session sources %v, want %v", f.Identity.SessionSources, want)
	}
	f, err = Parse([]byte("issuers: [{name: a, secret: s}]\nroutes: [{name: r, default: true, issuers: [a]}]\nidentity: {session_claim: sid}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Identity.SessionSources[0] != "claim:sid" || f.Identity.SessionSources[1] != SessionSourceMCP {
		t.Fatalf("session_claim sid: %v", f.Identity.SessionSources)
	}
}

func TestDefaultIsPathSegmentSafe(t *testing.T) {
	f, _, err := Default(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if f.Identity.SafeValues != SafeValuesPathSegment || f.Identity.UnsafeValues != UnsafeRefuse {
		t.Fatalf("built-in identity values: %q %q", f.Identity.SafeValues, f.Identity.UnsafeValues)
	}
	if ns := f.SubjectNamespace(f.Issuers[0].Name); ns != "" {
		t.Fatalf("built-in namespace %q, want plain subjects", ns)
	}
}
