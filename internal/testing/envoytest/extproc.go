package envoytest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// This file is the ext_proc side of the test proxy: ExtProc drives one
// envoy.service.ext_proc.v3.ExternalProcessor/Process stream for one HTTP
// exchange the way Envoy's ext_proc filter does (message order per
// processing mode, mode_override, spurious-message detection,
// message_timeout, CONTINUE_AND_REPLACE, immediate responses, content-length
// rules, full-duplex injection) and returns what the upstream and the
// downstream client would receive.

// DefaultExtProcMessageTimeout is Envoy's ext_proc message_timeout when unset.
const DefaultExtProcMessageTimeout = 200 * time.Millisecond

// extProcAttributesKey is the key under which Envoy puts the CEL attributes
// it sends (ProcessingRequest.attributes).
const extProcAttributesKey = "envoy.filters.http.ext_proc"

// Errors an ExtProcResult reports: what the processor did that Envoy does
// not accept (or, for ErrExtProcContentLength, what the downstream client
// would then see). The local reply or reset Envoy answers with is in the
// result as well.
var (
	// ErrExtProcSpurious: a reply of the wrong kind, a reply with no
	// message outstanding, a body mutation the mode does not allow, or a
	// full-duplex streamed_response at a time Envoy refuses it (ps.cc
	// FailedPrecondition "spurious message").
	ErrExtProcSpurious = errors.New("envoytest: spurious ext_proc message")
	// ErrExtProcTimeout: no reply within message_timeout (or, in full
	// duplex, the stream idle timeout).
	ErrExtProcTimeout = errors.New("envoytest: ext_proc message timeout")
	// ErrExtProcStream: the processor ended the stream with a non-OK status.
	ErrExtProcStream = errors.New("envoytest: ext_proc stream failed")
	// ErrExtProcContentLength: a BUFFERED body replaced without a matching
	// content-length (Envoy answers 500), or a message forwarded with a
	// content-length its body does not match (the peer would see a
	// truncated or hung message).
	ErrExtProcContentLength = errors.New("envoytest: content-length does not match the body")
	// ErrExtProcMutation: a header mutation the rules disallow, with
	// DisallowIsError set.
	ErrExtProcMutation = errors.New("envoytest: disallowed header mutation")
)

// ExtProcConfig is an ext_proc filter configuration (ExternalProcessor),
// merged with the route's ExtProcPerRoute overrides.
type ExtProcConfig struct {
	// Mode is processing_mode; nil means Envoy's defaults (headers SEND,
	// bodies NONE, trailers SKIP).
	Mode *filterv3.ProcessingMode
	// AllowModeOverride is allow_mode_override.
	AllowModeOverride bool
	// SendBodyWithoutWaiting is send_body_without_waiting_for_header_response
	// (STREAMED only).
	SendBodyWithoutWaiting bool
	// MessageTimeout is message_timeout (DefaultExtProcMessageTimeout when
	// zero). Full duplex has none: StreamIdleTimeout applies.
	MessageTimeout time.Duration
	// StreamIdleTimeout stands in for the connection manager's
	// stream_idle_timeout in full duplex (5s when zero).
	StreamIdleTimeout time.Duration
	// FailureModeAllow is failure_mode_allow.
	FailureModeAllow bool
	// StatusOnError is status_on_error (500 when zero).
	StatusOnError int
	// DisallowIsError is mutation_rules.disallow_is_error: a disallowed
	// header mutation fails the exchange instead of being ignored.
	DisallowIsError bool
	// BufferLimit bounds a BUFFERED body (1 MiB when zero); BUFFERED_PARTIAL
	// sends at most this much.
	BufferLimit int
	// Metadata is the forwarded dynamic metadata (metadata_options
	// forwarding_namespaces), sent as metadata_context on every message.
	Metadata *corev3.Metadata
	// RequestAttributes and ResponseAttributes are the evaluated
	// request_attributes/response_attributes, sent under
	// attributes["envoy.filters.http.ext_proc"] on the first message of
	// their direction only.
	RequestAttributes, ResponseAttributes map[string]*structpb.Value
}

// ExtProcHeader is one header-map entry; keys are lower-case and
// pseudo-headers (:method, :path, :authority, :scheme, :status) are
// entries like the others, as Envoy sends them.
type ExtProcHeader struct{ Key, Value string }

// ExtProcMessage is an HTTP request or response as it crosses the proxy.
type ExtProcMessage struct {
	Headers []ExtProcHeader
	// Chunks are the body's data frames as they arrive (or leave).
	Chunks   [][]byte
	Trailers []ExtProcHeader
}

// ExtProcRequest builds a request message: pseudo-headers, then header in
// sorted key order (lower-cased), then the body chunks.
func ExtProcRequest(method, authority, path string, header http.Header, chunks ...string) ExtProcMessage {
	m := ExtProcMessage{Headers: []ExtProcHeader{{":method", method}, {":path", path}, {":authority", authority}, {":scheme", "http"}}}
	m.Headers = append(m.Headers, extProcHeaderEntries(header)...)
	for _, c := range chunks {
		m.Chunks = append(m.Chunks, []byte(c))
	}
	return m
}

