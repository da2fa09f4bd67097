// Package extprocauthz is the response path's front end: it serves Envoy's
// envoy.service.ext_proc.v3.ExternalProcessor/Process API, one stream per
// HTTP request, and applies what the check pipeline decides about the
// upstream's answer (docs/extproc.md): list results filtered to what the
// caller may use, an upstream 401/403 turned into the in-session
// re-authorization answer, sessions bound when the initialize answer
// creates them, tasks bound when an answer creates them.
//
// Like internal/envoyauthz it only converts: Envoy's messages to a
// check.Request and an identity (decode), the pipeline's decision
// (check.Pipeline.ForResponse and the Exchange it returns), and the result
// back to Envoy's replies (encode). It is served on the ext_authz gRPC
// listener, next to the Authorization service.
//
// The stream loop is strict: every message that expects a reply gets
// exactly one, of its own kind, in order (Envoy treats anything else as a
// spurious message and fails the request). Everything that cannot be
// processed exactly fails closed: a list that cannot be filtered is
// replaced by a JSON-RPC error, never passed on.
package extprocauthz

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/mcpresponse"
)

// MetadataNamespace is the ext_authz filter's dynamic metadata namespace,
// which the ext_proc filter must forward (metadata_options
// forwarding_namespaces untyped) for the caller's identity to reach us.
const MetadataNamespace = "envoy.filters.http.ext_authz"

// maxRequestBody bounds the request body kept to read the JSON-RPC call:
// the pipeline reads no more (jsonrpc.MaxBodySize).
const maxRequestBody = jsonrpc.MaxBodySize

// What a stream did with a response, as counted (Observer).
const (
	ActionFiltered        = "filtered"         // a list result was filtered
	ActionFilterFailure   = "filter_failure"   // a list could not be filtered: replaced by an error
	ActionReauthorized    = "reauthorized"     // an upstream 401/403 became the re-authorization answer
	ActionSessionBound    = "session_bound"    // an initialize answer's session was bound
	ActionSessionRefused  = "session_refused"  // an initialize answer's session could not be bound
	ActionTaskBound       = "task_bound"       // an answer's new task was bound
	ActionContextBound    = "context_bound"    // an A2A context an answer assigned was bound
	ActionNotAllowed      = "not_allowed"      // the request was not allowed: processed as nobody's
	ActionOverloaded      = "overloaded"       // refused by load shedding
	ActionProtocolFailure = "protocol_failure" // a message out of order: the stream ends
	ActionStreamOpened    = "stream_opened"    // a session's event stream may carry injected notifications
	ActionInjected        = "injected"         // notifications/elicitation/complete was injected
	ActionRequestDropped  = "request_dropped"  // a server's request the caller's rules refuse was kept from the client
)

// Observer counts what the streams did (metrics). It must be cheap and
// safe for concurrent use.
type Observer interface {
	ResponseProcessed(route, action string)
}

// Options configure a Server.
type Options struct {
	Logger   *slog.Logger
	Observer Observer
	// MaxEvent bounds an incomplete server-sent event held while filtering
	// (mcpresponse.DefaultMaxEvent when zero).
	MaxEvent int
}

// Server implements extprocv3.ExternalProcessorServer.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	pipeline *check.Pipeline
	log      *slog.Logger
	observer Observer
	maxEvent int
	streams  registry // open event streams notifications may be injected into
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// NewServer returns a Server processing with p.
func NewServer(p *check.Pipeline, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{pipeline: p, log: o.Logger, observer: o.Observer, maxEvent: o.MaxEvent}
}

// Register serves s on gs (the ext_authz listener's server).
func Register(gs *grpc.Server, s *Server) {
	extprocv3.RegisterExternalProcessorServer(gs, s)
}

// errOutOfOrder ends a stream whose messages do not follow the protocol.
var errOutOfOrder = errors.New("extprocauthz: message out of order")

