package check

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// A cached grant can live as long as its token, and a replica holds one per
// active token: hundreds of thousands. What a grant shares with every other
// grant of its route or issuer (scope lists, the headers it strips, the
// values of claims rules compare) is kept once, here, instead of once per
// grant; what rules need of the claims is kept as a short list, not a map.

// RuleClaims are the claims a route's rules look at, by name: a handful at
// most, so a list is smaller and as fast as a map.
type RuleClaims []RuleClaim

// RuleClaim is one claim's value as the token carried it (string, number,
// bool, or a list of those).
type RuleClaim struct {
	Name  string
	Value any
}

// Get returns the claim's value, nil when the token did not carry it.
func (c RuleClaims) Get(name string) any {
	for i := range c {
		if c[i].Name == name {
			return c[i].Value
		}
	}
	return nil
}

// maxInterned bounds each intern table: values come from tokens, and a
// flood of distinct ones must not grow memory without end. Past the bound
// values are simply not shared.
const maxInterned = 4096

// internTable shares equal values between grants. It is read on every
// cache miss: a lookup by a key built in a stack buffer allocates nothing.
type internTable[V any] struct {
	mu sync.RWMutex
	m  map[string]V
}

// lookup returns the shared value under key, if there is one.
func (t *internTable[V]) lookup(key []byte) (V, bool) {
	t.mu.RLock()
	v, ok := t.m[string(key)]
	t.mu.RUnlock()
	return v, ok
}

// lookupString is lookup by a string key.
func (t *internTable[V]) lookupString(key string) (V, bool) {
	t.mu.RLock()
	v, ok := t.m[key]
	t.mu.RUnlock()
	return v, ok
}

// put stores v under key when there is no value there yet and there is
// room, and returns the value under key: v itself past the bound. v must
// be the caller's own copy, sharing nothing with a token or a stack.
func (t *internTable[V]) put(key []byte, v V) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if got, ok := t.m[string(key)]; ok {
		return got
	}
	if len(t.m) >= maxInterned {
		return v
	}
	if t.m == nil {
		t.m = make(map[string]V)
	}
	t.m[string(key)] = v
	return v
}

var (
	internedLists  internTable[[]string]
	internedFields internTable[[]string]
	internedValues internTable[any]
)

// cloneList copies a list and its strings.
func cloneList(l []string) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = strings.Clone(v)
	}
	return out
}

// internList returns a shared copy of list, or an unshared copy when the
// table is full: never list itself, which may live on the caller's stack.
// Callers must never modify it.
func internList(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	// Each element is length-prefixed: with a separator byte instead, a
	// claim holding that byte ("read\u0000admin") would find the list
	// of two scopes ("read", "admin") another token had interned.
	var buf [256]byte
	key := buf[:0]
	for _, v := range list {
		key = binary.AppendUvarint(key, uint64(len(v)))
		key = append(key, v...)
	}
	if got, ok := internedLists.lookup(key); ok {
		return got
	}
	return internedLists.put(key, cloneList(list))
}

// internFields is strings.Fields(s) shared: a scope claim is nearly always
// one of a few strings, whose split lists are then kept once.
func internFields(s string) []string {
	if got, ok := internedFields.lookupString(s); ok {
		return got
	}
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil
	}
	return internedFields.put([]byte(s), cloneList(f))
}

// internClaim shares a scalar claim value ("eng", true, 3): the interface
// value then points to one copy for every grant. Lists stay as they are.
func internClaim(v any) any {
	switch s := v.(type) {
	case string:
		if len(s) <= 64 {
			return internClaimString(s)
		}
	case bool:
		return s // booleans never allocate
	}
	return v
}

// internClaimString is internClaim of a string claim read as a string: a
// shared value comes out of the table boxed already, so reading it costs
// no allocation at all.
func internClaimString(s string) any {
	if len(s) > 64 {
		return s
	}
	var buf [65]byte
	key := append(append(buf[:0], 's'), s...)
	if got, ok := internedValues.lookup(key); ok {
		return got
	}
	return internedValues.put(key, strings.Clone(s))
}

// share returns the grant g drafts, made for keeps (pack made its strings
// its own): its headers copied into the grant's own allocation and its
// shape replaced by an equal shared one (or a copy of its own). newGrant
// calls it last, on a draft that may live on its stack and that nobody
// else has seen. r is the route the grant is made on.
func (g *Grant) share(r *Route) *Grant {
	own, set := allocGrant(len(g.set))
	copy(set, g.set)
	own.grantShape = shapes.get(g.grantShape, &r.lastShape)
	own.Subject, own.Session = g.Subject, g.Session
	own.exp, own.iat = g.exp, g.iat
	own.set = set
	return own
}

// maxInlineHeaders is the most identity headers a grant keeps in its own
// allocation (allocGrant); nearly every route sets fewer.
const maxInlineHeaders = 4