// ExtProcResponse builds an upstream response message.
func ExtProcResponse(status int, header http.Header, chunks ...string) ExtProcMessage {
	m := ExtProcMessage{Headers: []ExtProcHeader{{":status", strconv.Itoa(status)}}}
	m.Headers = append(m.Headers, extProcHeaderEntries(header)...)
	for _, c := range chunks {
		m.Chunks = append(m.Chunks, []byte(c))
	}
	return m
}

func extProcHeaderEntries(h http.Header) []ExtProcHeader {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []ExtProcHeader
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(out, ExtProcHeader{strings.ToLower(k), v})
		}
	}
	return out
}

// Get returns the first value of key (case-insensitive), "" when absent.
func (m ExtProcMessage) Get(key string) string {
	v, _ := extProcGetHeader(m.Headers, key)
	return v
}

// Has reports whether key is present.
func (m ExtProcMessage) Has(key string) bool {
	_, ok := extProcGetHeader(m.Headers, key)
	return ok
}

// Status is the :status of a response (0 when absent or not a number).
func (m ExtProcMessage) Status() int {
	s, _ := strconv.Atoi(m.Get(":status"))
	return s
}

// Body joins the chunks.
func (m ExtProcMessage) Body() []byte {
	var b []byte
	for _, c := range m.Chunks {
		b = append(b, c...)
	}
	return b
}

func extProcGetHeader(h []ExtProcHeader, key string) (string, bool) {
	key = strings.ToLower(key)
	for _, e := range h {
		if e.Key == key {
			return e.Value, true
		}
	}
	return "", false
}

// ExtProcExchange is one HTTP exchange through the proxy.
type ExtProcExchange struct {
	Request ExtProcMessage
	// Response is what the upstream answers (whatever request it got).
	Response ExtProcMessage
	// FirstByteDelay holds the upstream response body back this long after
	// its headers, like a streaming server that has not written yet (used
	// to show that full-duplex injection needs a first upstream byte).
	FirstByteDelay time.Duration
}

// ExtProcResult is what came out of an exchange.
type ExtProcResult struct {
	// Upstream is the request as the upstream received it; nil when no
	// request reached it (immediate or local reply on the request path).
	Upstream *ExtProcMessage
	// Downstream is what the client received (when Reset is false).
	Downstream ExtProcMessage
	// Reset: Envoy reset the downstream stream (an immediate response or
	// error after response bytes had gone to the client).
	Reset bool
	// Err is the first protocol violation or failure (ErrExtProc*), nil when
	// the processor followed the protocol.
	Err error
	// Sent and Received are the stream's messages in order.
	Sent     []*extprocv3.ProcessingRequest
	Received []*extprocv3.ProcessingResponse
	// RejectedMutations counts ignored disallowed header mutations
	// (Envoy's rejected_header_mutations counter).
	RejectedMutations int
}