// Process serves one HTTP request's stream: Recv, then exactly one Send per
// message that expects a reply, until Envoy closes the stream. The loop
// ends when the stream does (Envoy closes it at the end of the request or
// when it is destroyed; gRPC keepalive and Envoy's timeouts bound it).
//
// Once the response is an event stream notifications may be injected into
// (streams.go), messages are received by a goroutine of the stream, so
// that the loop can also send an injection when one arrives; every Send
// stays on this goroutine.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	ctx := stream.Context()
	st := &exchange{s: s, ctx: ctx, req: check.Request{Headers: check.Headers{}}}
	defer st.closeStream()
	var received chan recvResult
	for {
		var in *extprocv3.ProcessingRequest
		var err error
		switch {
		case st.inject == nil:
			in, err = stream.Recv()
		default:
			if received == nil {
				received = make(chan recvResult)
				go receive(ctx, stream, received)
			}
			select {
			case r := <-received:
				in, err = r.msg, r.err
			case ev := <-st.inject:
				if out := st.injectNow(ev); out != nil {
					if err := stream.Send(responseBodyReply(&extprocv3.CommonResponse{BodyMutation: streamed(out, false)})); err != nil {
						return err
					}
					s.count(st.route(), ActionInjected)
				}
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		out, err := st.handle(in)
		if err != nil {
			s.count(st.route(), ActionProtocolFailure)
			return err
		}
		if out == nil {
			continue // a flow-control message: nothing to answer
		}
		if err := stream.Send(out); err != nil {
			return err
		}
	}
}

type recvResult struct {
	msg *extprocv3.ProcessingRequest
	err error
}

// receive hands the stream's messages to the loop until the stream ends.
func receive(ctx context.Context, stream extprocv3.ExternalProcessor_ProcessServer, out chan<- recvResult) {
	for {
		m, err := stream.Recv()
		select {
		case out <- recvResult{m, err}:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) count(route, action string) {
	if s.observer != nil {
		s.observer.ResponseProcessed(route, action)
	}
}

// act counts what the stream did with the answer and records it in the
// audit log (check.Pipeline.AuditResponse), for the exchange's route, or
// for nobody's when the request was not allowed.
func (st *exchange) act(a check.ResponseAction) {
	st.s.count(st.route(), a.Outcome)
	st.s.pipeline.AuditResponse(st.ctx, &st.req, st.x, a)
}

// Fixed reasons of replaced answers, as the audit log records them.
const (
	reasonUnreadCall      = "the call was not read from a complete request body: a list cannot be ruled out"
	reasonCompressed      = "the list answer is compressed"
	reasonCharset         = "the list answer names a charset other than UTF-8"
	reasonMediaType       = "the list answer is neither JSON nor an event stream"
	reasonNotStream       = "the answer to a stream request is not an event stream"
	reasonPartialMode     = "the filter is configured to see only part of the answer (BUFFERED_PARTIAL)"
	reasonUnparsable      = "the list answer could not be filtered"
	reasonUnreadableEvent = "an event of the answer could not be read for the server's requests the rules refuse"
	reasonUnreadableJSON  = "the answer could not be read for the server's requests the rules refuse"
	reasonRefusedRequest  = "the answer carries a server's request the rules refuse"
	reasonMislabelled     = "the answer's content type names JSON or an event stream without being one"
	reasonNotAllowed      = "the request was not allowed: a list answer is not passed for nobody"
	reasonUnbound         = "the session the upstream created could not be bound to the caller"
	reasonUpstream401     = "the upstream refused the exchanged token: re-authorization answered"
)

// namesMessages reports whether a content type mentions JSON or an event
// stream, in any case, anywhere.
func namesMessages(contentType string) bool {
	ct := strings.ToLower(contentType)
	return strings.Contains(ct, "application/json") || strings.Contains(ct, "text/event-stream")
}

// streamRequest reports whether a GET is an MCP client's stream request:
// it names its session or asks for an event stream.
func streamRequest(h check.Headers) bool {
	return h["mcp-session-id"] != "" || h.Mentions("accept", "text/event-stream")
}

func failure(reason string) check.ResponseAction {
	return check.ResponseAction{Outcome: ActionFilterFailure, Status: 200, Reason: reason}
}

// Response handlings, decided at the response headers.
type handling uint8

const (
	passThrough  handling = iota
	filterJSON            // a JSON list result, filtered whole
	filterSSE             // a list result in an event stream, event by event
	readTask              // a JSON answer that may create a task or assign a context
	readTaskSSE           // an event stream whose response may create one
	readAnswer            // a JSON answer read for the server's requests the rules refuse and the lists it carries
	refuseLists           // the JSON answer to a request not allowed, refused if it carries a list
	dropBody              // the answer was replaced: nothing of it leaves
	injectStream          // a session's event stream, re-emitted event by event (streams.go)
)

// exchange is one stream's state: the request as the pipeline sees it and
// what is being done to the response.
type exchange struct {
	s   *Server
	ctx context.Context
	// modes are the filter's configured body modes (protocol_config).
	reqMode, respMode filterv3.ProcessingMode_BodySendMode

	req        check.Request
	sawHeaders bool
	id         *check.Identity
	bodyFull   bool // the request body went over maxRequestBody
	decided    bool
	x          *check.Exchange
	xerr       error

	handling handling
	// duplex: the response body is configured FULL_DUPLEX_STREAMED, every
	// chunk is answered with streamed_response (and mode_override is
	// dead). whole: the body comes in one message (BUFFERED).
	duplex, whole bool
	// held is a JSON body gathered over several messages (STREAMED,
	// BUFFERED_PARTIAL or duplex configured), filtered at its end.
	held     []byte
	tooLarge bool
	// sse filters an event stream: a list's by the call's method, or by
	// each event's shape on a GET stream (also when injectable), and the
	// server's requests refused (bit i: jsonrpc.ServerRequests[i]) on any.
	sse     *mcpresponse.SSEListFilter
	refused uint8
	// reported is how many of sse's removed entries were recorded,
	// reportedDrops how many of the server's requests it dropped.
	reported, reportedDrops int
	// taskEvents reassembles an event stream read for the task its
	// response creates (readTaskSSE), responses finds its answer.
	taskEvents *mcpresponse.Reassembler
	responses  *responseReader
	// unallowedID is the call id of a request not allowed whose answer
	// is read for lists (unallowedHeaders).
	unallowedID []byte

	// An injectable event stream (streams.go).
	streamKey   streamKey
	inject      chan []byte
	reasm       *mcpresponse.Reassembler
	unsent      []byte
	queued      [][]byte
	firstChunk  bool
	closed, raw bool
	// failedSSE: an event stream could not be filtered; its error was sent
	// and nothing more of it leaves.
	failedSSE bool
	phase     int // 0 request, 1 response headers seen
}

// callID is the JSON-RPC id of the call answered (nil when none is known).
func (st *exchange) callID() []byte {
	if st.x != nil {
		return st.x.Call.ID
	}
	return st.unallowedID
}

func (st *exchange) route() string {
	if st.x != nil {
		return st.x.Route()
	}
	return ""
}

// handle answers one message.
func (st *exchange) handle(in *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if pc := in.GetProtocolConfig(); pc != nil {
		st.reqMode, st.respMode = pc.GetRequestBodyMode(), pc.GetResponseBodyMode()
	}
	if st.id == nil {
		st.id = identity(in.GetMetadataContext())
	}
	switch m := in.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		if st.phase != 0 || st.sawHeaders {
			return nil, errOutOfOrder // the request's headers come once
		}
		st.sawHeaders = true
		st.requestHeaders(m.RequestHeaders.GetHeaders())
		st.source(in.GetAttributes())
		if m.RequestHeaders.GetEndOfStream() {
			st.decide()
		}
		return requestHeadersReply(), nil
	case *extprocv3.ProcessingRequest_RequestBody:
		if st.phase != 0 {
			return nil, errOutOfOrder
		}
		return st.requestBody(m.RequestBody), nil
	case *extprocv3.ProcessingRequest_RequestTrailers:
		st.decide()
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}, nil
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		if st.phase != 0 {
			return nil, errOutOfOrder
		}
		st.phase = 1
		st.decide()
		return st.responseHeaders(m.ResponseHeaders), nil
	case *extprocv3.ProcessingRequest_ResponseBody:
		if st.phase != 1 {
			return nil, errOutOfOrder
		}
		return st.responseBody(m.ResponseBody), nil
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}, nil
	}
	return nil, nil
}

