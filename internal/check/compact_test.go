package check

import (
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"
)

// shapeDoc is a route whose rules read department and groups, with e-mail
// carried in a header.
const shapeDoc = `issuers: [{name: dev, algorithms: [HS256], secret: ` + secret + `}]
routes:
  - name: agent
    default: true
    issuers: [dev]
    claim_headers: [{claim: email, header: x-user-email}]
    rules:
      - {name: eng, claims: {department: [eng]}}
      - {name: ops, claims: {groups: [ops]}}
`

// grantOf checks one token of claims (over alice's) and returns its grant.
func grantOf(t *testing.T, pl *Pipeline, mint func(jwt.MapClaims) string, claims jwt.MapClaims) *Grant {
	t.Helper()
	v := pl.Check(context.Background(), agentReq(Headers{"authorization": "Bearer " + mint(claims)}))
	if v.Grant == nil {
		t.Fatalf("no grant: %v %s", v.Outcome, v.Description)
	}
	return v.Grant
}

// TestGrantsShareShapes: grants that differ only in who they are share one
// shape; any difference in what a shape holds gives another; what is the
// grant's own (user, session, headers) is never shared.
func TestGrantsShareShapes(t *testing.T) {
	pl, mint := pipelineFor(t, shapeDoc)
	user := func(i int, extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": fmt.Sprintf("user-%d", i), "session_id": fmt.Sprintf("sess-%d", i),
			"email": fmt.Sprintf("user-%d@example.com", i), "department": "eng", "groups": []any{"ops", "dev"}}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	base := grantOf(t, pl, mint, user(1, nil))
	tests := []struct {
		name  string
		extra jwt.MapClaims
		same  bool
	}{
		{name: "another user", same: true},
		{name: "another department", extra: jwt.MapClaims{"department": "sales"}},
		{name: "other groups", extra: jwt.MapClaims{"groups": []any{"ops"}}},
		{name: "a client", extra: jwt.MapClaims{"azp": "cli"}},
		{name: "scopes", extra: jwt.MapClaims{"scope": "a b"}},
		{name: "an act chain", extra: jwt.MapClaims{"act": map[string]any{"sub": "agent-1"}}},
		{name: "a claim the rules do not read", extra: jwt.MapClaims{"name": "Bob"}, same: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := grantOf(t, pl, mint, user(i+2, tt.extra))
			if got := g.grantShape == base.grantShape; got != tt.same {
				t.Fatalf("shares the shape: %v, want %v", got, tt.same)
			}
			want := fmt.Sprintf("user-%d", i+2)
			if g.Subject != want || g.Session != fmt.Sprintf("sess-%d", i+2) {
				t.Fatalf("grant is %q session %q", g.Subject, g.Session)
			}
			if h := g.Headers(); len(h) != 3 || h[0].Value != want || h[2].Value != want+"@example.com" {
				t.Fatalf("headers %v", h)
			}
		})
	}
	if base.Subject != "user-1" || base.Headers()[2].Value != "user-1@example.com" {
		t.Fatalf("first grant changed: %q %v", base.Subject, base.Headers())
	}
}

// TestGrantStringsPacked: the user, session and header values of a grant
// are one allocation of their own; a header repeating the user points to
// the same bytes.
func TestGrantStringsPacked(t *testing.T) {
	pl, mint := pipelineFor(t, shapeDoc)
	g := grantOf(t, pl, mint, jwt.MapClaims{"email": "alice@example.com"})
	start := uintptr(unsafe.Pointer(unsafe.StringData(g.Subject)))
	end := start + uintptr(len(g.Subject)+len(g.Session)+len("alice@example.com"))
	for _, s := range []string{g.Session, g.Headers()[0].Value, g.Headers()[1].Value, g.Headers()[2].Value} {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		if p < start || p+uintptr(len(s)) > end {
			t.Fatalf("%q is not in the grant's packed string", s)
		}
	}
	if unsafe.StringData(g.Headers()[0].Value) != unsafe.StringData(g.Subject) {
		t.Fatal("the user header holds a second copy of the subject")
	}
}

// TestShapeTableStartsOver: a full shape table is emptied, and shapes are
// shared again after it.
func TestShapeTableStartsOver(t *testing.T) {
	var tab shapeTable
	tab.m = map[string]*grantShape{}
	for i := range maxShapes {
		tab.get(&grantShape{Route: fmt.Sprint(i)})
	}
	if len(tab.m) != maxShapes {
		t.Fatalf("%d shapes, want %d", len(tab.m), maxShapes)
	}
	a := tab.get(&grantShape{Route: "new"})
	if len(tab.m) != 1 {
		t.Fatalf("a full table kept %d shapes", len(tab.m))
	}
	if b := tab.get(&grantShape{Route: "new"}); a != b {
		t.Fatal("an equal shape is not shared after starting over")
	}
	c := tab.get(&grantShape{Route: "new", Claims: RuleClaims{{Name: "x", Value: map[string]any{}}}})
	if c == a || c.shared || !a.shared {
		t.Fatal("a shape with a claim it cannot compare was shared")
	}
	// Only a shared shape keeps a rendering.
	n := 0
	build := func(*Grant) int { n++; return n }
	for _, s := range []*grantShape{a, a, c, c} {
		RenderedShape(&Grant{grantShape: s}, build)
	}
	if n != 3 {
		t.Fatalf("%d renderings, want 1 for the shared shape and 2 for the other", n)
	}
}

// TestShapeKeysDiffer: every field of a shape is part of its key.
func TestShapeKeysDiffer(t *testing.T) {
	shapes := map[string]*grantShape{
		"empty":      {},
		"route":      {Route: "r"},
		"route key":  {routeKey: "r"},
		"issuer":     {Issuer: "r"},
		"client":     {ClientID: "r"},
		"kid":        {KeyID: "r"},
		"api key":    {APIKeyID: "r"},
		"scopes":     {Scopes: []string{"r"}},
		"two scopes": {Scopes: []string{"r", ""}},
		"actors":     {Actors: []string{"r"}},
		"remove":     {remove: []string{"r"}},
		"when":       {whenResults: []uint8{1}},
		"source":     {sessionSource: 1},
		"claim idx":  {sessionClaimIdx: 1},
		"per req":    {sessionPerRequest: true},
		"scope ok":   {scopeOK: true},
		"jwt":        {jwt: map[string]any{}},
		"claim s":    {Claims: RuleClaims{{Name: "r", Value: "1"}}},
		"claim f":    {Claims: RuleClaims{{Name: "r", Value: 1.0}}},
		"claim b":    {Claims: RuleClaims{{Name: "r", Value: true}}},
		"claim nil":  {Claims: RuleClaims{{Name: "r"}}},
		"claim list": {Claims: RuleClaims{{Name: "r", Value: []any{"1"}}}},
	}
	seen := map[string]string{}
	for name, s := range shapes {
		k, ok := s.appendKey(nil)
		if !ok {
			t.Fatalf("%s: not encodable", name)
		}
		if other, dup := seen[string(k)]; dup {
			t.Fatalf("%s and %s have the same key", name, other)
		}
		seen[string(k)] = name
	}
}
