// Package envoyauthz is the gRPC front end: it serves Envoy's
// envoy.service.auth.v3.Authorization API by turning a CheckRequest into a
// check.Request, running the pipeline, and turning the check.Verdict into the
// CheckResponse Envoy applies. It is the only package that knows Envoy's
// types. Every decision is answered as (CheckResponse, nil): a gRPC error
// would let Envoy's failure_mode_allow fail open.
package envoyauthz

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Server implements authv3.AuthorizationServer.
type Server struct {
	authv3.UnimplementedAuthorizationServer
	// pipeline is concrete, not an interface, so that the request built on
	// the stack for it stays there.
	pipeline *check.Pipeline

	// wireInfo and wireNext are what handleWire hands the server's
	// interceptors, built once so that intercepting costs no allocation.
	wireInfo grpc.UnaryServerInfo
	wireNext grpc.UnaryHandler
}

var _ authv3.AuthorizationServer = (*Server)(nil)

// NewServer returns a Server deciding with p. Load shedding and tracing are
// the pipeline's (check.Pipeline.Check), as for every front end.
func NewServer(p *check.Pipeline) *Server {
	s := &Server{pipeline: p}
	s.wireInfo = grpc.UnaryServerInfo{Server: s, FullMethod: authv3.Authorization_Check_FullMethodName}
	s.wireNext = func(ctx context.Context, req any) (any, error) {
		return s.checkWire(ctx, req.(*wireRequest)), nil
	}
	return s
}

// Check answers one Envoy ext_authz call.
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	in := Input(req)
	v := s.pipeline.Check(ctx, &in)
	return Response(&v), nil
}

// Input extracts the plain request from Envoy's decoded CheckRequest. It
// accepts the merged headers map and, with encode_raw_headers, the raw
// header list. It fills the same fields the wire decoder does and finishes
// them the same way (wireRequest.request), so both paths agree.
func Input(req *authv3.CheckRequest) check.Request {
	attrs := req.GetAttributes()
	h := attrs.GetRequest().GetHttp()
	w := wireRequest{
		method: h.GetMethod(), scheme: h.GetScheme(), host: h.GetHost(), path: h.GetPath(),
		body: h.GetBody(), raw: h.GetRawBody(),
		in: check.Request{
			Protocol:          h.GetProtocol(),
			Headers:           h.GetHeaders(),
			ContextExtensions: attrs.GetContextExtensions(),
			SourcePrincipal:   attrs.GetSource().GetPrincipal(),
			SourceAddress:     attrs.GetSource().GetAddress().GetSocketAddress().GetAddress(),
		},
	}
	if len(w.in.Headers) == 0 {
		w.in.Headers = check.Headers{} // never written into the message's own map
		for _, hv := range h.GetHeaderMap().GetHeaders() {
			v := string(hv.GetRawValue())
			if v == "" {
				v = hv.GetValue()
			}
			w.rawHdr = append(w.rawHdr, rawHeader{key: hv.GetKey(), value: v})
		}
	}
	return *w.request()
}

// orHeader is v, or when Envoy left the attribute empty (older versions,
// raw header maps) the pseudo-header.
func orHeader(v string, headers check.Headers, name string) string {
	if v != "" {
		return v
	}
	return headers[name]
}

// Shared immutable pieces of every response: protobuf messages are safe to
// marshal concurrently as long as nobody writes to them.
var (
	okStatus    = &rpcstatus.Status{Code: int32(codes.OK)}
	appendFalse = wrapperspb.Bool(false)
)

// grpcCode is the gRPC status code of a denial with the given HTTP status.
// Envoy only looks at OK versus not OK; the code is for logs and traces.
func grpcCode(status int) codes.Code {
	switch status {
	case 400:
		return codes.InvalidArgument
	case 401:
		return codes.Unauthenticated
	case 503:
		return codes.Unavailable
	default:
		return codes.PermissionDenied
	}
}

// rendering is the Envoy form of a grant's response pieces, built once per
// grant in use so that a cache hit rebuilds only what varies per request.
// What grants of one shape share (route, issuer, scopes, rule claims) is
// rendered once for all of them (shapeFields).
type rendering struct {
	headers []*corev3.HeaderValueOption
	// fields are the grant's metadata values: its shape's, then its own.
	shape *shapeFields
	own   []field
	// last is the grant's last response: repeated requests of one
	// conversation get the same answer, shared (read-only) between them.
	last atomic.Pointer[lastResponse]
}

// field is one metadata entry.
type field struct {
	key string
	val *structpb.Value
}

// shapeFields are the metadata entries every grant of one shape shows.
type shapeFields struct{ fields []field }

// lastResponse is a response with what it was built from: the verdict's
// HeadersID names its headers. The protobuf API keeps the message
// (resp), the wire path only its encoded form (encoded): each memoizes
// what it answers with, nothing more.
type lastResponse struct {
	headersID uint64
	cacheHit  bool
	call      check.Call
	resp      *authv3.CheckResponse
	encoded   *encodedResponse
}