// requestHeaders fills the request as Envoy's ext_authz front end does
// (check.Request.AddHeader: lower-case names, repeated headers joined and
// noted), with
// the pseudo-headers as attributes. The values point into the message,
// which gRPC decoded into memory of its own and nothing modifies.
func (st *exchange) requestHeaders(hm *corev3.HeaderMap) {
	h := st.req.Headers
	if len(h) == 0 {
		h = make(check.Headers, len(hm.GetHeaders()))
		st.req.Headers = h
	}
	for _, hv := range hm.GetHeaders() {
		v := hv.GetValue()
		if raw := hv.GetRawValue(); len(raw) > 0 {
			v = unsafe.String(unsafe.SliceData(raw), len(raw))
		}
		st.req.AddHeader(hv.GetKey(), v)
	}
	st.req.Method, st.req.Scheme, st.req.Host, st.req.Path = h[":method"], h[":scheme"], h[":authority"], h[":path"]
	if st.req.Scheme == "" {
		st.req.Scheme = h["x-forwarded-proto"]
	}
	st.req.RequestID = h["x-request-id"]
}

// AttributesNamespace is the key of the ext_proc filter's own attributes
// (its request_attributes) in a ProcessingRequest.
const AttributesNamespace = "envoy.filters.http.ext_proc"

// attrPeerCertDigest is the request attribute with the client
// certificate's SHA-256 (hex), for certificate-bound tokens.
const attrPeerCertDigest = "connection.sha256_peer_certificate_digest"

// source reads the downstream peer as ext_authz's Source names it, from
// the attributes the filter was configured to send with the request
// headers (docs/extproc.md): the address without its port, the principal
// as Envoy's ext_authz picks it from the peer certificate (URI SAN, else
// DNS SAN, else subject), and the certificate for certificate-bound
// tokens.
func (st *exchange) source(attrs map[string]*structpb.Struct) {
	f := attrs[AttributesNamespace].GetFields()
	if len(f) == 0 {
		return
	}
	// ext_proc has no source.certificate as ext_authz has: the attribute
	// connection.sha256_peer_certificate_digest gives the certificate's
	// SHA-256 in hex (the digest XFCC's Hash carries), read the same way.
	// A request header is never read for it: ext_proc is handed the
	// client's own x-forwarded-client-cert.
	st.req.ClientCert, st.req.ClientCertForm = f[attrPeerCertDigest].GetStringValue(), check.CertHex
	if a := f["source.address"].GetStringValue(); a != "" {
		if ap, err := netip.ParseAddrPort(a); err == nil {
			st.req.SourceAddress = ap.Addr().String()
		} else if ip, err := netip.ParseAddr(a); err == nil {
			st.req.SourceAddress = ip.String()
		}
	}
	for _, k := range []string{"connection.uri_san_peer_certificate", "connection.dns_san_peer_certificate", "connection.subject_peer_certificate"} {
		if p := f[k].GetStringValue(); p != "" {
			st.req.SourcePrincipal = p
			break
		}
	}
}

func (st *exchange) requestBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if !st.bodyFull {
		switch {
		case len(st.req.Body)+len(b.GetBody()) > maxRequestBody:
			st.bodyFull, st.req.Body = true, nil
		case st.req.Body == nil && b.GetEndOfStream():
			// The whole body in one message (BUFFERED): read in place,
			// the message is not modified.
			st.req.Body = b.GetBody()
		default:
			st.req.Body = append(st.req.Body, b.GetBody()...)
		}
	}
	if b.GetEndOfStream() {
		st.decide()
	}
	if st.reqMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{
			Response: &extprocv3.CommonResponse{BodyMutation: streamed(b.GetBody(), b.GetEndOfStream())}}}}
	}
	return continueRequestBody
}

// decide asks the pipeline once, when the whole request is known.
func (st *exchange) decide() {
	if st.decided {
		return
	}
	st.decided = true
	st.req.BodyPartial = st.bodyFull
	st.x, st.xerr = st.s.pipeline.ForResponse(st.ctx, &st.req, st.id)
	switch {
	case errors.Is(st.xerr, check.ErrOverloaded):
		st.s.count("", ActionOverloaded)
	case errors.Is(st.xerr, check.ErrNotAllowed):
		st.s.count("", ActionNotAllowed)
	}
}

// The replies that change nothing are shared: protobuf messages are safe
// to marshal concurrently as long as nobody writes to them, and nothing
// writes to a reply once made.
var (
	continueRequestHeaders = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}}
	continueRequestBody    = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}
	continueResponseHeader = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}}
	continueResponseBody   = &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}}
	bufferedOverride       = &filterv3.ProcessingMode{ResponseBodyMode: filterv3.ProcessingMode_BUFFERED}
	streamedOverride       = &filterv3.ProcessingMode{ResponseBodyMode: filterv3.ProcessingMode_STREAMED}
)

func requestHeadersReply() *extprocv3.ProcessingResponse { return continueRequestHeaders }

func responseHeadersReply(c *extprocv3.CommonResponse, override *filterv3.ProcessingMode) *extprocv3.ProcessingResponse {
	if c == nil && override == nil {
		return continueResponseHeader
	}
	// One allocation for the reply's three messages.
	r := &struct {
		pr extprocv3.ProcessingResponse
		rh extprocv3.ProcessingResponse_ResponseHeaders
		hr extprocv3.HeadersResponse
	}{}
	r.hr.Response = c
	r.rh.ResponseHeaders = &r.hr
	r.pr.Response, r.pr.ModeOverride = &r.rh, override
	return &r.pr
}

