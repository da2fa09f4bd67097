package check

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/segment"
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
	get := func(s *grantShape) *grantShape { return tab.get(s, new(atomic.Pointer[grantShape])) } // the table alone
	for i := range maxShapes {
		get(&grantShape{Route: fmt.Sprint(i)})
	}
	if len(tab.m) != maxShapes {
		t.Fatalf("%d shapes, want %d", len(tab.m), maxShapes)
	}
	a := get(&grantShape{Route: "new"})
	if len(tab.m) != 1 {
		t.Fatalf("a full table kept %d shapes", len(tab.m))
	}
	if b := get(&grantShape{Route: "new"}); a != b {
		t.Fatal("an equal shape is not shared after starting over")
	}
	c := get(&grantShape{Route: "new", Claims: RuleClaims{{Name: "x", Value: map[string]any{}}}})
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

// TestShapeTableLast: a route's last shape answers for an equal shape and
// only for one; a shape the table cannot share leaves it alone.
func TestShapeTableLast(t *testing.T) {
	var tab shapeTable
	tab.m = map[string]*grantShape{}
	var last atomic.Pointer[grantShape]
	eng := func() *grantShape {
		return &grantShape{Route: "r", Issuer: "dev", Claims: RuleClaims{{Name: "department", Value: "eng"}}}
	}
	a := tab.get(eng(), &last)
	if last.Load() != a || !a.shared {
		t.Fatal("the shape made is not the route's last")
	}
	tab.m = map[string]*grantShape{} // found without the table
	if b := tab.get(eng(), &last); b != a {
		t.Fatal("an equal shape is not the route's last")
	}
	tests := []struct {
		name string
		s    *grantShape
	}{
		{"other claim value", &grantShape{Route: "r", Issuer: "dev", Claims: RuleClaims{{Name: "department", Value: "ops"}}}},
		{"claim value of another type", &grantShape{Route: "r", Issuer: "dev", Claims: RuleClaims{{Name: "department", Value: []any{"eng"}}}}},
		{"other issuer", &grantShape{Route: "r", Issuer: "ops", Claims: RuleClaims{{Name: "department", Value: "eng"}}}},
		{"no claims", &grantShape{Route: "r", Issuer: "dev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			last.Store(a)
			got := tab.get(tt.s, &last)
			if got == a || got.Issuer != tt.s.Issuer || len(got.Claims) != len(tt.s.Claims) {
				t.Fatalf("got the last shape %+v for %+v", got, tt.s)
			}
			if last.Load() != got {
				t.Fatal("the route's last shape did not move")
			}
		})
	}
	last.Store(a)
	c := tab.get(&grantShape{Route: "r", Claims: RuleClaims{{Name: "x", Value: map[string]any{}}}}, &last)
	if c.shared || last.Load() != a {
		t.Fatal("a shape the table cannot share moved the route's last")
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
		"bound key":  {boundKey: "r"},
		"bound cert": {boundCert: "r"},
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

// TestShapeSameKey: sameKey says two shapes are the same exactly when
// their keys are, for every pair of shapes differing in one field (and of
// equal ones built apart), and never for a shape without a key.
func TestShapeSameKey(t *testing.T) {
	// appendKey and sameKey must cover every field but the memos: a field
	// added to grantShape is added to both, and counted here.
	if n := reflect.TypeFor[grantShape]().NumField(); n != 21 {
		t.Fatalf("grantShape has %d fields: add the new ones to appendKey and sameKey, then count them here", n)
	}
	shapes := []*grantShape{
		{}, {Route: "r"}, {routeKey: "r"}, {Issuer: "r"}, {ClientID: "r"}, {KeyID: "r"}, {APIKeyID: "r"},
		{boundKey: "r"}, {boundCert: "r"},
		{Scopes: []string{"r"}}, {Scopes: []string{"r", ""}}, {Scopes: []string{"r", "s"}}, {Scopes: []string{}},
		{Actors: []string{"r"}}, {remove: []string{"r"}}, {whenResults: []uint8{1}}, {whenResults: []uint8{2}},
		{sessionSource: 1}, {sessionSource: -1}, {sessionClaimIdx: 1}, {sessionPerRequest: true}, {scopeOK: true},
		{jwt: map[string]any{}},
		{Claims: RuleClaims{{Name: "r", Value: "1"}}}, {Claims: RuleClaims{{Name: "s", Value: "1"}}},
		{Claims: RuleClaims{{Name: "r", Value: 1.0}}}, {Claims: RuleClaims{{Name: "r", Value: 2.0}}},
		{Claims: RuleClaims{{Name: "r", Value: math.Copysign(0, -1)}}}, {Claims: RuleClaims{{Name: "r", Value: 0.0}}},
		{Claims: RuleClaims{{Name: "r", Value: true}}}, {Claims: RuleClaims{{Name: "r", Value: false}}},
		{Claims: RuleClaims{{Name: "r"}}}, {Claims: RuleClaims{{Name: "r", Value: []any{}}}},
		{Claims: RuleClaims{{Name: "r", Value: []any{"1"}}}}, {Claims: RuleClaims{{Name: "r", Value: []any{"1", 1.0}}}},
		{Claims: RuleClaims{{Name: "r", Value: []any{1.0}}}},
		{Claims: RuleClaims{{Name: "r", Value: "1"}, {Name: "s", Value: true}}},
		// No key: a nested list, a map, an int.
		{Claims: RuleClaims{{Name: "r", Value: []any{[]any{"1"}}}}},
		{Claims: RuleClaims{{Name: "r", Value: map[string]any{}}}},
		{Claims: RuleClaims{{Name: "r", Value: 1}}},
	}
	// Each shape again, built apart: equal shapes share no memory.
	clone := func(s *grantShape) *grantShape {
		c := s.own()
		c.Scopes, c.remove, c.whenResults = slices.Clone(s.Scopes), slices.Clone(s.remove), slices.Clone(s.whenResults)
		return c
	}
	for _, a := range shapes {
		for _, b := range append(slices.Clone(shapes), clone(a)) {
			ka, okA := a.appendKey(nil)
			kb, okB := b.appendKey(nil)
			if !okB {
				continue // never in the table
			}
			if got, want := a.sameKey(b), okA && string(ka) == string(kb); got != want {
				t.Errorf("sameKey(%+v, %+v) = %v, keys equal %v", a, b, got, want)
			}
		}
	}
}

// TestGrantValuesPacked: whatever the user is made of (a namespace, an
// encoded header value) and however many headers a route sets, the grant's
// strings are one allocation holding the user once, and its headers say
// what they did before they were packed.
func TestGrantValuesPacked(t *testing.T) {
	const twoIssuers = `issuers:
  - {name: dev, issuer: https://dev.example.com, algorithms: [HS256], secret: ` + secret + `}
  - {name: other, issuer: https://other.example.com, algorithms: [HS256], secret: ` + secret + `}
`
	const oneIssuer = `issuers: [{name: dev, issuer: https://dev.example.com, algorithms: [HS256], secret: ` + secret + `}]
`
	route := func(headers string) string {
		return "routes: [{name: agent, default: true, issuers: [dev], claim_headers: [" + headers + "]}]\n"
	}
	tests := []struct {
		name, doc string
		sub       string
		// want are the headers' values in order; sameAsUser those (by
		// index) that must share the subject's bytes.
		want       []string
		subject    string
		sameAsUser []int
	}{
		{name: "namespaced user", doc: twoIssuers + route("{claim: email, header: x-user-email}"), sub: "alice",
			subject: "dev:alice", want: []string{"dev:alice", "sess-42", "alice@example.com"}, sameAsUser: []int{0}},
		{name: "encoded user", doc: twoIssuers + route("{claim: email, header: x-user-email}") +
			"identity: {safe_values: path-segment, unsafe_values: encode}\n", sub: "a/b",
			subject: "dev:a/b", want: []string{"dev:" + segment.Encode("a/b"), "sess-42", "alice@example.com"}},
		{name: "headers repeating user and session", doc: oneIssuer + route("{claim: sub, header: x-sub}, {claim: session_id, header: x-sess}"),
			sub: "alice", subject: "alice", want: []string{"alice", "sess-42", "alice", "sess-42"}, sameAsUser: []int{0, 2}},
		{name: "more headers than fit inline", doc: oneIssuer + route(`{claim: email, header: x-1}, {claim: department, header: x-2},
      {claim: team, header: x-3}, {claim: sub, header: x-4}, {claim: email, header: x-5}`),
			sub: "bob", subject: "bob", want: []string{"bob", "sess-42", "alice@example.com", "eng", "core", "bob", "alice@example.com"}, sameAsUser: []int{0, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := newPipeline(t, tt.doc, Deps{}, Options{})
			tok := testHS(t, jwt.MapClaims{"iss": "https://dev.example.com", "sub": tt.sub, "session_id": "sess-42",
				"email": "alice@example.com", "department": "eng", "team": "core", "exp": t0.Add(24 * 365 * time.Hour).Unix()})
			v := pl.Check(context.Background(), agentReq(Headers{"authorization": "Bearer " + tok}))
			g := v.Grant
			if g == nil {
				t.Fatalf("no grant: %v %s", v.Outcome, v.Description)
			}
			if g.Subject != tt.subject || g.Session != "sess-42" {
				t.Fatalf("grant is %q session %q", g.Subject, g.Session)
			}
			h := g.Headers()
			size := len(g.Subject) + len(g.Session)
			for i, w := range tt.want {
				if i >= len(h) || h[i].Value != w {
					t.Fatalf("headers %v, want values %q", h, tt.want)
				}
				size += len(w)
			}
			if len(h) != len(tt.want) {
				t.Fatalf("headers %v, want values %q", h, tt.want)
			}
			start := uintptr(unsafe.Pointer(unsafe.StringData(g.Subject)))
			values := []string{g.Session}
			for _, x := range h {
				values = append(values, x.Value)
			}
			for _, s := range values {
				p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
				if s != "" && (p < start || p+uintptr(len(s)) > start+uintptr(size)) {
					t.Fatalf("%q is not in the grant's packed string", s)
				}
			}
			for _, i := range tt.sameAsUser {
				if unsafe.StringData(h[i].Value) != unsafe.StringData(g.Subject) {
					t.Fatalf("header %d holds a second copy of the subject", i)
				}
			}
		})
	}
}

// TestWithLineageRemoved: a grant strips its own headers, then the lineage
// headers of the request, whatever the requests of its shape stripped
// before; a shared shape hands out one list for requests that strip the
// same ones.
func TestWithLineageRemoved(t *testing.T) {
	shared := &grantShape{remove: []string{"authorization"}, shared: true}
	alone := &grantShape{remove: []string{"authorization"}}
	tests := []struct {
		name  string
		shape *grantShape
		extra []string
		want  []string
	}{
		{"nothing stripped", shared, nil, []string{"authorization"}},
		{"parent", shared, []string{"x-parent"}, []string{"authorization", "x-parent"}},
		{"parent again", shared, []string{"x-parent"}, []string{"authorization", "x-parent"}},
		{"parent and chain", shared, []string{"x-parent", "x-chain"}, []string{"authorization", "x-parent", "x-chain"}},
		{"chain", shared, []string{"x-chain"}, []string{"authorization", "x-chain"}},
		{"unshared", alone, []string{"x-parent"}, []string{"authorization", "x-parent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Grant{grantShape: tt.shape}
			extra := append([]string(nil), tt.extra...)
			got := g.withLineageRemoved(extra)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("%q, want %q", got, tt.want)
			}
			if len(extra) > 0 {
				extra[0] = "changed" // the caller's list is its own
				if again := g.withLineageRemoved(tt.extra); !slices.Equal(again, tt.want) {
					t.Fatalf("%q after the caller's list changed, want %q", again, tt.want)
				}
				if tt.shape.shared && &got[0] != &g.withLineageRemoved(tt.extra)[0] {
					t.Fatal("a shared shape made the list again")
				}
			}
		})
	}
	if alone.lineageRemove.Load() != nil {
		t.Fatal("an unshared shape keeps a list")
	}
}

// BenchmarkShapeTableGet measures finding the shared shape of a new grant
// of a typical route: through the table (the route's last shape is another
// one) and as the route's last shape.
func BenchmarkShapeTableGet(b *testing.B) {
	var tab shapeTable
	tab.m = map[string]*grantShape{}
	shape := func(dept string) *grantShape {
		return &grantShape{Route: "tools", routeKey: "tools\x00c0ffee", Issuer: "dev", ClientID: "mcp-client",
			Scopes: []string{"openid", "profile", "mcp:tools"}, remove: []string{"x-user-email", "authorization"},
			sessionSource: 0, scopeOK: true, Claims: RuleClaims{{Name: "department", Value: dept}}}
	}
	eng, ops := shape("eng"), shape("ops")
	var other atomic.Pointer[grantShape]
	opsShared := tab.get(ops, &other)
	b.Run("table", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			other.Store(opsShared) // the route's last shape is always ops
			if tab.get(eng, &other) == nil {
				b.Fatal("no shape")
			}
		}
	})
	b.Run("last", func(b *testing.B) {
		var last atomic.Pointer[grantShape]
		tab.get(eng, &last)
		b.ReportAllocs()
		for b.Loop() {
			if tab.get(eng, &last) == nil {
				b.Fatal("no shape")
			}
		}
	})
}