func (l *lastResponse) matches(v *check.Verdict) bool {
	return v.HeadersID != 0 && l.headersID == v.HeadersID && l.cacheHit == v.CacheHit && sameCall(&l.call, &v.Call)
}

// sameCall compares what the metadata shows of a call (not its id).
func sameCall(a, b *check.Call) bool {
	return a.Protocol == b.Protocol && a.Method == b.Method && a.Name == b.Name &&
		a.MCPSession == b.MCPSession && a.ContextID == b.ContextID && a.TaskID == b.TaskID
}

// renderGrant builds a grant's rendering once. The grant's own headers are
// always a verdict's first headers (see check.Grant.Headers).
func renderGrant(g *check.Grant) *rendering {
	n := ownValues(g)
	vals := newValues(n)
	return &rendering{headers: headerOptions(g.Headers()), shape: check.RenderedShape(g, renderShape), own: ownFields(make([]field, 0, n), g, &vals)}
}

// renderShape renders what every grant of g's shape shows, reading only
// what they share (check.RenderedShape).
func renderShape(g *check.Grant) *shapeFields {
	fs := []field{{"route", sharedString(g.Route)}, {"outcome", allowedValue}}
	return &shapeFields{fields: shapeFieldsOf(fs, g, true)}
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
	// when the token was issued, ownFields).
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

// ownFields appends what is the grant's alone: the user, the session and
// when the token was issued (a subject revoked since refuses it). Its
// values come from vals.
func ownFields(fs []field, g *check.Grant, vals *values) []field {
	fs = append(fs, field{"user", vals.str(g.Subject)})
	if g.Session != "" {
		fs = append(fs, field{"session", vals.str(g.Session)})
	}
	if iat := g.IssuedAt(); !iat.IsZero() {
		fs = append(fs, field{"iat", vals.num(float64(iat.Unix()))})
	}
	return fs
}

// ownValues is how many values ownFields takes from its values.
func ownValues(g *check.Grant) int {
	n := 1 + nonEmpty(g.Session)
	if !g.IssuedAt().IsZero() {
		n++
	}
	return n
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

// withExtra returns the grant's rendered headers followed by the verdict's
// per-request ones (set beyond the grant's), sharing the rendered prefix.
func withExtra(rendered []*corev3.HeaderValueOption, set []check.Header) []*corev3.HeaderValueOption {
	if len(set) == len(rendered) {
		return rendered
	}
	out := make([]*corev3.HeaderValueOption, 0, len(set))
	out = append(out, rendered...)
	return append(out, headerOptions(set[len(rendered):])...)
}

// Response builds the CheckResponse for a verdict.
func Response(v *check.Verdict) *authv3.CheckResponse {
	resp, _ := respond(v, false)
	return resp
}

// respond builds the CheckResponse for a verdict and, for an allowed one,
// the grant's last-response record it is shared through: with the message
// for the protobuf API, with its encoded form alone for the wire path
// (wire).
func respond(v *check.Verdict, wire bool) (*authv3.CheckResponse, *lastResponse) {
	// Memoize from a grant's second use on: a token seen once (a fresh token
	// per request) then costs no memo at all.
	if v.Outcome == check.Allowed && v.Grant != nil && v.CacheHit {
		r := check.Rendered(v.Grant, renderGrant)
		if l := r.last.Load(); l != nil && l.matches(v) && (l.encoded != nil) == wire {
			return l.resp, l
		}
		vals := newValues(requestValues(v))
		resp, md := okResponse(withExtra(r.headers, v.Set), v.Remove)
		md.Fields = metadataFields(r.shape.fields, r.own, v, &vals)
		call := v.Call
		call.ID = nil
		l := &lastResponse{headersID: v.HeadersID, cacheHit: v.CacheHit, call: call}
		if wire {
			b, err := proto.Marshal(resp)
			if err != nil {
				return resp, nil
			}
			l.encoded = &encodedResponse{b: b}
		} else {
			l.resp = resp
		}
		r.last.Store(l)
		return resp, l
	}
	if v.Outcome.Allow() {
		resp, md := okResponse(headerOptions(v.Set), v.Remove)
		md.Fields = metadata(v)
		return resp, nil
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(grpcCode(v.Status())), Message: v.Outcome.String()},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(v.Status())},
			Headers: headerOptions(v.ResponseHeaders),
			Body:    string(v.Body),
		}},
		DynamicMetadata: &structpb.Struct{Fields: metadata(v)},
	}, nil
}

// okResponse is an allow: headers to set upstream, owned headers to strip,
// and its dynamic metadata, whose fields the caller fills in.
func okResponse(set []*corev3.HeaderValueOption, remove []string) (*authv3.CheckResponse, *structpb.Struct) {
	// The four messages of an allow share one allocation.
	a := new(struct {
		resp authv3.CheckResponse
		ok   authv3.CheckResponse_OkResponse
		http authv3.OkHttpResponse
		md   structpb.Struct
	})
	a.http.Headers, a.http.HeadersToRemove = set, remove
	a.ok.OkResponse = &a.http
	a.resp.Status, a.resp.HttpResponse, a.resp.DynamicMetadata = okStatus, &a.ok, &a.md
	return &a.resp, &a.md
}