// responseHeaders decides what happens to the answer.
func (st *exchange) responseHeaders(m *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	var status int
	var contentType, sid, www, encoding string
	for _, hv := range m.GetHeaders().GetHeaders() {
		v := string(hv.GetRawValue())
		if v == "" {
			v = hv.GetValue()
		}
		switch strings.ToLower(hv.GetKey()) {
		case ":status":
			status, _ = strconv.Atoi(v)
		case "content-type":
			contentType = v
		case "mcp-session-id":
			sid = v
		case "www-authenticate":
			www = v
		case "content-encoding":
			encoding = v
		}
	}
	eos := m.GetEndOfStream()
	st.duplex = st.respMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	st.whole = st.respMode == filterv3.ProcessingMode_BUFFERED
	media := mediaType(contentType)
	if st.xerr != nil {
		return st.unallowedHeaders(status, eos, contentType, media, encoding)
	}
	x := st.x
	route := x.Route()
	switch {
	case check.ReauthorizationFor(status, www):
		body, ok := x.Reauthorization(st.ctx)
		if !ok {
			break
		}
		st.act(check.ResponseAction{Outcome: ActionReauthorized, Status: 200, Reason: reasonUpstream401})
		return st.replace(200, body)
	case status < 200 || status > 299:
		return responseHeadersReply(nil, nil)
	}
	if x.Call.Method == "initialize" && sid != "" {
		if !x.SessionBorn(st.ctx, sid) {
			st.act(check.ResponseAction{Outcome: ActionSessionRefused, Status: 503, Reason: reasonUnbound})
			st.s.log.LogAttrs(st.ctx, slog.LevelWarn, "the upstream's new session could not be bound: answer refused",
				slog.String("route", route), slog.String("user", x.Subject()), slog.String("request_id", st.req.RequestID))
			// The id must not reach the client: nobody holds it for this user.
			return st.replace(503, jsonrpc.ErrorBody(x.Call.ID, jsonrpc.CodeInternal, "Internal error", map[string]string{"reason": "the session could not be bound: retry"}), "mcp-session-id")
		}
		st.act(check.ResponseAction{Outcome: ActionSessionBound, Delivered: true, Status: status})
	}
	if eos {
		return responseHeadersReply(nil, nil)
	}
	// The server's requests the caller's rules refuse are kept from the
	// client on every answer of the exchange (useFilter, readAnswer).
	st.refused = x.RefusedServerRequests(st.ctx, &st.req)
	drops := st.refused != 0
	// A GET event stream names no call, but it may carry a list result:
	// replayed on a resumed stream (Last-Event-ID), or sent by a server
	// on the session's standalone stream. On a route that filters lists,
	// its events are filtered by their shape.
	getStream := st.req.Method == "GET" && media == "text/event-stream"
	shaped := getStream && x.FiltersLists()
	readGet := shaped || getStream && drops
	if reason := unreadable(encoding, contentType); readGet && reason != "" {
		st.act(failure(reason))
		return st.replace(200, failureBody(shaped, nil))
	}
	if !getStream && st.req.Method == "GET" && (x.FiltersLists() || drops) && streamRequest(st.req.Headers) {
		// An MCP client reads a 2xx answer to its stream request as an
		// event stream whatever its label: one that is mislabelled would
		// carry events past the filter. MCP allows only an event stream
		// (or 405) here.
		st.act(failure(reasonNotStream))
		return st.replace(200, failureBody(x.FiltersLists(), nil))
	}
	switch {
	case shaped:
		st.useFilter(mcpresponse.NewSSEShapeFilter(x.Keep, st.s.maxEvent))
	case readGet:
		st.useFilter(mcpresponse.NewSSEEventFilter(st.s.maxEvent))
	}
	if sid := st.req.Headers["mcp-session-id"]; st.duplex && getStream && sid != "" {
		// The session's standalone stream: completions may be injected.
		st.handling = injectStream
		st.openStream(sid)
		return responseHeadersReply(nil, nil)
	}
	if readGet {
		st.handling = filterSSE
		return st.filterEvents()
	}
	list := x.FiltersLists() && mcpresponse.IsListMethod(x.Call.Method)
	// The answer to any other call (a POST's: clients read no other) is
	// read for the server's requests, an event stream event by event, and
	// JSON too, which clients read as messages of any kind (a request
	// too). Where lists are filtered, it is also read for the lists it
	// carries, by their shape: clients match a response by its id, on
	// whichever answer of the session it comes, so a server holding back
	// a tools/list could answer another call with the list.
	others := (drops || x.FiltersLists()) && !list && st.req.Method == "POST"
	readEvents := others && media == "text/event-stream"
	readJSON := others && media == "application/json"
	if others && !readEvents && !readJSON && namesMessages(contentType) {
		// Clients pick the reading by a substring of the content type
		// (the TypeScript SDK's): one that names JSON or an event stream
		// without being it would carry messages unread.
		st.act(failure(reasonMislabelled))
		return st.replace(200, mcpresponse.EventFailure(x.Call.ID))
	}
	if x.FiltersLists() && !x.Call.Body && st.req.Method == "POST" {
		// The call was not read from a complete body (request_body_mode is
		// not BUFFERED, or it was too large): it may be a list. Fail closed.
		st.act(failure(reasonUnreadCall))
		return st.replace(200, mcpresponse.FilterFailure(x.Call.ID))
	}
	if reason := unreadable(encoding, contentType); (list || readEvents || readJSON) && reason != "" {
		// The filter reads only plain UTF-8. Fail closed.
		st.act(failure(reason))
		return st.replace(200, failureBody(list, x.Call.ID))
	}
	switch {
	case list && media == "application/json":
		st.handling = filterJSON
		return st.bodyOverride(filterv3.ProcessingMode_BUFFERED, nil)
	case list && media == "text/event-stream":
		st.handling = filterSSE
		st.useFilter(mcpresponse.NewSSEListFilter(x.Call.Method, x.Keep, st.s.maxEvent))
		return st.filterEvents()
	case list:
		// A list answered in a form the filter does not read.
		st.act(failure(reasonMediaType))
		return st.replace(200, mcpresponse.FilterFailure(x.Call.ID))
	case readEvents:
		st.handling = filterSSE
		if x.FiltersLists() {
			st.useFilter(mcpresponse.NewSSEShapeFilter(x.Keep, st.s.maxEvent))
		} else {
			st.useFilter(mcpresponse.NewSSEEventFilter(st.s.maxEvent))
		}
		if bindsAnswer(x) {
			// Its response may create a task or assign a context:
			// read from the filtered events (responseBody).
			st.taskEvents, st.responses = mcpresponse.NewReassembler(st.s.maxEvent), newResponseReader()
		}
		return st.filterEvents()
	case readJSON:
		st.handling = readAnswer
		return st.bodyOverride(filterv3.ProcessingMode_BUFFERED, nil)
	case bindsAnswer(x) && media == "application/json":
		st.handling = readTask
		return st.bodyOverride(filterv3.ProcessingMode_BUFFERED, nil)
	case bindsAnswer(x) && media == "text/event-stream":
		// Read as it passes, frame by frame, until the response event.
		st.handling = readTaskSSE
		st.taskEvents, st.responses = mcpresponse.NewReassembler(st.s.maxEvent), newResponseReader()
		return st.bodyOverride(filterv3.ProcessingMode_STREAMED, nil)
	}
	return responseHeadersReply(nil, nil)
}

