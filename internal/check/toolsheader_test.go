package check

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// toolsDoc has a route with the signed tools header, whose rules hide
// writes from readers, deletes from everybody but admins, and decide
// search on its arguments; and a route without it.
func toolsDoc(key string) string {
	return fmt.Sprintf(`
issuers: [{name: dev, algorithms: [HS256], secret: %s}]
lineage: {signing: {key_file: %s, issuer: https://extauthz.example.com}}
routes:
  - name: files
    hosts: [files.example.com]
    protocol: mcp
    issuers: [dev]
    tools_header: {tools: [read_file, write_file, delete_file, search, list.dir], ttl: 2m}
    rules:
      - {name: deletes, methods: [tools/call], names: [delete_*], scopes: [files:admin]}
      - {name: writes, methods: [tools/call], names: [write_*], scopes: [files:write]}
      - {name: search, methods: [tools/call], names: [search], when: 'mcp.arguments.path.startsWith("/public/")'}
  - name: admin
    hosts: [admin.example.com]
    protocol: mcp
    issuers: [dev]
    tools_header: {tools: [delete_file]}
    rules:
      - {name: deletes, methods: [tools/call], names: [delete_*], scopes: [files:admin]}
  - name: plain
    hosts: [plain.example.com]
    protocol: mcp
    issuers: [dev]
`, secret, key)
}

type toolsFixture struct {
	pl    *Pipeline
	clock *clock
}

func newToolsFixture(t testing.TB) *toolsFixture {
	t.Helper()
	clk := newClock()
	key := writeEd25519(t, t.TempDir())
	return &toolsFixture{pl: newPipeline(t, toolsDoc(key), Deps{Now: clk.Now}, Options{Now: clk.Now}), clock: clk}
}

func (f *toolsFixture) token(t testing.TB, scope string, exp time.Duration) string {
	return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "session_id": "sess-42", "scope": scope, "iat": t0.Unix(), "exp": t0.Add(exp).Unix()})
}

func (f *toolsFixture) check(host, token string, extra Headers) Verdict {
	h := Headers{"authorization": "Bearer " + token, "content-type": "application/json"}
	for k, v := range extra {
		h[k] = v
	}
	return f.pl.Check(context.Background(), &Request{Method: "POST", Scheme: "https", Host: host, Path: "/mcp", Headers: h,
		Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)})
}

// toolsClaims are the tools token's claims.
type toolsClaims struct {
	Tools   []string `json:"tools"`
	Depends []string `json:"depends"`
	jwt.RegisteredClaims
}

// verifyTools verifies the header as an MCP server would: with the lineage
// JWK set, type, issuer and audience.
func (f *toolsFixture) verifyTools(t *testing.T, value string) toolsClaims {
	t.Helper()
	return f.verifyToolsFor(t, value, "files")
}