// NewExtProcServer serves srv on a 127.0.0.1 listener and returns a client
// connection to it; both are closed by t.Cleanup.
func NewExtProcServer(t testing.TB, srv extprocv3.ExternalProcessorServer) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("envoytest: listen: %v", err)
	}
	gs := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(gs, srv)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("envoytest: ext_proc client: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// ExtProc runs ex through an ext_proc filter configured by cfg whose
// processor is reached over conn. It fails the test only when cfg is not a
// configuration Envoy accepts; everything the processor does wrong is in
// the result.
func ExtProc(t testing.TB, conn grpc.ClientConnInterface, cfg ExtProcConfig, ex ExtProcExchange) ExtProcResult {
	t.Helper()
	mode := &filterv3.ProcessingMode{}
	if cfg.Mode != nil {
		mode = proto.Clone(cfg.Mode).(*filterv3.ProcessingMode)
	}
	duplex := mode.GetRequestBodyMode() == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
		mode.GetResponseBodyMode() == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	if mode.GetRequestBodyMode() == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED && mode.GetRequestTrailerMode() != filterv3.ProcessingMode_SEND ||
		mode.GetResponseBodyMode() == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED && mode.GetResponseTrailerMode() != filterv3.ProcessingMode_SEND {
		t.Fatalf("envoytest: FULL_DUPLEX_STREAMED needs the trailer mode of its extProcDir set to SEND (Envoy rejects the config)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &extProcRun{
		ctx:          ctx,
		conn:         conn,
		cfg:          cfg,
		mode:         mode,
		filterDuplex: duplex,
		res:          &ExtProcResult{},
	}
	if r.cfg.MessageTimeout == 0 {
		r.cfg.MessageTimeout = DefaultExtProcMessageTimeout
	}
	if r.cfg.StreamIdleTimeout == 0 {
		r.cfg.StreamIdleTimeout = 5 * time.Second
	}
	if r.cfg.StatusOnError == 0 {
		r.cfg.StatusOnError = http.StatusInternalServerError
	}
	if r.cfg.BufferLimit == 0 {
		r.cfg.BufferLimit = 1 << 20
	}
	r.run(ex)
	return *r.res
}

type extProcDir int

const (
	extProcRequestDir extProcDir = iota
	extProcResponseDir
)

type extProcReply struct {
	msg *extprocv3.ProcessingResponse
	err error
}

type extProcRun struct {
	ctx          context.Context
	conn         grpc.ClientConnInterface
	cfg          ExtProcConfig
	mode         *filterv3.ProcessingMode
	filterDuplex bool
	res          *ExtProcResult

	stream      extprocv3.ExternalProcessor_ProcessClient
	replies     chan extProcReply
	gone        bool // the processor closed OK, or failed open: ignored from now on
	outstanding int  // messages sent and not yet answered (non-duplex)
	sentAttrs   [2]bool
	// downstreamStarted: response headers went to the client; a later
	// immediate response or error resets the stream.
	downstreamStarted bool
	// duplexBody: a duplex direction sent body data, after which failure
	// mode allow no longer applies (ep.cc, Envoy 1.36).
	duplexBody bool
}

// extProcLocalReply is how a direction ends early: Envoy answers the client itself.
type extProcLocalReply struct{ msg ExtProcMessage }

func (r *extProcRun) run(ex ExtProcExchange) {
	defer r.finish()
	req, lr := r.process(extProcRequestDir, ex.Request, 0)
	if lr != nil {
		r.res.Downstream = lr.msg
		return
	}
	r.res.Upstream = &req
	resp, lr := r.process(extProcResponseDir, ex.Response, ex.FirstByteDelay)
	if lr != nil {
		if r.downstreamStarted {
			r.res.Reset = true
		}
		r.res.Downstream = lr.msg
		return
	}
	r.res.Downstream = resp
}

// finish closes the stream as Envoy does when the exchange is over and
// reads what the processor still sends: anything is a reply with no
// message outstanding.
func (r *extProcRun) finish() {
	if r.stream == nil {
		return
	}
	_ = r.stream.CloseSend()
	timer := time.NewTimer(r.cfg.MessageTimeout)
	defer timer.Stop()
	for {
		select {
		case rep := <-r.replies:
			if rep.err != nil {
				return
			}
			if !r.gone {
				r.res.Received = append(r.res.Received, rep.msg)
				r.fail(fmt.Errorf("%w: %s after the exchange ended", ErrExtProcSpurious, extProcReplyKind(rep.msg)))
			}
		case <-timer.C:
			return
		}
	}
}

// fail records err as the result's error (the first one wins).
func (r *extProcRun) fail(err error) {
	if r.res.Err == nil {
		r.res.Err = err
	}
}

// send opens the stream on the first message and sends m with the
// metadata and, first per direction, the attributes.
func (r *extProcRun) send(dir extProcDir, m *extprocv3.ProcessingRequest) {
	if r.gone {
		return
	}
	if r.stream == nil {
		s, err := extprocv3.NewExternalProcessorClient(r.conn).Process(r.ctx)
		if err != nil {
			r.gone = true
			r.fail(fmt.Errorf("%w: open: %v", ErrExtProcStream, err))
			return
		}
		r.stream = s
		r.replies = make(chan extProcReply, 64)
		go func() {
			for {
				msg, err := s.Recv()
				select {
				case r.replies <- extProcReply{msg, err}:
				case <-r.ctx.Done():
					return
				}
				if err != nil {
					return
				}
			}
		}()
		m.ProtocolConfig = &extprocv3.ProtocolConfiguration{
			RequestBodyMode:                         r.mode.GetRequestBodyMode(),
			ResponseBodyMode:                        r.mode.GetResponseBodyMode(),
			SendBodyWithoutWaitingForHeaderResponse: r.cfg.SendBodyWithoutWaiting,
		}
	}
	m.MetadataContext = r.cfg.Metadata
	attrs := r.cfg.RequestAttributes
	if dir == extProcResponseDir {
		attrs = r.cfg.ResponseAttributes
	}
	if !r.sentAttrs[dir] && attrs != nil {
		m.Attributes = map[string]*structpb.Struct{extProcAttributesKey: {Fields: attrs}}
	}
	r.sentAttrs[dir] = true
	r.res.Sent = append(r.res.Sent, m)
	if err := r.stream.Send(m); err != nil {
		return // the processor ended the stream; Recv reports how
	}
	r.outstanding++
}

// errExtProcGone: the processor is out of the exchange (closed OK, or failed
// open); the message goes on unchanged.
var errExtProcGone = errors.New("processor gone")

// await waits for the reply to the oldest outstanding message. A reply
// that is neither want nor an immediate response is spurious.
func (r *extProcRun) await(want string, timeout time.Duration) (*extprocv3.ProcessingResponse, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case rep := <-r.replies:
		if rep.err == io.EOF {
			r.gone = true
			return nil, errExtProcGone
		}
		if rep.err != nil {
			return nil, fmt.Errorf("%w: %v", ErrExtProcStream, rep.err)
		}
		r.res.Received = append(r.res.Received, rep.msg)
		r.outstanding--
		kind := extProcReplyKind(rep.msg)
		if kind != want && kind != "immediate_response" {
			return nil, fmt.Errorf("%w: %s while awaiting %s", ErrExtProcSpurious, kind, want)
		}
		return rep.msg, nil
	case <-timer.C:
		return nil, ErrExtProcTimeout
	}
}

// extra reports a reply that arrived while nothing was outstanding.
func (r *extProcRun) extra() error {
	if r.gone || r.outstanding > 0 {
		return nil
	}
	select {
	case rep := <-r.replies:
		if rep.err == io.EOF {
			r.gone = true
			return nil
		}
		if rep.err != nil {
			return fmt.Errorf("%w: %v", ErrExtProcStream, rep.err)
		}
		r.res.Received = append(r.res.Received, rep.msg)
		return fmt.Errorf("%w: %s with no message outstanding", ErrExtProcSpurious, extProcReplyKind(rep.msg))
	default:
		return nil
	}
}

func extProcReplyKind(m *extprocv3.ProcessingResponse) string {
	switch m.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return "request_headers"
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return "response_headers"
	case *extprocv3.ProcessingResponse_RequestBody:
		return "request_body"
	case *extprocv3.ProcessingResponse_ResponseBody:
		return "response_body"
	case *extprocv3.ProcessingResponse_RequestTrailers:
		return "request_trailers"
	case *extprocv3.ProcessingResponse_ResponseTrailers:
		return "response_trailers"
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		return "immediate_response"
	case *extprocv3.ProcessingResponse_StreamedImmediateResponse:
		return "streamed_immediate_response"
	}
	return "empty"
}