// failureBody is the error that replaces an answer the filters cannot
// read: a list's, or (lists false) one read for the server's requests
// alone.
func failureBody(lists bool, id []byte) []byte {
	if lists {
		return mcpresponse.FilterFailure(id)
	}
	return mcpresponse.EventFailure(id)
}

// useFilter makes f the stream's event filter, dropping the server's
// requests the caller's rules refuse (st.refused).
func (st *exchange) useFilter(f *mcpresponse.SSEListFilter) {
	f.DropRequests(st.refused)
	st.sse = f
}

// unreadable says why an answer's bytes are not what the filters read
// ("" when they are): compressed, or in a charset other than UTF-8, which
// a client that decodes by the charset (Python's httpx reads an event
// stream so) reads as other characters, other lines included.
func unreadable(encoding, contentType string) string {
	switch {
	case compressed(encoding):
		return reasonCompressed
	case !check.UTF8Charset(contentType):
		return reasonCharset
	}
	return ""
}

// compressed reports whether a content-encoding says the body is not
// plain (the filters read only identity bodies).
func compressed(encoding string) bool {
	return encoding != "" && !strings.EqualFold(encoding, "identity")
}

// filterEvents asks for an event stream's body frame by frame, to filter
// it (st.sse). Envoy keeps content-length when a STREAMED override is
// applied: the filtered body may be shorter, so it goes here.
func (st *exchange) filterEvents() *extprocv3.ProcessingResponse {
	return st.bodyOverride(filterv3.ProcessingMode_STREAMED, &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}}})
}

// bodyOverride asks for the response body in mode where the filter's
// configuration does not send it at all (response_body_mode NONE, the
// recommended configuration, with allow_mode_override). A configured mode
// is kept (an override would be ignored with full duplex): the body is
// then gathered over as many messages as it takes. Without
// allow_mode_override Envoy ignores the override and never sends the
// body, so docs/extproc.md makes it part of the configuration.
func (st *exchange) bodyOverride(mode filterv3.ProcessingMode_BodySendMode, c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	if st.respMode != filterv3.ProcessingMode_NONE {
		return responseHeadersReply(c, nil)
	}
	st.whole = mode == filterv3.ProcessingMode_BUFFERED
	override := streamedOverride
	if st.whole {
		override = bufferedOverride
	}
	return responseHeadersReply(c, override)
}

// unallowedHeaders handles the answer to a request not allowed (or not
// on a response-path route): nothing is bound or re-authorized for
// nobody, and a list result, which only an allowed caller's filter could
// let through, is replaced. What is at stake is the list of what others
// may use, so every answer that may be one is replaced, whatever its
// content type or encoding (a compressed list, or one labelled text/plain,
// is still read by the client): the answer to a POST whose call is not
// known to be anything else — a list call, a body that is not one call, a
// body too large, or none at all (Envoy not configured to send it, or the
// request sent without one), and any request whose headers were not seen.
// A request without a body that is not a POST (the session's GET stream,
// DELETE) carries no call to answer; but a GET event stream may replay a
// list's answer (a resumed stream), so its events are read by their shape
// and one that is a list ends the stream with the error, and the answer to
// a GET stream request labelled otherwise is replaced.
func (st *exchange) unallowedHeaders(status int, eos bool, contentType, media, encoding string) *extprocv3.ProcessingResponse {
	if errors.Is(st.xerr, check.ErrNoRoute) || status < 200 || status > 299 || eos {
		return responseHeadersReply(nil, nil)
	}
	noBody := len(st.req.Body) == 0 && !st.bodyFull
	if noBody && st.sawHeaders && st.req.Method == "GET" && media == "text/event-stream" {
		if unreadable(encoding, contentType) != "" {
			st.act(failure(reasonNotAllowed))
			return st.replace(200, mcpresponse.FilterFailure(nil))
		}
		st.handling = filterSSE
		st.useFilter(mcpresponse.NewSSEShapeFilter(nil, st.s.maxEvent))
		return st.filterEvents()
	}
	if noBody && st.sawHeaders && st.req.Method == "GET" && streamRequest(st.req.Headers) {
		// A client reads the answer to its stream request as an event
		// stream whatever its label (responseHeaders): one labelled
		// otherwise is not read by its shape, so it is replaced.
		st.act(failure(reasonNotAllowed))
		return st.replace(200, mcpresponse.FilterFailure(nil))
	}
	if noBody && st.sawHeaders && st.req.Method != "POST" {
		return responseHeadersReply(nil, nil)
	}
	call, err := jsonrpc.Parse(st.req.Body)
	if !noBody && !st.bodyFull && err == nil && !mcpresponse.IsListMethod(call.Method) {
		// The answer to another call may carry a list all the same (a
		// client takes a response by its id, on any answer): read by
		// shape, it ends, or is replaced, at the first list.
		switch {
		case (media == "text/event-stream" || media == "application/json") && unreadable(encoding, contentType) != "":
			// Not read: replaced below.
		case media == "text/event-stream":
			st.handling, st.unallowedID = filterSSE, call.ID
			st.useFilter(mcpresponse.NewSSEShapeFilter(nil, st.s.maxEvent))
			return st.filterEvents()
		case media == "application/json":
			st.handling, st.unallowedID = refuseLists, call.ID
			return st.bodyOverride(filterv3.ProcessingMode_BUFFERED, nil)
		case !namesMessages(contentType):
			return responseHeadersReply(nil, nil)
		}
	}
	st.act(failure(reasonNotAllowed))
	return st.replace(200, mcpresponse.FilterFailure(call.ID))
}