func (f *toolsFixture) verifyToolsFor(t *testing.T, value, route string) toolsClaims {
	t.Helper()
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(f.pl.Policy().Signer().JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	keys, err := set.ToStorage()
	if err != nil {
		t.Fatal(err)
	}
	var c toolsClaims
	tok, err := jwt.ParseWithClaims(value, &c, func(tk *jwt.Token) (any, error) {
		k, err := keys.KeyRead(t.Context(), fmt.Sprint(tk.Header["kid"]))
		if err != nil {
			return nil, err
		}
		return k.Key(), nil
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithTimeFunc(f.clock.Now), jwt.WithIssuer("https://extauthz.example.com"),
		jwt.WithAudience(route), jwt.WithExpirationRequired())
	if err != nil {
		t.Fatalf("the tools header does not verify: %v", err)
	}
	if tok.Header["typ"] != ToolsTokenType {
		t.Errorf("typ %v", tok.Header["typ"])
	}
	return c
}

func setHeader(v Verdict, name string) (string, bool) {
	for _, h := range v.Set {
		if h.Name == name {
			return h.Value, true
		}
	}
	return "", false
}

// TestToolsHeader: an allowed request carries the tools its caller's rules
// do not deny, signed; a client's own copy never survives.
func TestToolsHeader(t *testing.T) {
	f := newToolsFixture(t)
	tests := []struct {
		name        string
		scope       string
		exp         time.Duration
		wantTools   []string
		wantDepends []string
		wantExp     time.Duration
	}{
		{name: "reader", scope: "files:read", exp: time.Hour, wantTools: []string{"read_file", "search", "list.dir"}, wantDepends: []string{"search"}, wantExp: 2 * time.Minute},
		{name: "writer", scope: "files:read files:write", exp: time.Hour, wantTools: []string{"read_file", "write_file", "search", "list.dir"}, wantDepends: []string{"search"}, wantExp: 2 * time.Minute},
		{name: "admin, token about to expire", scope: "files:write files:admin", exp: 30 * time.Second,
			wantTools: []string{"read_file", "write_file", "delete_file", "search", "list.dir"}, wantDepends: []string{"search"}, wantExp: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := f.check("files.example.com", f.token(t, tt.scope, tt.exp), Headers{"x-extauthz-tools": "forged"})
			if v.Outcome != Allowed {
				t.Fatalf("outcome %v: %s", v.Outcome, v.Description)
			}
			value, ok := setHeader(v, "x-extauthz-tools")
			if !ok || value == "forged" {
				t.Fatalf("header %q (set: %v)", value, ok)
			}
			if slices.Contains(v.Remove, "x-extauthz-tools") {
				t.Error("the header is both set and removed")
			}
			c := f.verifyTools(t, value)
			if !slices.Equal(c.Tools, tt.wantTools) || !slices.Equal(c.Depends, tt.wantDepends) {
				t.Errorf("tools %v depends %v, want %v %v", c.Tools, c.Depends, tt.wantTools, tt.wantDepends)
			}
			if c.Subject != "alice" || !c.IssuedAt.Equal(t0) || !c.ExpiresAt.Equal(t0.Add(tt.wantExp)) {
				t.Errorf("sub %q iat %v exp %v", c.Subject, c.IssuedAt, c.ExpiresAt)
			}
		})
	}

	t.Run("no tools at all", func(t *testing.T) {
		// A caller every rule refuses still gets a token: an empty list.
		v := f.check("admin.example.com", f.token(t, "files:read", time.Hour), nil)
		value, ok := setHeader(v, "x-extauthz-tools")
		if v.Outcome != Allowed || !ok {
			t.Fatalf("outcome %v header %v", v.Outcome, ok)
		}
		c := f.verifyToolsFor(t, value, "admin")
		if len(c.Tools) != 0 || !strings.Contains(decodePayload(t, value), `"tools":[]`) || strings.Contains(decodePayload(t, value), "depends") {
			t.Errorf("payload %s", decodePayload(t, value))
		}
	})
	t.Run("denied: the client's copy is removed", func(t *testing.T) {
		v := f.check("files.example.com", "not-a-token", Headers{"x-extauthz-tools": "forged"})
		if v.Outcome.Allow() {
			t.Fatalf("outcome %v", v.Outcome)
		}
		if _, ok := setHeader(v, "x-extauthz-tools"); ok {
			t.Error("a denial sets the header")
		}
	})
	t.Run("public path: the client's copy is removed", func(t *testing.T) {
		v := f.pl.Check(context.Background(), &Request{Method: "GET", Host: "files.example.com", Path: "/.well-known/oauth-protected-resource",
			Headers: Headers{"x-extauthz-tools": "forged"}})
		if _, ok := setHeader(v, "x-extauthz-tools"); ok || !slices.Contains(v.Remove, "x-extauthz-tools") {
			t.Errorf("outcome %v set %v remove %v", v.Outcome, v.Set, v.Remove)
		}
	})
	t.Run("route without the header", func(t *testing.T) {
		v := f.check("plain.example.com", f.token(t, "files:read", time.Hour), nil)
		if _, ok := setHeader(v, "x-extauthz-tools"); v.Outcome != Allowed || ok {
			t.Errorf("outcome %v set %v", v.Outcome, v.Set)
		}
	})
}

// TestToolsHeaderOwned: on a route with the header, every
// answer that lets a request pass without it strips the client's copy.
func TestToolsHeaderOwned(t *testing.T) {
	f := newToolsFixture(t)
	r, ok := f.pl.Policy().routes.ByName("files")
	if !ok {
		t.Fatal("no route")
	}
	if !slices.Contains(r.owned, "x-extauthz-tools") || !slices.Contains(r.identityOwned, "x-extauthz-tools") ||
		!slices.Contains(r.publicRemove(), "x-extauthz-tools") {
		t.Errorf("owned %v identity %v public %v", r.owned, r.identityOwned, r.publicRemove())
	}
}

func decodePayload(t *testing.T, tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", tok)
	}
	b, err := jwt.NewParser().DecodeSegment(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestToolsHeaderMemo: a grant's repeated requests share one token and
// one set of headers until half the token's lifetime has passed; then the
// token is signed anew, with the list evaluated again.
func TestToolsHeaderMemo(t *testing.T) {
	f := newToolsFixture(t)
	tok := f.token(t, "files:read", time.Hour)
	first := f.check("files.example.com", tok, nil)
	second := f.check("files.example.com", tok, nil)
	a, _ := setHeader(first, "x-extauthz-tools")
	b, _ := setHeader(second, "x-extauthz-tools")
	if a == "" || a != b {
		t.Fatal("the token was signed twice")
	}
	third := f.check("files.example.com", tok, nil)
	if second.HeadersID == 0 || third.HeadersID != second.HeadersID || &third.Set[0] != &second.Set[0] {
		t.Errorf("a cache hit rebuilt the headers: ids %d %d", second.HeadersID, third.HeadersID)
	}
	f.clock.Advance(59 * time.Second)
	if v := f.check("files.example.com", tok, nil); v.HeadersID != second.HeadersID {
		t.Error("renewed before half the lifetime")
	}
	f.clock.Advance(time.Second)
	later := f.check("files.example.com", tok, nil)
	c, _ := setHeader(later, "x-extauthz-tools")
	if c == a || later.HeadersID == second.HeadersID {
		t.Fatal("not renewed after half the lifetime")
	}
	if got := f.verifyTools(t, c); !got.IssuedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("renewed token iat %v", got.IssuedAt)
	}
}

// TestToolsHeaderNoAllocation: a cache hit with the tools header costs no
// allocation more than the same hit on a route without it.
func TestToolsHeaderNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	f := newToolsFixture(t)
	tok := f.token(t, "files:read", time.Hour)
	measure := func(host string) float64 {
		f.check(host, tok, nil)
		f.check(host, tok, nil)
		return testing.AllocsPerRun(100, func() { f.check(host, tok, nil) })
	}
	with, without := measure("files.example.com"), measure("plain.example.com")
	if with > without {
		t.Errorf("%v allocations with the tools header, %v without", with, without)
	}
}