// failed decides what a processing error does: failure_mode_allow (when
// it still applies) ignores the processor from now on; otherwise Envoy
// answers the client (504 for a timeout, status_on_error else). A processor
// that closed the stream OK is always just ignored.
func (r *extProcRun) failed(err error) *extProcLocalReply {
	if errors.Is(err, errExtProcGone) {
		return nil
	}
	r.fail(err)
	if errors.Is(err, ErrExtProcContentLength) || errors.Is(err, ErrExtProcMutation) {
		return &extProcLocalReply{extProcPlainReply(http.StatusInternalServerError, "")}
	}
	if r.cfg.FailureModeAllow && !r.duplexBody {
		r.gone = true
		return nil
	}
	r.gone = true
	if errors.Is(err, ErrExtProcTimeout) {
		return &extProcLocalReply{extProcPlainReply(http.StatusGatewayTimeout, "")}
	}
	return &extProcLocalReply{extProcPlainReply(r.cfg.StatusOnError, "")}
}

func extProcPlainReply(status int, body string) ExtProcMessage {
	m := ExtProcMessage{Headers: []ExtProcHeader{{":status", strconv.Itoa(status)}}}
	if body != "" {
		m.Headers = append(m.Headers, ExtProcHeader{"content-type", "text/plain"}, ExtProcHeader{"content-length", strconv.Itoa(len(body))})
		m.Chunks = [][]byte{[]byte(body)}
	}
	return m
}

// immediate builds the reply an ImmediateResponse asks for: status (200
// when unset or below 200), its headers, its body (text/plain unless it
// sets a content-type).
func (r *extProcRun) immediate(ir *extprocv3.ImmediateResponse) *extProcLocalReply {
	r.gone = true
	status := int(ir.GetStatus().GetCode())
	if status < 200 {
		status = 200
	}
	m := ExtProcMessage{Headers: []ExtProcHeader{{":status", strconv.Itoa(status)}}}
	if len(ir.GetBody()) > 0 {
		m.Headers = append(m.Headers, ExtProcHeader{"content-type", "text/plain"})
		m.Chunks = [][]byte{ir.GetBody()}
	}
	if err := r.mutate(&m.Headers, ir.GetHeaders(), extProcResponseDir); err != nil {
		return r.failed(err)
	}
	if len(ir.GetBody()) > 0 {
		extProcSetHeader(&m.Headers, "content-length", strconv.Itoa(len(ir.GetBody())))
	}
	return &extProcLocalReply{m}
}

func (r *extProcRun) bodyMode(dir extProcDir) filterv3.ProcessingMode_BodySendMode {
	if dir == extProcRequestDir {
		return r.mode.GetRequestBodyMode()
	}
	return r.mode.GetResponseBodyMode()
}

func (r *extProcRun) headerSend(dir extProcDir) bool {
	m := r.mode.GetRequestHeaderMode()
	if dir == extProcResponseDir {
		m = r.mode.GetResponseHeaderMode()
	}
	return m != filterv3.ProcessingMode_SKIP // DEFAULT = SEND
}

func (r *extProcRun) trailerSend(dir extProcDir) bool {
	m := r.mode.GetRequestTrailerMode()
	if dir == extProcResponseDir {
		m = r.mode.GetResponseTrailerMode()
	}
	return m == filterv3.ProcessingMode_SEND // DEFAULT = SKIP
}

// shouldRemoveContentLength is ps.h's rule, decided when the headers are
// sent, with the mode of that moment: a later mode_override does not
// change it.
func shouldRemoveContentLength(body filterv3.ProcessingMode_BodySendMode, headersSent bool) bool {
	switch body {
	case filterv3.ProcessingMode_STREAMED, filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, filterv3.ProcessingMode_BUFFERED_PARTIAL:
		return true
	case filterv3.ProcessingMode_BUFFERED:
		return !headersSent
	}
	return false
}