// refuseListsIn reads the whole JSON answer to a request ext_authz did not
// allow (unallowedHeaders) and replaces it by the filter failure when it
// carries a list, or cannot be read exactly; any other passes unchanged.
func (st *exchange) refuseListsIn(chunk []byte, eos bool) *extprocv3.ProcessingResponse {
	body, complete := st.gather(chunk, eos)
	if !complete {
		return st.bodyReply([]byte{}, false, nil)
	}
	st.handling = dropBody // nothing after the whole body is passed
	refuseAll := func(string, string, json.RawMessage) bool { return false }
	if _, _, changed, err := mcpresponse.FilterAnswerByShape(body, refuseAll); err != nil || changed {
		st.act(failure(reasonNotAllowed))
		out := mcpresponse.FilterFailure(st.unallowedID)
		return st.bodyReply(out, eos, contentLength(len(out)))
	}
	if st.whole {
		return responseBodyReply(nil) // unchanged
	}
	return st.bodyReply(body, eos, contentLength(len(body)))
}

// replace answers with body instead of the upstream's answer, keeping its
// other headers (mcp-session-id) but those named in drop:
// CONTINUE_AND_REPLACE, after which Envoy sends no more of this response
// and drops what the upstream still sends.
func (st *exchange) replace(status int, body []byte, drop ...string) *extprocv3.ProcessingResponse {
	if st.duplex {
		// With full duplex, CONTINUE_AND_REPLACE is not available: answer
		// at once instead (the upstream's headers are not yet sent).
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(status)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{header("content-type", "application/json")}},
			Body:    body,
		}}}
	}
	st.handling = dropBody
	return responseHeadersReply(&extprocv3.CommonResponse{
		Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
		HeaderMutation: &extprocv3.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{
				header(":status", strconv.Itoa(status)),
				header("content-type", "application/json"),
			},
			RemoveHeaders: append([]string{"www-authenticate", "content-length", "content-encoding"}, drop...),
		},
		BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: body}},
	}, nil)
}

func header(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}

func streamed(b []byte, eos bool) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: b, EndOfStream: eos}}}
}

func responseBodyReply(c *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	if c == nil {
		return continueResponseBody
	}
	r := &struct {
		pr extprocv3.ProcessingResponse
		rb extprocv3.ProcessingResponse_ResponseBody
		br extprocv3.BodyResponse
	}{}
	r.br.Response = c
	r.rb.ResponseBody = &r.br
	r.pr.Response = &r.rb
	return &r.pr
}

// responseBody processes one body message of the answer.
func (st *exchange) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	chunk, eos := b.GetBody(), b.GetEndOfStream()
	if !eos && st.respMode == filterv3.ProcessingMode_BUFFERED_PARTIAL && st.readsWhole() {
		// BUFFERED_PARTIAL: an answer larger than Envoy's buffer comes
		// here cut short, and the rest would go to the client unseen (a
		// list's hidden entries, a refused server request). Answer with
		// the failure instead (Envoy still holds the headers).
		lists := st.handling != readAnswer
		st.act(failure(reasonPartialMode))
		st.handling = dropBody
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(200)},
			Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{header("content-type", "application/json")}},
			Body:    failureBody(lists, st.callID()),
		}}}
	}
	switch st.handling {
	case filterJSON:
		return st.filterJSON(chunk, eos)
	case filterSSE:
		out := st.filterSSE(chunk, eos)
		if st.taskEvents != nil {
			st.readTaskEvents(out, eos)
		}
		return st.bodyReply(out, eos, nil)
	case readTask:
		return st.readTask(chunk, eos)
	case readAnswer:
		return st.readAnswer(chunk, eos)
	case refuseLists:
		return st.refuseListsIn(chunk, eos)
	case readTaskSSE:
		st.readTaskEvents(chunk, eos)
		if st.duplex {
			return st.bodyReply(chunk, eos, nil)
		}
		return responseBodyReply(nil)
	case dropBody:
		return st.bodyReply([]byte{}, eos, nil)
	case injectStream:
		return st.bodyReply(st.streamChunk(chunk, eos), eos, nil)
	}
	if st.duplex {
		return st.bodyReply(chunk, eos, nil)
	}
	return responseBodyReply(nil)
}

// readsWhole: the handling must see the whole answer before any of it
// may pass (a list filtered, an answer read for what it carries).
func (st *exchange) readsWhole() bool {
	switch st.handling {
	case filterJSON, filterSSE, readAnswer, refuseLists:
		return true
	}
	return false
}

// bodyReply answers a body message with out in its place: a
// streamed_response in full duplex, a body mutation otherwise (nil out:
// unchanged). set, when not nil, sets headers (honoured only while Envoy
// holds the headers, BUFFERED).
func (st *exchange) bodyReply(out []byte, eos bool, set *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	if st.duplex {
		if out == nil {
			out = []byte{}
		}
		return responseBodyReply(&extprocv3.CommonResponse{BodyMutation: streamed(out, eos)})
	}
	if out == nil {
		return responseBodyReply(nil)
	}
	// One allocation for the reply's messages.
	r := &struct {
		pr extprocv3.ProcessingResponse
		rb extprocv3.ProcessingResponse_ResponseBody
		br extprocv3.BodyResponse
		c  extprocv3.CommonResponse
		bm extprocv3.BodyMutation
		b  extprocv3.BodyMutation_Body
	}{}
	r.b.Body = out
	r.bm.Mutation = &r.b
	r.c.BodyMutation = &r.bm
	r.c.HeaderMutation = set
	r.br.Response = &r.c
	r.rb.ResponseBody = &r.br
	r.pr.Response = &r.rb
	return &r.pr
}