// allocGrant returns a new grant with room for n headers, in one
// allocation when n is at most maxInlineHeaders: a cached grant then costs
// one object less, and never more bytes than two would.
func allocGrant(n int) (*Grant, []Header) {
	switch n {
	case 0:
		return new(Grant), nil
	case 1:
		a := new(struct {
			g Grant
			h [1]Header
		})
		return &a.g, a.h[:]
	case 2:
		a := new(struct {
			g Grant
			h [2]Header
		})
		return &a.g, a.h[:]
	case 3:
		a := new(struct {
			g Grant
			h [3]Header
		})
		return &a.g, a.h[:]
	case 4:
		a := new(struct {
			g Grant
			h [maxInlineHeaders]Header
		})
		return &a.g, a.h[:]
	}
	return new(Grant), make([]Header, n)
}

// pack sets the grant's Subject to ns followed by sub and the user header
// (the first of set) to ns followed by userValue, and copies Subject,
// Session and the values of the identity headers into one string, pointing
// them into it. The values may be substrings of something much larger (a
// decoded token) that must not stay alive for as long as the grant is
// cached; a header repeating the subject or the session keeps pointing to
// the same bytes.
func (g *Grant) pack(ns, sub, userValue string) {
	isSubject := func(v string) bool {
		return len(v) == len(ns)+len(sub) && v[:len(ns)] == ns && v[len(ns):] == sub
	}
	ownUser := userValue != sub // else the user header is the subject
	n := len(ns) + len(sub) + len(g.Session)
	if ownUser {
		n += len(ns) + len(userValue)
	}
	for _, h := range g.set[1:] {
		if h.Value != g.Session && !isSubject(h.Value) {
			n += len(h.Value)
		}
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(ns)
	b.WriteString(sub)
	b.WriteString(g.Session)
	if ownUser {
		b.WriteString(ns)
		b.WriteString(userValue)
	}
	for _, h := range g.set[1:] {
		if h.Value != g.Session && !isSubject(h.Value) {
			b.WriteString(h.Value)
		}
	}
	s := b.String()
	subject := s[:len(ns)+len(sub)]
	off := len(subject)
	ses := s[off : off+len(g.Session)]
	off += len(g.Session)
	g.set[0].Value = subject
	if ownUser {
		g.set[0].Value = s[off : off+len(ns)+len(userValue)]
		off += len(ns) + len(userValue)
	}
	for i := 1; i < len(g.set); i++ {
		switch v := g.set[i].Value; {
		case v == g.Session:
			g.set[i].Value = ses
		case isSubject(v):
			g.set[i].Value = subject
		default:
			g.set[i].Value = s[off : off+len(v)]
			off += len(v)
		}
	}
	g.Subject, g.Session = subject, ses
}

// maxShapes bounds the shape table. Shapes come from tokens (clients, keys,
// claim values), so a flood of distinct ones must not grow it without end;
// and shapes of routes a reload changed or of keys an issuer rotated must
// not keep new ones out forever: a full table is emptied and fills again
// (the grants holding the old shapes keep them).
const maxShapes = 4096

// shapeTable shares equal grant shapes.
type shapeTable struct {
	mu sync.RWMutex
	m  map[string]*grantShape
}

var shapes = shapeTable{m: map[string]*grantShape{}}

// maxShapeKey bounds the encoded shape a table key is made of; a larger
// shape (many claims, long lists) is kept by its grant alone.
const maxShapeKey = 2048

// get returns the shared shape equal to s, storing a copy of s first when
// there is none; or a copy of s alone when it cannot be shared. last is the
// route's shape of its last grant, compared field by field before any key
// is encoded (sameKey) and set to what get returns from the table: the
// answer is the one the table would give.
func (t *shapeTable) get(s *grantShape, last *atomic.Pointer[grantShape]) *grantShape {
	if l := last.Load(); l != nil && s.sameKey(l) {
		return l
	}
	var buf [512]byte
	key, ok := s.appendKey(buf[:0])
	if !ok || len(key) > maxShapeKey {
		return s.own()
	}
	t.mu.RLock()
	got := t.m[string(key)]
	t.mu.RUnlock()
	if got == nil {
		got = t.put(key, s)
	}
	last.Store(got)
	return got
}

// put stores a copy of s under key, unless an equal shape got there
// first, and returns the shape under key.
func (t *shapeTable) put(key []byte, s *grantShape) *grantShape {
	own := s.own()
	t.mu.Lock()
	defer t.mu.Unlock()
	if got := t.m[string(key)]; got != nil {
		return got
	}
	if len(t.m) >= maxShapes {
		t.m = make(map[string]*grantShape, maxShapes)
	}
	own.shared = true
	t.m[string(key)] = own
	return own
}

// appendKey appends an encoding of everything in s to b: equal encodings,
// equal shapes. It reports false for a claim value it cannot encode.
func (s *grantShape) appendKey(b []byte) ([]byte, bool) {
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	list := func(l []string) {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, v := range l {
			str(v)
		}
	}
	str(s.Route)
	str(s.routeKey)
	str(s.Issuer)
	str(s.ClientID)
	str(s.KeyID)
	str(s.APIKeyID)
	str(s.boundKey)
	str(s.boundCert)
	list(s.Scopes)
	list(s.Actors)
	list(s.remove)
	b = binary.AppendUvarint(b, uint64(len(s.whenResults)))
	b = append(b, s.whenResults...)
	b = binary.AppendVarint(b, int64(s.sessionSource))
	b = binary.AppendVarint(b, int64(s.sessionClaimIdx))
	b = append(b, flag(s.sessionPerRequest), flag(s.scopeOK), flag(s.jwt != nil))
	b = binary.AppendUvarint(b, uint64(len(s.Claims)))
	for _, c := range s.Claims {
		str(c.Name)
		var ok bool
		if b, ok = appendValue(b, c.Value, true); !ok {
			return b, false
		}
	}
	return b, true
}

// sameKey reports whether s has the key of o, a shape in the table
// (appendKey encoded it): field by field, as appendKey encodes them, which
// costs less than encoding s. Every field appendKey encodes is compared
// here; TestShapeSameKey holds the two together.
func (s *grantShape) sameKey(o *grantShape) bool {
	return s.Route == o.Route && s.routeKey == o.routeKey && s.Issuer == o.Issuer &&
		s.ClientID == o.ClientID && s.KeyID == o.KeyID && s.APIKeyID == o.APIKeyID &&
		s.boundKey == o.boundKey && s.boundCert == o.boundCert &&
		slices.Equal(s.Scopes, o.Scopes) && slices.Equal(s.Actors, o.Actors) && slices.Equal(s.remove, o.remove) &&
		slices.Equal(s.whenResults, o.whenResults) &&
		s.sessionSource == o.sessionSource && s.sessionClaimIdx == o.sessionClaimIdx &&
		s.sessionPerRequest == o.sessionPerRequest && s.scopeOK == o.scopeOK && (s.jwt != nil) == (o.jwt != nil) &&
		sameClaims(s.Claims, o.Claims)
}

// sameClaims compares claim lists as appendKey encodes them.
func sameClaims(a, b RuleClaims) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !sameValue(a[i].Value, b[i].Value, true) {
			return false
		}
	}
	return true
}