// headerOptions renders headers with append explicitly false: overwrite, on
// every Envoy version (older versions treated an unset append as
// append-if-exists).
func headerOptions(hs []check.Header) []*corev3.HeaderValueOption {
	if len(hs) == 0 {
		return nil
	}
	opts := make([]*corev3.HeaderValueOption, len(hs))
	// Each option and its header value side by side: one array for both.
	backing := make([]struct {
		opt corev3.HeaderValueOption
		val corev3.HeaderValue
	}, len(hs))
	for i, h := range hs {
		b := &backing[i]
		b.val.Key, b.val.Value = h.Name, h.Value
		//lint:ignore SA1019 append false is what every Envoy release reads (append_action is not honoured by all of them)
		b.opt.Header, b.opt.Append = &b.val, appendFalse
		opts[i] = &b.opt
	}
	return opts
}

// Shared metadata values: read-only, safe to reference from many responses.
var (
	cachedTrue  = structpb.NewBoolValue(true)
	cachedFalse = structpb.NewBoolValue(false)
	depths      = func() (d [16]*structpb.Value) {
		for i := range d {
			d[i] = structpb.NewNumberValue(float64(i))
		}
		return d
	}()
)

// metadata is the dynamic metadata for access logs and later filters, the
// fields of the response's Struct. An
// allow of a grant shows its shape's fields as rendered once for all grants
// of the shape; only the grant's own and the request's are made here.
func metadata(v *check.Verdict) map[string]*structpb.Value {
	var buf [12]field
	g := v.Grant
	if g != nil && v.Outcome == check.Allowed && v.Route == g.Route {
		vals := newValues(ownValues(g) + requestValues(v))
		own := ownFields(buf[:0], g, &vals)
		return metadataFields(check.RenderedShape(g, renderShape).fields, own, v, &vals)
	}
	n := 2 + requestValues(v)
	if g != nil {
		n += ownValues(g)
	}
	vals := newValues(n)
	fs := append(buf[:0], field{"route", vals.str(v.Route)}, field{"outcome", vals.str(v.Outcome.String())})
	if g != nil {
		fs = ownFields(shapeFieldsOf(fs, g, false), g, &vals)
	}
	return metadataFields(fs, nil, v, &vals)
}

// requestValues is how many values metadataFields takes from its values for
// what is the request's own.
func requestValues(v *check.Verdict) int {
	n := 0
	if c := &v.Call; c.Protocol != jsonrpc.ProtocolUnknown {
		n += nonEmpty(c.MCPSession, c.ContextID, c.TaskID)
	}
	if l := &v.Lineage; l.Root != "" {
		n += 1 + nonEmpty(l.Parent) + min(len(l.ActorChain), 1)
		if l.Depth >= len(depths) {
			n++
		}
	}
	return n
}

// metadataFields is the grant's fields (shape's and own) with the per-request
// ones, whose values come from vals (sized with requestValues).
func metadataFields(shape, own []field, v *check.Verdict, vals *values) map[string]*structpb.Value {
	// Size the map exactly: up to 8 entries fit one map group, which keeps the
	// common allowed response at a couple of allocations.
	n := len(shape) + len(own) + 1
	if c := &v.Call; c.Protocol != jsonrpc.ProtocolUnknown {
		n += 1 + nonEmpty(c.Method, c.Name, c.MCPSession, c.ContextID, c.TaskID)
	}
	if l := &v.Lineage; l.Root != "" {
		n += 2 + nonEmpty(l.Parent) + min(len(l.ActorChain), 1)
	}
	f := make(map[string]*structpb.Value, n)
	for _, kv := range shape {
		f[kv.key] = kv.val
	}
	for _, kv := range own {
		f[kv.key] = kv.val
	}
	f["cached"] = cachedFalse
	if v.CacheHit {
		f["cached"] = cachedTrue
	}
	if c := &v.Call; c.Protocol != jsonrpc.ProtocolUnknown {
		// What most calls repeat (protocol, method, tool) is shared.
		f["protocol"] = sharedString(c.Protocol.String())
		if c.Method != "" {
			f["method"] = sharedString(c.Method)
		}
		if c.Name != "" {
			f["name"] = sharedString(c.Name)
		}
		putString(f, vals, "mcp_session", c.MCPSession)
		putString(f, vals, "a2a_context_id", c.ContextID)
		putString(f, vals, "a2a_task_id", c.TaskID)
	}
	if l := &v.Lineage; l.Root != "" {
		putString(f, vals, "root_context_id", l.Root)
		putString(f, vals, "parent_context_id", l.Parent)
		if l.Depth < len(depths) {
			f["lineage_depth"] = depths[l.Depth]
		} else {
			f["lineage_depth"] = vals.num(float64(l.Depth))
		}
		if len(l.ActorChain) > 0 {
			putString(f, vals, "actor_chain", strings.Join(l.ActorChain, ","))
		}
	}
	return f
}

// putString sets key to val, when there is one, with a value from vals.
func putString(f map[string]*structpb.Value, vals *values, key, val string) {
	if val != "" {
		f[key] = vals.str(val)
	}
}

func nonEmpty(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}