// contentLength is the header mutation setting content-length to n, in
// one allocation.
func contentLength(n int) *extprocv3.HeaderMutation {
	r := &struct {
		hm   extprocv3.HeaderMutation
		opts [1]*corev3.HeaderValueOption
		o    corev3.HeaderValueOption
		h    corev3.HeaderValue
		v    [20]byte
	}{}
	r.h.Key, r.h.RawValue = "content-length", strconv.AppendInt(r.v[:0], int64(n), 10)
	r.o.Header, r.o.AppendAction = &r.h, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
	r.opts[0] = &r.o
	r.hm.SetHeaders = r.opts[:]
	return &r.hm
}

// gather adds a chunk to a body that is read whole, and reports the body
// once it is complete: in one message (BUFFERED) or at the end of the
// stream. A body over jsonrpc.MaxBodySize counts as complete (FilterList
// refuses it: fail closed).
func (st *exchange) gather(chunk []byte, eos bool) ([]byte, bool) {
	if st.whole && len(st.held) == 0 {
		return chunk, true
	}
	if st.tooLarge || len(st.held)+len(chunk) > jsonrpc.MaxBodySize {
		st.tooLarge, st.held = true, nil
		return nil, true
	}
	st.held = append(st.held, chunk...)
	return st.held, eos || st.whole
}

// filterJSON filters a whole list result. With BUFFERED, Envoy held the
// headers, so the content-length set here is the one the client gets; in
// the other modes Envoy removed it at header time.
func (st *exchange) filterJSON(chunk []byte, eos bool) *extprocv3.ProcessingResponse {
	x := st.x
	body, complete := st.gather(chunk, eos)
	if !complete {
		return st.bodyReply([]byte{}, false, nil)
	}
	st.handling = dropBody // nothing after the whole body is passed
	if out, refused := st.refuseRequests(body, true); refused {
		return st.bodyReply(out, eos, contentLength(len(out)))
	}
	out, removed, changed, err := mcpresponse.Filter(x.Call.Method, body, x.Keep)
	switch {
	case err != nil:
		st.failed(reasonUnparsable, "list response could not be filtered: replaced by an error", err)
		out = mcpresponse.FilterFailure(x.Call.ID)
	case removed > 0:
		st.act(check.ResponseAction{Outcome: ActionFiltered, Delivered: true, Status: 200, Dropped: removed})
	case !changed && st.whole:
		return responseBodyReply(nil) // unchanged
	}
	return st.bodyReply(out, eos, contentLength(len(out)))
}

// filterSSE returns what replaces a chunk of an event stream: the whole
// events it completes, filtered. After a failure, the stream carries one
// error event for the request and nothing more.
func (st *exchange) filterSSE(chunk []byte, eos bool) []byte {
	if st.failedSSE {
		return []byte{}
	}
	out, err := st.sse.Chunk(chunk, eos)
	if err != nil {
		st.failedSSE = true
		lists := st.sse.FiltersLists()
		reason := reasonUnparsable
		if x := st.x; x != nil {
			// A POST's answer to a call that is no list is read by its
			// events' shape for lists alone: its failure names no list.
			lists = lists && (st.req.Method != "POST" || mcpresponse.IsListMethod(x.Call.Method))
			if !lists {
				reason = reasonUnreadableEvent
			}
		} else {
			reason = reasonNotAllowed // a list on the stream of a request not allowed
		}
		st.failed(reason, "event stream could not be filtered: ended with an error", err)
		return mcpresponse.Event(failureBody(lists, st.callID()))
	}
	switch {
	case st.req.Method == "GET" && st.sse.Removed > st.reported:
		// A GET stream may stay open for hours, and may carry several
		// lists: each chunk's filtering is recorded as it happens.
		st.act(check.ResponseAction{Outcome: ActionFiltered, Delivered: true, Status: 200, Dropped: st.sse.Removed - st.reported})
		st.reported = st.sse.Removed
	case st.req.Method != "GET" && eos && st.sse.Removed > 0:
		st.act(check.ResponseAction{Outcome: ActionFiltered, Delivered: true, Status: 200, Dropped: st.sse.Removed})
	}
	if n := st.sse.Dropped - st.reportedDrops; n > 0 {
		// Each as it happens: the user was not asked, and the server
		// waits for an answer that will not come.
		st.act(check.ResponseAction{Outcome: ActionRequestDropped, Delivered: true, Status: 200, Dropped: n})
		st.reportedDrops = st.sse.Dropped
	}
	if out == nil {
		out = []byte{}
	}
	return out
}

// readAnswer reads a whole JSON answer to a call that is no list: one
// that carries a server's request the caller's rules refuse, or that
// cannot be read exactly, is replaced by a JSON-RPC error for the call;
// where lists are filtered, a list it carries is filtered by its shape
// (mcpresponse.FilterAnswerByShape); any other passes unchanged (and
// binds the task it created, as readTask does).
func (st *exchange) readAnswer(chunk []byte, eos bool) *extprocv3.ProcessingResponse {
	x := st.x
	body, complete := st.gather(chunk, eos)
	if !complete {
		return st.bodyReply([]byte{}, false, nil)
	}
	st.handling = dropBody // nothing after the whole body is passed
	if out, refused := st.refuseRequests(body, false); refused {
		return st.bodyReply(out, eos, contentLength(len(out)))
	}
	out, changed := body, false
	if x.FiltersLists() {
		var removed int
		var err error
		out, removed, changed, err = mcpresponse.FilterAnswerByShape(body, x.Keep)
		switch {
		case err != nil:
			st.failed(reasonUnreadableJSON, "answer could not be read for the lists it carries: replaced by an error", err)
			out = mcpresponse.EventFailure(x.Call.ID)
			return st.bodyReply(out, eos, contentLength(len(out)))
		case removed > 0:
			st.act(check.ResponseAction{Outcome: ActionFiltered, Delivered: true, Status: 200, Dropped: removed})
		}
	}
	if bindsAnswer(x) {
		st.bindCreated(body)
	}
	if !changed && st.whole {
		return responseBodyReply(nil) // unchanged
	}
	return st.bodyReply(out, eos, contentLength(len(out)))
}