// overrideMode applies a mode_override from a headers reply where Envoy
// honours it.
func (r *extProcRun) overrideMode(dir extProcDir, o *filterv3.ProcessingMode) {
	if o == nil || !r.cfg.AllowModeOverride || r.cfg.SendBodyWithoutWaiting || r.filterDuplex {
		return
	}
	// Header modes: DEFAULT keeps; request_header_mode is moot once the
	// request headers went. Body modes always apply (unset = NONE).
	if dir == extProcRequestDir && o.GetResponseHeaderMode() != filterv3.ProcessingMode_DEFAULT {
		r.mode.ResponseHeaderMode = o.GetResponseHeaderMode()
	}
	if dir == extProcRequestDir {
		r.mode.RequestBodyMode = o.GetRequestBodyMode()
	}
	r.mode.ResponseBodyMode = o.GetResponseBodyMode()
	if o.GetRequestTrailerMode() != filterv3.ProcessingMode_DEFAULT && dir == extProcRequestDir {
		r.mode.RequestTrailerMode = o.GetRequestTrailerMode()
	}
	if o.GetResponseTrailerMode() != filterv3.ProcessingMode_DEFAULT {
		r.mode.ResponseTrailerMode = o.GetResponseTrailerMode()
	}
}

func extProcHeadersMessage(dir extProcDir, h []ExtProcHeader, eos bool) *extprocv3.ProcessingRequest {
	hm := &corev3.HeaderMap{}
	for _, e := range h {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: e.Key, RawValue: []byte(e.Value)})
	}
	hh := &extprocv3.HttpHeaders{Headers: hm, EndOfStream: eos}
	if dir == extProcRequestDir {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hh}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: hh}}
}

func extProcBodyMessage(dir extProcDir, b []byte, eos bool) *extprocv3.ProcessingRequest {
	hb := &extprocv3.HttpBody{Body: b, EndOfStream: eos}
	if dir == extProcRequestDir {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: hb}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: hb}}
}

func extProcTrailersMessage(dir extProcDir, h []ExtProcHeader) *extprocv3.ProcessingRequest {
	hm := &corev3.HeaderMap{}
	for _, e := range h {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: e.Key, RawValue: []byte(e.Value)})
	}
	ht := &extprocv3.HttpTrailers{Trailers: hm}
	if dir == extProcRequestDir {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestTrailers{RequestTrailers: ht}}
	}
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseTrailers{ResponseTrailers: ht}}
}

func extProcHeadersKind(dir extProcDir) string {
	return [...]string{"request_headers", "response_headers"}[dir]
}

func extProcBodyKind(dir extProcDir) string { return [...]string{"request_body", "response_body"}[dir] }

func extProcTrailersKind(dir extProcDir) string {
	return [...]string{"request_trailers", "response_trailers"}[dir]
}

// common returns the CommonResponse of a headers or body reply.
func extProcCommon(m *extprocv3.ProcessingResponse) *extprocv3.CommonResponse {
	switch v := m.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return v.RequestHeaders.GetResponse()
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return v.ResponseHeaders.GetResponse()
	case *extprocv3.ProcessingResponse_RequestBody:
		return v.RequestBody.GetResponse()
	case *extprocv3.ProcessingResponse_ResponseBody:
		return v.ResponseBody.GetResponse()
	}
	return nil
}