// sameValue reports whether a and b have the same encoding (appendValue),
// false when a has none.
func sameValue(a, b any, lists bool) bool {
	switch a := a.(type) {
	case nil:
		return b == nil
	case string:
		v, ok := b.(string)
		return ok && a == v
	case float64:
		v, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(v)
	case bool:
		v, ok := b.(bool)
		return ok && a == v
	case []any:
		v, ok := b.([]any)
		if !lists || !ok || len(a) != len(v) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], v[i], false) {
				return false
			}
		}
		return true
	}
	return false
}

func flag(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// appendValue encodes a claim value: a scalar, or (when lists is true) a
// list of scalars.
func appendValue(b []byte, v any, lists bool) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, 'n'), true
	case string:
		b = append(b, 's')
		b = binary.AppendUvarint(b, uint64(len(v)))
		return append(b, v...), true
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, 'f'), math.Float64bits(v)), true
	case bool:
		return append(b, 'b', flag(v)), true
	case []any:
		if !lists {
			return b, false
		}
		b = append(b, 'l')
		b = binary.AppendUvarint(b, uint64(len(v)))
		for _, e := range v {
			var ok bool
			if b, ok = appendValue(b, e, false); !ok {
				return b, false
			}
		}
		return b, true
	}
	return b, false
}

// own returns a copy of s that holds no string of the token it was read
// from: what came from the token is copied (names and lists that are
// already shared stay shared).
func (s *grantShape) own() *grantShape {
	c := grantShape{
		Route: s.Route, routeKey: s.routeKey, Issuer: s.Issuer, Scopes: s.Scopes, Claims: s.Claims,
		whenResults: s.whenResults, jwt: s.jwt, sessionSource: s.sessionSource, sessionClaimIdx: s.sessionClaimIdx,
		sessionPerRequest: s.sessionPerRequest, scopeOK: s.scopeOK, remove: s.remove,
	}
	c.ClientID = strings.Clone(s.ClientID)
	c.KeyID = strings.Clone(s.KeyID)
	c.APIKeyID = strings.Clone(s.APIKeyID)
	c.boundKey = strings.Clone(s.boundKey)
	c.boundCert = strings.Clone(s.boundCert)
	if s.Actors != nil {
		c.Actors = make([]string, len(s.Actors))
		for i, a := range s.Actors {
			c.Actors[i] = strings.Clone(a)
		}
	}
	if s.Claims != nil {
		c.Claims = make(RuleClaims, len(s.Claims))
		for i, rc := range s.Claims {
			c.Claims[i] = RuleClaim{Name: strings.Clone(rc.Name), Value: cloneValue(rc.Value)}
		}
	}
	if s.jwt != nil {
		c.jwt = make(map[string]any, len(c.Claims))
		for _, rc := range c.Claims {
			c.jwt[rc.Name] = rc.Value
		}
	}
	return &c
}

// cloneValue copies the strings of a claim value (a scalar or a list); an
// interned string is already a copy of its own.
func cloneValue(v any) any {
	switch v := v.(type) {
	case string:
		return strings.Clone(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}