// failed records that an answer could not be read as the filters must
// (reason) and logs why, with the route and the call's method: the
// caller replaces the answer, or ends the stream, with an error.
func (st *exchange) failed(reason, msg string, err error) {
	st.act(failure(reason))
	var method string
	if st.x != nil {
		method = st.x.Call.Method
	}
	st.s.log.LogAttrs(st.ctx, slog.LevelWarn, msg, slog.String("route", st.route()), slog.String("method", method),
		slog.String("request_id", st.req.RequestID), slog.String("error", err.Error()))
}

// refuseRequests reads a whole JSON answer for the server's requests the
// caller's rules refuse (st.refused), and returns what replaces it when it
// carries one, or cannot be read exactly: a JSON-RPC error for the call
// (failureBody's, lists saying whether the call is a list).
func (st *exchange) refuseRequests(body []byte, lists bool) (out []byte, refused bool) {
	if st.refused == 0 {
		return nil, false
	}
	x := st.x
	switch method, err := mcpresponse.RefusedRequestIn(body, st.refused); {
	case err != nil:
		st.failed(reasonUnreadableJSON, "answer could not be read for the server's requests: replaced by an error", err)
		return failureBody(lists, x.Call.ID), true
	case method != "":
		st.act(check.ResponseAction{Outcome: ActionRequestDropped, Status: 200, Reason: reasonRefusedRequest, Dropped: 1})
		return mcpresponse.RefusedRequestFailure(x.Call.ID, method), true
	}
	return nil, false
}

// readTask binds the task a JSON answer created and the context it
// assigned, if any, and passes the answer on unchanged.
func (st *exchange) readTask(chunk []byte, eos bool) *extprocv3.ProcessingResponse {
	if st.whole {
		st.bindCreated(chunk)
		return responseBodyReply(nil)
	}
	// Gathered over several messages, each passing as it comes.
	if body, complete := st.gather(chunk, eos); complete {
		st.bindCreated(body)
		st.handling = passThrough
	}
	if st.duplex {
		return st.bodyReply(chunk, eos, nil)
	}
	return responseBodyReply(nil)
}

// errResponseRead stops reading an event stream once its response event
// was read.
var errResponseRead = errors.New("extprocauthz: the response event was read")

// readTaskEvents reads the events of a stream as its chunks pass
// unchanged, until the JSON-RPC response the call is answered with: a task
// it creates, and a context it assigns, are bound, and the rest of the
// stream is not looked at. An event over the limit ends the reading (they
// are then bound on first sight); an unterminated last event is not
// dispatched by clients, so it is not read either.
func (st *exchange) readTaskEvents(chunk []byte, eos bool) {
	read := func(event []byte) error {
		if msg := mcpresponse.EventData(event); st.responses.isResponse(msg) {
			st.bindCreated(msg)
			return errResponseRead
		}
		return nil
	}
	err := st.taskEvents.Write(chunk, read)
	if err == nil && eos {
		_, err = st.taskEvents.Flush(read)
	}
	if err != nil || eos {
		st.taskEvents = nil
		if st.handling == readTaskSSE {
			st.handling = passThrough
		}
	}
}

// bindsAnswer reports whether an answer to x's call may create what the
// response path binds to the caller: a task, on a route that binds tasks,
// or the context an A2A agent put the message in, on one that binds
// sessions (Exchange.BindsContexts).
func bindsAnswer(x *check.Exchange) bool {
	return x.BindsTasks() && check.CreatesTask(x.Call.Method) || x.BindsContexts()
}

// bindCreated binds to the caller the task an answer created and the A2A
// context it assigned. An id another user holds stays theirs.
func (st *exchange) bindCreated(body []byte) {
	task, context := answerIDs(body)
	if task != "" && st.x.BindsTasks() && st.x.TaskCreatedBy(st.ctx, task) {
		st.act(check.ResponseAction{Outcome: ActionTaskBound, Delivered: true, Status: 200})
	}
	if context != "" && st.x.ContextCreatedBy(st.ctx, context) {
		st.act(check.ResponseAction{Outcome: ActionContextBound, Delivered: true, Status: 200})
	}
}

// mediaType is a content-type's media type, lower-case, without
// parameters.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// identity reads the check's identity from ext_authz's forwarded metadata;
// nil when the namespace is absent.
func identity(md *corev3.Metadata) *check.Identity {
	ns, ok := md.GetFilterMetadata()[MetadataNamespace]
	if !ok {
		return nil
	}
	f := ns.GetFields()
	str := func(k string) string { return f[k].GetStringValue() }
	id := &check.Identity{
		Route: str("route"), Outcome: str("outcome"),
		Subject: str("user"), Issuer: str("issuer"), Session: str("session"), ClientID: str("client_id"),
		Scopes: strings.Fields(str("scope")), APIKeyID: str("api_key_id"),
	}
	if iat, ok := f["iat"].GetKind().(*structpb.Value_NumberValue); ok {
		id.IssuedAt = time.Unix(int64(iat.NumberValue), 0)
	}

	for name, v := range f["claims"].GetStructValue().GetFields() {
		id.Claims = append(id.Claims, check.RuleClaim{Name: name, Value: claimValue(v)})
	}
	return id
}

// claimValue is a metadata value as a decoded JWT claim holds it.
func claimValue(v *structpb.Value) any {
	return v.AsInterface()
}