// direction runs one direction of the exchange and returns the message as
// it leaves the filter, or the local reply that replaces the exchange.
func (r *extProcRun) process(dir extProcDir, in ExtProcMessage, firstByteDelay time.Duration) (ExtProcMessage, *extProcLocalReply) {
	msg := ExtProcMessage{Headers: slices.Clone(in.Headers), Chunks: slices.Clone(in.Chunks), Trailers: slices.Clone(in.Trailers)}
	if r.gone {
		return msg, nil
	}
	hasBody, hasTrailers := len(msg.Chunks) > 0, len(msg.Trailers) > 0
	bodyMode := r.bodyMode(dir)
	if bodyMode == filterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
		return r.duplex(dir, msg, firstByteDelay)
	}
	headersSent := false
	streamedEarly := false
	if r.headerSend(dir) {
		removeCL := shouldRemoveContentLength(bodyMode, true)
		r.send(dir, extProcHeadersMessage(dir, msg.Headers, !hasBody && !hasTrailers))
		headersSent = true
		if removeCL {
			extProcRemoveHeader(&msg.Headers, "content-length")
		}
		if r.cfg.SendBodyWithoutWaiting && bodyMode == filterv3.ProcessingMode_STREAMED {
			streamedEarly = true
			for i, c := range msg.Chunks {
				r.send(dir, extProcBodyMessage(dir, c, i == len(msg.Chunks)-1 && !hasTrailers))
			}
		}
		rep, err := r.await(extProcHeadersKind(dir), r.cfg.MessageTimeout)
		if err != nil {
			if lr := r.failed(err); lr != nil {
				return msg, lr
			}
			return msg, nil
		}
		if ir := rep.GetImmediateResponse(); ir != nil {
			return msg, r.immediate(ir)
		}
		cr := extProcCommon(rep)
		if err := r.mutate(&msg.Headers, cr.GetHeaderMutation(), dir); err != nil {
			return msg, r.failed(err)
		}
		r.overrideMode(dir, rep.GetModeOverride())
		if cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE {
			// The body is the mutation's; no more messages this direction;
			// what the peer still sends is drained.
			msg.Chunks = nil
			if b := cr.GetBodyMutation().GetBody(); len(b) > 0 {
				msg.Chunks = [][]byte{b}
			}
			extProcRemoveHeader(&msg.Headers, "content-length")
			if dir == extProcResponseDir {
				r.downstreamStarted = true
			}
			if streamedEarly {
				r.gone = true // the early chunks' replies no longer matter
			}
			return msg, nil
		}
		if dir == extProcResponseDir && headersContinue(r.bodyMode(dir)) {
			r.downstreamStarted = true
		}
		if err := r.extra(); err != nil {
			return msg, r.failed(err)
		}
	} else if shouldRemoveContentLength(bodyMode, false) {
		extProcRemoveHeader(&msg.Headers, "content-length")
	}
	if r.gone {
		return msg, nil
	}

	bodyMode = r.bodyMode(dir) // after any override
	if dir == extProcResponseDir && headersContinue(bodyMode) {
		r.downstreamStarted = true
	}
	var lr *extProcLocalReply
	switch {
	case !hasBody:
	case bodyMode == filterv3.ProcessingMode_BUFFERED, bodyMode == filterv3.ProcessingMode_BUFFERED_PARTIAL:
		lr = r.buffered(dir, &msg, bodyMode, headersSent, hasTrailers)
	case bodyMode == filterv3.ProcessingMode_STREAMED:
		lr = r.streamed(dir, &msg, hasTrailers, streamedEarly)
	}
	if lr != nil {
		return msg, lr
	}
	if dir == extProcResponseDir {
		r.downstreamStarted = true
	}
	if hasTrailers && r.trailerSend(dir) && !r.gone {
		r.send(dir, extProcTrailersMessage(dir, msg.Trailers))
		rep, err := r.await(extProcTrailersKind(dir), r.cfg.MessageTimeout)
		if err != nil {
			return msg, r.failed(err)
		}
		if ir := rep.GetImmediateResponse(); ir != nil {
			return msg, r.immediate(ir)
		}
		var hm *extprocv3.HeaderMutation
		if dir == extProcRequestDir {
			hm = rep.GetRequestTrailers().GetHeaderMutation()
		} else {
			hm = rep.GetResponseTrailers().GetHeaderMutation()
		}
		if err := r.mutate(&msg.Trailers, hm, dir); err != nil {
			return msg, r.failed(err)
		}
	}
	if cl, ok := extProcGetHeader(msg.Headers, "content-length"); ok && cl != strconv.Itoa(len(msg.Body())) {
		// Envoy forwards it as is; the peer reads a truncated or hung body.
		r.fail(fmt.Errorf("%w: content-length %s, body %d bytes", ErrExtProcContentLength, cl, len(msg.Body())))
	}
	return msg, nil
}

// headersContinue reports whether headers go on to the peer once their
// reply is applied; BUFFERED and BUFFERED_PARTIAL hold them for the body.
func headersContinue(body filterv3.ProcessingMode_BodySendMode) bool {
	return body == filterv3.ProcessingMode_NONE || body == filterv3.ProcessingMode_STREAMED
}

// buffered sends the whole body (BUFFERED) or its first BufferLimit bytes
// (BUFFERED_PARTIAL) in one message and applies the reply.
func (r *extProcRun) buffered(dir extProcDir, msg *ExtProcMessage, mode filterv3.ProcessingMode_BodySendMode, headersSent, hasTrailers bool) *extProcLocalReply {
	body := msg.Body()
	var rest []byte
	if len(body) > r.cfg.BufferLimit {
		if mode == filterv3.ProcessingMode_BUFFERED {
			if dir == extProcRequestDir {
				return &extProcLocalReply{extProcPlainReply(http.StatusRequestEntityTooLarge, "Payload Too Large")}
			}
			return &extProcLocalReply{extProcPlainReply(http.StatusInternalServerError, "Internal Server Error")}
		}
		body, rest = body[:r.cfg.BufferLimit], body[r.cfg.BufferLimit:]
	}
	r.send(dir, extProcBodyMessage(dir, body, rest == nil && !hasTrailers))
	rep, err := r.await(extProcBodyKind(dir), r.cfg.MessageTimeout)
	if err != nil {
		return r.failed(err)
	}
	if ir := rep.GetImmediateResponse(); ir != nil {
		return r.immediate(ir)
	}
	cr := extProcCommon(rep)
	// Headers were held: the body reply's header mutation applies.
	if err := r.mutate(&msg.Headers, cr.GetHeaderMutation(), dir); err != nil {
		return r.failed(err)
	}
	bm := cr.GetBodyMutation()
	mutated := false
	switch m := bm.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		body, mutated = m.Body, true
	case *extprocv3.BodyMutation_ClearBody:
		if m.ClearBody {
			body, mutated = nil, true
		}
	case *extprocv3.BodyMutation_StreamedResponse:
		return r.failed(fmt.Errorf("%w: streamed_response outside FULL_DUPLEX_STREAMED", ErrExtProcSpurious))
	}
	if mutated && headersSent && mode == filterv3.ProcessingMode_BUFFERED {
		// ps.cc validateContentLength: the reply must set or remove a
		// content-length that matches the new body.
		if cl, ok := extProcGetHeader(msg.Headers, "content-length"); ok && cl != strconv.Itoa(len(body)) {
			return r.failed(fmt.Errorf("%w: content-length %s, new body %d bytes", ErrExtProcContentLength, cl, len(body)))
		}
	}
	msg.Chunks = nil
	if len(body) > 0 {
		msg.Chunks = append(msg.Chunks, body)
	}
	if len(rest) > 0 {
		msg.Chunks = append(msg.Chunks, rest)
	}
	if err := r.extra(); err != nil {
		return r.failed(err)
	}
	return nil
}

