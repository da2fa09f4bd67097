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

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/extauthz/extauthz/internal/check"
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
		body: h.GetBody(), raw: h.GetRawBody(), cert: attrs.GetSource().GetCertificate(),
		in: check.Request{
			Protocol:          h.GetProtocol(),
			Headers:           h.GetHeaders(),
			ContextExtensions: attrs.GetContextExtensions(),
			SourcePrincipal:   attrs.GetSource().GetPrincipal(),
			SourceAddress:     attrs.GetSource().GetAddress().GetSocketAddress().GetAddress(),
		},
	}
	for k := range w.in.Headers {
		// As the wire decoder notes it, entry by entry.
		w.in.UnderscoreNames = w.in.UnderscoreNames || strings.IndexByte(k, '_') >= 0
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
	// Memoize from a grant's second use on: a token seen once (a fresh token
	// per request) then costs no memo at all.
	if v.Outcome == check.Allowed && v.Grant != nil && v.Route == v.Grant.Route && v.CacheHit {
		r := check.Rendered(v, renderGrant)
		if l := r.last.Load(); l != nil && l.matches(v, false) {
			return l.resp
		}
		p := r.messageParts(v.Grant)
		var buf [maxEntries]entry
		es := requestEntries(buf[:0], v)
		vals := newValues(ownedValues(es))
		resp, md := okResponse(withExtra(p.headers, v.Set), v.Remove)
		md.Fields = metadataFields(p.shape.fields, p.own, es, &vals)
		l := newLast(v)
		l.resp = resp
		r.last.Store(l)
		return resp
	}
	return respond(v)
}

// respond builds the CheckResponse for a verdict, memoized or not.
func respond(v *check.Verdict) *authv3.CheckResponse {
	if v.Outcome.Allow() {
		resp, md := okResponse(headerOptions(v.Set), v.Remove)
		md.Fields = metadata(v)
		return resp
	}
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(grpcCode(v.Status())), Message: v.Outcome.String()},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(v.Status())},
			Headers: headerOptions(v.ResponseHeaders),
			Body:    string(v.Body),
		}},
		DynamicMetadata: &structpb.Struct{Fields: metadata(v)},
	}
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
