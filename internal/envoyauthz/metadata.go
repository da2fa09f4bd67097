package envoyauthz

import (
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// The dynamic metadata of a response: who the caller is, the route, the
// call and its lineage, for access logs and later filters (the response
// path, internal/extprocauthz, reads the caller back from it).
//
// What every grant of one shape shows (route, issuer, scopes, rule claims)
// is rendered once for all of them (shapeFields). The rest, the grant's own
// fields and the request's, are entries: the protobuf API turns them into
// Values (metadataFields), the wire path writes them as bytes
// (encodeGrantAllow). Both read the same entries, so both show the same.

// rendering is what a grant in use keeps for its answers: its last one,
// so that repeated requests of one conversation get the same answer,
// shared (read-only) between them. The protobuf API also keeps the
// message form of the grant's own pieces (messageParts), built at its
// first memo; the wire path writes everything else from the verdict, so a
// grant it answers keeps nothing more.
type rendering struct {
	last  atomic.Pointer[lastResponse]
	parts atomic.Pointer[messageParts]
}

// messageParts are a grant's response pieces as messages, built once per
// grant so that a cache hit through the protobuf API rebuilds only what
// varies per request.
type messageParts struct {
	headers []*corev3.HeaderValueOption
	shape   *shapeFields
	own     []field // the grant's own fields (ownEntries)
}

// field is one metadata entry in the protobuf form.
type field struct {
	key string
	val *structpb.Value
}

// shapeFields are the metadata entries every grant of one shape shows, as
// Values and encoded (the concatenated map entries of a Struct, which the
// wire path copies into its answers).
type shapeFields struct {
	fields  []field
	encoded []byte
}

// lastResponse is a response with what it was built from: the verdict's
// HeadersID names its headers. The protobuf API keeps the message
// (resp), the wire path only its encoded form (encoded): each memoizes
// what it answers with, nothing more, and a memo of the other path's is
// replaced.
type lastResponse struct {
	headersID uint64
	cacheHit  bool
	call      check.Call
	resp      *authv3.CheckResponse
	encoded   *encodedResponse
}

func (l *lastResponse) matches(v *check.Verdict, wire bool) bool {
	return v.HeadersID != 0 && l.headersID == v.HeadersID && l.cacheHit == v.CacheHit && sameCall(&l.call, &v.Call) &&
		(l.encoded != nil) == wire
}

// newLast is the record of v's response: what it was built from, without
// the call's id (which no answer shows).
func newLast(v *check.Verdict) *lastResponse {
	call := v.Call
	call.ID = nil
	return &lastResponse{headersID: v.HeadersID, cacheHit: v.CacheHit, call: call}
}

// sameCall compares what the metadata shows of a call (not its id).
func sameCall(a, b *check.Call) bool {
	return a.Protocol == b.Protocol && a.Method == b.Method && a.Name == b.Name &&
		a.MCPSession == b.MCPSession && a.ContextID == b.ContextID && a.TaskID == b.TaskID
}

// renderGrant makes a grant's rendering, once per grant in use.
func renderGrant(*check.Grant) *rendering { return new(rendering) }

// messageParts returns the grant's pieces as messages, built at the first
// call. The grant's own headers are always a verdict's first headers (see
// check.Grant.Headers).
func (r *rendering) messageParts(g *check.Grant) *messageParts {
	if p := r.parts.Load(); p != nil {
		return p
	}
	var buf [maxOwnEntries]entry
	es := ownEntries(buf[:0], g)
	vals := newValues(ownedValues(es))
	own := make([]field, len(es))
	for i := range es {
		own[i] = field{es[i].key, es[i].value(&vals)}
	}
	p := &messageParts{headers: headerOptions(g.Headers()), shape: check.RenderedShape(g, renderShape), own: own}
	if !r.parts.CompareAndSwap(nil, p) {
		return r.parts.Load()
	}
	return p
}

// renderShape renders what every grant of g's shape shows, reading only
// what they share (check.RenderedShape).
func renderShape(g *check.Grant) *shapeFields {
	fs := []field{{"route", sharedString(g.Route)}, {"outcome", allowedValue}}
	fs = shapeFieldsOf(fs, g, true)
	return &shapeFields{fields: fs, encoded: encodeFields(fs)}
}

// shapeFieldsOf appends who the grant is, as far as its shape says, to fs:
// what access logs show and what the response path (ext_proc,
// internal/extprocauthz) reads back as the request's identity when Envoy
// forwards this namespace to it. shared says the values are kept for
// every grant of the shape: strings then come from the shared table.
func shapeFieldsOf(fs []field, g *check.Grant, shared bool) []field {
	str := structpb.NewStringValue
	if shared {
		str = sharedString
	}
	fs = append(fs, field{"issuer", str(g.Issuer)})
	if g.ClientID != "" {
		fs = append(fs, field{"client_id", str(g.ClientID)})
	}
	if len(g.Scopes) > 0 {
		fs = append(fs, field{"scope", str(strings.Join(g.Scopes, " "))})
	}
	// What revocation judges the grant by: the API key it came from (and
	// when the token was issued, ownEntries).
	if g.APIKeyID != "" {
		fs = append(fs, field{"api_key_id", str(g.APIKeyID)})
	}
	if len(g.Claims) > 0 {
		// Only the claims the route's rules look at: the response path
		// applies the same rules to list entries.
		c := make(map[string]*structpb.Value, len(g.Claims))
		for _, rc := range g.Claims {
			if v, err := structpb.NewValue(rc.Value); err == nil {
				c[rc.Name] = v
			}
		}
		fs = append(fs, field{"claims", structpb.NewStructValue(&structpb.Struct{Fields: c})})
	}
	return fs
}

// entry is one metadata field a response adds to its grant's shape: a
// string, a number or a bool.
type entry struct {
	key  string
	str  string
	num  float64
	kind entryKind
	// shared marks a value many responses repeat (protocol, method, tool
	// name, small depths): the protobuf form takes a shared Value for it.
	shared bool
	n      int // the encoded size, once encodeGrantAllow has sized it
}

type entryKind uint8

const (
	entryString entryKind = iota
	entryNumber
	entryTrue
	entryFalse
)

// maxOwnEntries and maxEntries bound what ownEntries and
// ownEntries+requestEntries append, for arrays on the stack.
const (
	maxOwnEntries = 3
	maxEntries    = maxOwnEntries + 1 + 6 + 4
)

// ownEntries appends what is the grant's alone: the user, the session and
// when the token was issued (a subject revoked since refuses it).
func ownEntries(es []entry, g *check.Grant) []entry {
	es = append(es, entry{key: "user", str: g.Subject})
	if g.Session != "" {
		es = append(es, entry{key: "session", str: g.Session})
	}
	if iat := g.IssuedAt(); !iat.IsZero() {
		es = append(es, entry{key: "iat", num: float64(iat.Unix()), kind: entryNumber})
	}
	return es
}

// requestEntries appends what is the request's own: whether the verdict was
// cached, the call and its lineage.
func requestEntries(es []entry, v *check.Verdict) []entry {
	cached := entry{key: "cached", kind: entryFalse}
	if v.CacheHit {
		cached.kind = entryTrue
	}
	es = append(es, cached)
	if c := &v.Call; c.Protocol != jsonrpc.ProtocolUnknown {
		// What most calls repeat (protocol, method, tool) is shared.
		es = append(es, entry{key: "protocol", str: c.Protocol.String(), shared: true})
		es = appendEntry(es, "method", c.Method, true)
		es = appendEntry(es, "name", c.Name, true)
		es = appendEntry(es, "mcp_session", c.MCPSession, false)
		es = appendEntry(es, "a2a_context_id", c.ContextID, false)
		es = appendEntry(es, "a2a_task_id", c.TaskID, false)
	}
	if l := &v.Lineage; l.Root != "" {
		es = appendEntry(es, "root_context_id", l.Root, false)
		es = appendEntry(es, "parent_context_id", l.Parent, false)
		es = append(es, entry{key: "lineage_depth", num: float64(l.Depth), kind: entryNumber, shared: l.Depth < len(depths)})
		if len(l.ActorChain) > 0 {
			es = append(es, entry{key: "actor_chain", str: strings.Join(l.ActorChain, ",")})
		}
	}
	return es
}

// appendEntry appends the string entry key when it has a value.
func appendEntry(es []entry, key, val string, shared bool) []entry {
	if val == "" {
		return es
	}
	return append(es, entry{key: key, str: val, shared: shared})
}

// ownedValues is how many Values the protobuf form of es takes from its
// values (the others are shared).
func ownedValues(es []entry) int {
	n := 0
	for i := range es {
		if !es[i].shared && (es[i].kind == entryString || es[i].kind == entryNumber) {
			n++
		}
	}
	return n
}

// value is e's protobuf form, from vals unless shared.
func (e *entry) value(vals *values) *structpb.Value {
	switch e.kind {
	case entryTrue:
		return trueValue
	case entryFalse:
		return falseValue
	case entryNumber:
		if e.shared {
			return depths[int(e.num)]
		}
		return vals.num(e.num)
	}
	if e.shared {
		return sharedString(e.str)
	}
	return vals.str(e.str)
}

// Shared metadata values: read-only, safe to reference from many responses.
var (
	trueValue  = structpb.NewBoolValue(true)
	falseValue = structpb.NewBoolValue(false)
	depths     = func() (d [16]*structpb.Value) {
		for i := range d {
			d[i] = structpb.NewNumberValue(float64(i))
		}
		return d
	}()
)

// metadata is the dynamic metadata of a response built without a
// rendering: an allow of a grant shows its shape's fields as rendered once
// for all grants of the shape; only the grant's own and the request's are
// made here.
func metadata(v *check.Verdict) map[string]*structpb.Value {
	var buf [maxEntries + 2]entry
	g := v.Grant
	if g != nil && v.Outcome == check.Allowed && v.Route == g.Route {
		es := requestEntries(ownEntries(buf[:0], g), v)
		vals := newValues(ownedValues(es))
		return metadataFields(check.RenderedShape(g, renderShape).fields, nil, es, &vals)
	}
	es := append(buf[:0], entry{key: "route", str: v.Route}, entry{key: "outcome", str: v.Outcome.String()})
	var shape []field
	if g != nil {
		shape = shapeFieldsOf(nil, g, false)
		es = ownEntries(es, g)
	}
	es = requestEntries(es, v)
	vals := newValues(ownedValues(es))
	return metadataFields(shape, nil, es, &vals)
}

// metadataFields is the metadata map of the shape's and the grant's own
// fields and the entries, whose Values come from vals (sized with
// ownedValues).
func metadataFields(shape, own []field, es []entry, vals *values) map[string]*structpb.Value {
	// Sized exactly: up to 8 entries fit one map group, which keeps the
	// common allowed response at a couple of allocations.
	f := make(map[string]*structpb.Value, len(shape)+len(own)+len(es))
	for _, kv := range shape {
		f[kv.key] = kv.val
	}
	for _, kv := range own {
		f[kv.key] = kv.val
	}
	for i := range es {
		f[es[i].key] = es[i].value(vals)
	}
	return f
}

// value is a metadata Value with room for its kind: a response's values
// come from one array of them (values) instead of two allocations each.
type value struct {
	v   structpb.Value
	str structpb.Value_StringValue
	num structpb.Value_NumberValue
}

// values hands out the Values of one response from an array sized for it
// exactly (a memoized response keeps it as long as the memo lives). Past
// its end, should a count be off, values are allocated one by one.
type values struct{ a []value }

func newValues(n int) values {
	if n == 0 {
		return values{}
	}
	return values{a: make([]value, n)}
}

func (vs *values) next() *value {
	if len(vs.a) == 0 {
		return new(value)
	}
	e := &vs.a[0]
	vs.a = vs.a[1:]
	return e
}

func (vs *values) str(s string) *structpb.Value {
	e := vs.next()
	e.str.StringValue = s
	e.v.Kind = &e.str
	return &e.v
}

func (vs *values) num(f float64) *structpb.Value {
	e := vs.next()
	e.num.NumberValue = f
	e.v.Kind = &e.num
	return &e.v
}

// allowedValue is the outcome every grant's rendering shows.
var allowedValue = structpb.NewStringValue(check.Allowed.String())

// maxSharedValues bounds the table of shared string values: the strings
// come from configuration (routes, issuers) and from tokens and calls
// (scopes, clients, tool names); past the bound values are made per use.
const maxSharedValues = 4096

var sharedValues struct {
	sync.RWMutex
	m map[string]*structpb.Value
}

// sharedString is a read-only string Value shared by every response that
// shows s: protobuf messages may be marshaled concurrently as long as
// nobody writes to them.
func sharedString(s string) *structpb.Value {
	sharedValues.RLock()
	v := sharedValues.m[s]
	sharedValues.RUnlock()
	if v != nil {
		return v
	}
	v = structpb.NewStringValue(strings.Clone(s))
	sharedValues.Lock()
	defer sharedValues.Unlock()
	if got := sharedValues.m[s]; got != nil {
		return got
	}
	if sharedValues.m == nil || len(sharedValues.m) >= maxSharedValues {
		// Start over rather than stop sharing: responses holding the old
		// values keep them.
		sharedValues.m = make(map[string]*structpb.Value)
	}
	sharedValues.m[v.GetStringValue()] = v
	return v
}