// streamed sends one message per chunk (unless they went before the
// headers reply) and replaces each chunk with its reply's body.
func (r *extProcRun) streamed(dir extProcDir, msg *ExtProcMessage, hasTrailers, alreadySent bool) *extProcLocalReply {
	if !alreadySent {
		for i, c := range msg.Chunks {
			r.send(dir, extProcBodyMessage(dir, c, i == len(msg.Chunks)-1 && !hasTrailers))
		}
	}
	out := make([][]byte, 0, len(msg.Chunks))
	for i := range msg.Chunks {
		rep, err := r.await(extProcBodyKind(dir), r.cfg.MessageTimeout)
		if err != nil {
			if lr := r.failed(err); lr != nil {
				return lr
			}
			out = append(out, msg.Chunks[i:]...) // failed open: the rest passes
			break
		}
		if ir := rep.GetImmediateResponse(); ir != nil {
			return r.immediate(ir)
		}
		// header_mutation and clear_route_cache are ignored in STREAMED.
		chunk := msg.Chunks[i]
		switch m := extProcCommon(rep).GetBodyMutation().GetMutation().(type) {
		case *extprocv3.BodyMutation_Body:
			chunk = m.Body
		case *extprocv3.BodyMutation_ClearBody:
			if m.ClearBody {
				chunk = nil
			}
		case *extprocv3.BodyMutation_StreamedResponse:
			return r.failed(fmt.Errorf("%w: streamed_response outside FULL_DUPLEX_STREAMED", ErrExtProcSpurious))
		}
		if len(chunk) > 0 {
			out = append(out, chunk)
		}
		if dir == extProcResponseDir {
			r.downstreamStarted = true
		}
	}
	msg.Chunks = out
	if err := r.extra(); err != nil {
		return r.failed(err)
	}
	return nil
}

// duplex runs a FULL_DUPLEX_STREAMED direction: headers and every chunk go
// to the processor as they arrive (the chunks after firstByteDelay), and
// the processor answers M:N with streamed_response; the direction ends with
// its end_of_stream (and the trailers reply when there are trailers).
func (r *extProcRun) duplex(dir extProcDir, msg ExtProcMessage, firstByteDelay time.Duration) (ExtProcMessage, *extProcLocalReply) {
	hasBody, hasTrailers := len(msg.Chunks) > 0, len(msg.Trailers) > 0
	in := msg.Chunks
	r.send(dir, extProcHeadersMessage(dir, msg.Headers, !hasBody && !hasTrailers))
	extProcRemoveHeader(&msg.Headers, "content-length")
	msg.Chunks = nil

	sendBody := func() {
		for i, c := range in {
			r.send(dir, extProcBodyMessage(dir, c, i == len(in)-1 && !hasTrailers))
			r.duplexBody = true
		}
		if hasTrailers && r.trailerSend(dir) {
			r.send(dir, extProcTrailersMessage(dir, msg.Trailers))
		}
	}
	var bodyTimer <-chan time.Time
	if firstByteDelay > 0 {
		t := time.NewTimer(firstByteDelay)
		defer t.Stop()
		bodyTimer = t.C
	} else {
		sendBody()
	}
	chunksSent := func() bool { return bodyTimer == nil && hasBody }
	// fail: when failing open before the body went to the processor, the
	// upstream body passes unprocessed.
	fail := func(err error) (ExtProcMessage, *extProcLocalReply) {
		lr := r.failed(err)
		if lr == nil && bodyTimer != nil {
			msg.Chunks = in
		}
		return msg, lr
	}

	headersDone, eosDone, trailersDone := false, !hasBody, !hasTrailers
	idle := time.NewTimer(r.cfg.StreamIdleTimeout)
	defer idle.Stop()
	for !(headersDone && eosDone && trailersDone) {
		select {
		case <-bodyTimer:
			bodyTimer = nil
			sendBody()
			continue
		case <-idle.C:
			return fail(fmt.Errorf("%w: stream idle", ErrExtProcTimeout))
		case rep := <-r.replies:
			if rep.err == io.EOF {
				r.gone = true
				if bodyTimer != nil {
					msg.Chunks = in
				}
				return msg, nil
			}
			if rep.err != nil {
				return fail(fmt.Errorf("%w: %v", ErrExtProcStream, rep.err))
			}
			r.res.Received = append(r.res.Received, rep.msg)
			kind := extProcReplyKind(rep.msg)
			switch {
			case kind == "immediate_response":
				return msg, r.immediate(rep.msg.GetImmediateResponse())
			case kind == extProcHeadersKind(dir) && !headersDone:
				headersDone = true
				if err := r.mutate(&msg.Headers, extProcCommon(rep.msg).GetHeaderMutation(), dir); err != nil {
					return fail(err)
				}
				if dir == extProcResponseDir {
					r.downstreamStarted = true
				}
			case kind == extProcBodyKind(dir):
				sr := extProcCommon(rep.msg).GetBodyMutation().GetStreamedResponse()
				switch {
				case sr == nil:
					return fail(fmt.Errorf("%w: body mutation other than streamed_response in FULL_DUPLEX_STREAMED", ErrExtProcSpurious))
				case !headersDone:
					return fail(fmt.Errorf("%w: streamed_response before the headers reply", ErrExtProcSpurious))
				case !chunksSent():
					return fail(fmt.Errorf("%w: streamed_response before any body chunk was sent", ErrExtProcSpurious))
				case eosDone:
					return fail(fmt.Errorf("%w: streamed_response after end_of_stream", ErrExtProcSpurious))
				}
				if len(sr.GetBody()) > 0 {
					msg.Chunks = append(msg.Chunks, sr.GetBody())
				}
				if sr.GetEndOfStream() {
					eosDone = true
				}
			case kind == extProcTrailersKind(dir) && hasTrailers && !trailersDone && headersDone:
				trailersDone = true
				hm := rep.msg.GetRequestTrailers().GetHeaderMutation()
				if dir == extProcResponseDir {
					hm = rep.msg.GetResponseTrailers().GetHeaderMutation()
				}
				if err := r.mutate(&msg.Trailers, hm, dir); err != nil {
					return fail(err)
				}
				eosDone = true // trailers end the body
			default:
				return fail(fmt.Errorf("%w: %s in FULL_DUPLEX_STREAMED", ErrExtProcSpurious, kind))
			}
		}
	}
	r.outstanding = 0 // duplex replies are M:N; nothing is counted
	return msg, nil
}