// TestToolsHeaderExplain: Explain reports the list it signed.
func TestToolsHeaderExplain(t *testing.T) {
	f := newToolsFixture(t)
	h := Headers{"authorization": "Bearer " + f.token(t, "files:read", time.Hour), "content-type": "application/json"}
	_, steps := f.pl.Explain(context.Background(), &Request{Method: "POST", Scheme: "https", Host: "files.example.com", Path: "/mcp", Headers: h,
		Body: []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)})
	i := slices.IndexFunc(steps, func(s Step) bool { return s.Name == "tools-header" })
	if i < 0 || steps[i].Outcome != "signed" || !strings.Contains(steps[i].Detail, "3 of 5 tools callable") {
		t.Errorf("steps %+v", steps)
	}
}

// TestToolsHeaderCompile: a header another part of the service sets, or a
// route without the lineage key, is refused when compiled.
func TestToolsHeaderCompile(t *testing.T) {
	key := writeEd25519(t, t.TempDir())
	for _, h := range []string{"x-root-context-id", "x-lineage-token", "x-extauthz-decision-id", "mcp-session-id"} {
		doc := strings.Replace(toolsDoc(key), "ttl: 2m}", "ttl: 2m, header: "+h+"}", 1)
		cfg, err := config.Parse([]byte(doc))
		if err != nil {
			continue // refused by validation already
		}
		if p, err := Compile(t.Context(), cfg, Deps{}); err == nil {
			p.Close()
			t.Errorf("header %s compiled", h)
		}
	}
}

// BenchmarkToolsHeader: a cache hit on a route without the header
// (without), one reusing the grant's signed token (hit), and one whose
// token is due and signed anew (sign: 5 tools
// evaluated, one CEL partial evaluation, an Ed25519 signature).
func BenchmarkToolsHeader(b *testing.B) {
	for _, bc := range []struct {
		name    string
		host    string
		advance time.Duration
	}{{"without", "plain.example.com", 0}, {"hit", "files.example.com", 0}, {"sign", "files.example.com", time.Minute}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newToolsFixture(b)
			tok := f.token(b, "files:read", 100*365*24*time.Hour)
			f.check(bc.host, tok, nil)
			b.ReportAllocs()
			for b.Loop() {
				f.clock.Advance(bc.advance)
				if v := f.check(bc.host, tok, nil); v.Outcome != Allowed {
					b.Fatal(v.Description)
				}
			}
		})
	}
}