// mutate applies a HeaderMutation under Envoy's default mutation rules:
// changes to host, :authority, :scheme, :method and x-envoy-* are ignored,
// pseudo-headers and host are never removed, :status is settable to a
// number of at least 200 (response) and nothing else (request, only
// :path). Ignored changes are counted, or fail with DisallowIsError. An
// invalid name or value fails the message (Envoy answers 500).
func (r *extProcRun) mutate(h *[]ExtProcHeader, m *extprocv3.HeaderMutation, dir extProcDir) error {
	for _, o := range m.GetSetHeaders() {
		key := strings.ToLower(o.GetHeader().GetKey())
		value := o.GetHeader().GetValue()
		if raw := o.GetHeader().GetRawValue(); len(raw) > 0 {
			value = string(raw)
		}
		if !validHeaderName(key) || !validHeaderValue(value) {
			return fmt.Errorf("%w: invalid header %q", ErrExtProcMutation, key)
		}
		if !r.allowed(key, value, dir, false) {
			if r.cfg.DisallowIsError {
				return fmt.Errorf("%w: set %q", ErrExtProcMutation, key)
			}
			r.res.RejectedMutations++
			continue
		}
		//lint:ignore SA1019 processors still send append; this emulates how Envoy applies it
		appendValue := o.GetAppend().GetValue() // unset = false in ext_proc
		switch o.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			//lint:ignore SA1019 as above: an unset append means the action decides
			appendValue = appendValue || o.GetAppend() == nil
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if _, ok := extProcGetHeader(*h, key); ok {
				continue
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if _, ok := extProcGetHeader(*h, key); !ok {
				continue
			}
			appendValue = false
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			appendValue = false
		}
		if appendValue {
			*h = append(*h, ExtProcHeader{key, value})
		} else {
			extProcSetHeader(h, key, value)
		}
	}
	for _, k := range m.GetRemoveHeaders() {
		key := strings.ToLower(k)
		if !r.allowed(key, "", dir, true) {
			if r.cfg.DisallowIsError {
				return fmt.Errorf("%w: remove %q", ErrExtProcMutation, key)
			}
			r.res.RejectedMutations++
			continue
		}
		extProcRemoveHeader(h, key)
	}
	return nil
}

func (r *extProcRun) allowed(key, value string, dir extProcDir, remove bool) bool {
	if refusedByDefaultRules(key) {
		return false
	}
	if remove {
		return !strings.HasPrefix(key, ":")
	}
	switch key {
	case ":status":
		n, err := strconv.Atoi(value)
		return dir == extProcResponseDir && err == nil && n >= 200 && n <= 999
	case ":path":
		return dir == extProcRequestDir
	}
	return !strings.HasPrefix(key, ":")
}

// extProcSetHeader sets the first entry of key to value and drops the others
// (append false), or adds it.
func extProcSetHeader(h *[]ExtProcHeader, key, value string) {
	i := slices.IndexFunc(*h, func(e ExtProcHeader) bool { return e.Key == key })
	if i < 0 {
		*h = append(*h, ExtProcHeader{key, value})
		return
	}
	(*h)[i].Value = value
	tail := slices.DeleteFunc((*h)[i+1:], func(e ExtProcHeader) bool { return e.Key == key })
	*h = (*h)[:i+1+len(tail)]
}

func extProcRemoveHeader(h *[]ExtProcHeader, key string) {
	*h = slices.DeleteFunc(*h, func(e ExtProcHeader) bool { return e.Key == key })
}
