package envoytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// scripted is a fake processor: for the n-th message of a stream it sends
// what reply returns (nothing, one or several replies), or ends the stream
// with the error.
type scripted struct {
	extprocv3.UnimplementedExternalProcessorServer
	reply func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error)
}

func (s *scripted) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	for n := 0; ; n++ {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		out, err := s.reply(n, req)
		if err != nil {
			return err
		}
		for _, m := range out {
			if err := stream.Send(m); err != nil {
				return err
			}
		}
	}
}

func process(reply func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error)) *scripted {
	return &scripted{reply: reply}
}

// kindOf names a request's kind, with "+eos" when it ends its direction.
func kindOf(m *extprocv3.ProcessingRequest) string {
	switch v := m.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return "request_headers" + eos(v.RequestHeaders.GetEndOfStream())
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return "response_headers" + eos(v.ResponseHeaders.GetEndOfStream())
	case *extprocv3.ProcessingRequest_RequestBody:
		return "request_body" + eos(v.RequestBody.GetEndOfStream())
	case *extprocv3.ProcessingRequest_ResponseBody:
		return "response_body" + eos(v.ResponseBody.GetEndOfStream())
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return "request_trailers"
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return "response_trailers"
	}
	return "?"
}

func eos(b bool) string {
	if b {
		return "+eos"
	}
	return ""
}

func kinds(ms []*extprocv3.ProcessingRequest) string {
	var out []string
	for _, m := range ms {
		out = append(out, kindOf(m))
	}
	return strings.Join(out, " ")
}

// reply builders: the reply of the same kind as req, with cr.
func replyTo(req *extprocv3.ProcessingRequest, cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_RequestBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_ResponseBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{HeaderMutation: cr.GetHeaderMutation()}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{HeaderMutation: cr.GetHeaderMutation()}}}
	}
	panic("unknown request")
}

func cont(req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	return replyTo(req, &extprocv3.CommonResponse{})
}

func one(m *extprocv3.ProcessingResponse) ([]*extprocv3.ProcessingResponse, error) {
	return []*extprocv3.ProcessingResponse{m}, nil
}

// passthrough answers every message with CONTINUE.
func passthrough(_ int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
	return one(cont(req))
}

func streamed(req *extprocv3.ProcessingRequest, body []byte, end bool) *extprocv3.ProcessingResponse {
	return replyTo(req, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
		StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: end}}}})
}

func respBody(body []byte, end bool) *extprocv3.ProcessingResponse {
	return replyTo(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{}},
		&extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_StreamedResponse{
			StreamedResponse: &extprocv3.StreamedBodyResponse{Body: body, EndOfStream: end}}}})
}

func setBody(req *extprocv3.ProcessingRequest, body string, hm *extprocv3.HeaderMutation) *extprocv3.ProcessingResponse {
	return replyTo(req, &extprocv3.CommonResponse{HeaderMutation: hm, BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(body)}}})
}

func set(key, value string) *corev3.HeaderValueOption {
	//lint:ignore SA1019 Envoy reads append explicitly; the tests set it as processors do
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, RawValue: []byte(value)}, Append: wrapperspb.Bool(false)}
}

func immediateReply(code int, body string) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status: &typev3.HttpStatus{Code: typev3.StatusCode(code)}, Body: []byte(body),
		Headers: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("content-type", "application/json")}}}}}
}

func modes(reqBody, respBody filterv3.ProcessingMode_BodySendMode) *filterv3.ProcessingMode {
	return &filterv3.ProcessingMode{RequestBodyMode: reqBody, ResponseBodyMode: respBody}
}

const (
	none        = filterv3.ProcessingMode_NONE
	buffered    = filterv3.ProcessingMode_BUFFERED
	streamedM   = filterv3.ProcessingMode_STREAMED
	partial     = filterv3.ProcessingMode_BUFFERED_PARTIAL
	fullDuplex  = filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	sendMode    = filterv3.ProcessingMode_SEND
	jsonCT      = "application/json"
	listRequest = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
)

func exchange(req, resp ExtProcMessage) ExtProcExchange {
	return ExtProcExchange{Request: req, Response: resp}
}

func post(chunks ...string) ExtProcMessage {
	h := http.Header{"Content-Type": {jsonCT}, "Content-Length": {fmt.Sprint(len(strings.Join(chunks, "")))}}
	return ExtProcRequest("POST", "mcp.example", "/mcp", h, chunks...)
}

func ok200(chunks ...string) ExtProcMessage {
	h := http.Header{"Content-Type": {jsonCT}, "Content-Length": {fmt.Sprint(len(strings.Join(chunks, "")))}}
	return ExtProcResponse(200, h, chunks...)
}

func TestExtProcMessageOrder(t *testing.T) {
	withTrailers := ok200("a", "b")
	withTrailers.Trailers = []ExtProcHeader{{"grpc-status", "0"}}
	tests := []struct {
		name string
		mode *filterv3.ProcessingMode
		ex   ExtProcExchange
		want string
		cfg  ExtProcConfig // Mode is set from mode
	}{
		{"defaults: headers only", nil, exchange(post(listRequest), ok200("{}")),
			"request_headers response_headers", ExtProcConfig{}},
		{"no body means end_of_stream on headers", nil, ExtProcExchange{Request: ExtProcRequest("GET", "h", "/mcp", nil), Response: ExtProcResponse(204, nil)},
			"request_headers+eos response_headers+eos", ExtProcConfig{}},
		{"buffered request: one body message", modes(buffered, none), exchange(post(`{"jsonrpc":`, `"2.0"}`), ok200("{}")),
			"request_headers request_body+eos response_headers", ExtProcConfig{}},
		{"streamed response: one message per chunk", modes(none, streamedM), ExtProcExchange{Request: post("x"), Response: ok200("a", "b", "c")},
			"request_headers response_headers response_body response_body response_body+eos", ExtProcConfig{}},
		{"partial under the limit: one message", modes(none, partial), ExtProcExchange{Request: post("x"), Response: ok200("a", "b")},
			"request_headers response_headers response_body+eos", ExtProcConfig{}},
		{"trailers sent only in SEND mode", &filterv3.ProcessingMode{ResponseBodyMode: streamedM, ResponseTrailerMode: sendMode}, exchange(post("x"), withTrailers),
			"request_headers response_headers response_body response_body response_trailers", ExtProcConfig{}},
		{"trailers skipped by default", modes(none, streamedM), exchange(post("x"), withTrailers),
			"request_headers response_headers response_body response_body", ExtProcConfig{}},
		{"header SKIP", &filterv3.ProcessingMode{RequestHeaderMode: filterv3.ProcessingMode_SKIP, ResponseHeaderMode: filterv3.ProcessingMode_SKIP, ResponseBodyMode: buffered},
			ExtProcExchange{Request: post("x"), Response: ok200("a", "b")}, "response_body+eos", ExtProcConfig{}},
		{"partial over the limit: the first bytes, no eos", modes(none, partial), exchange(post("x"), ok200("abc", "def")),
			"request_headers response_headers response_body", ExtProcConfig{BufferLimit: 4}},
		{"streamed request body sent before the headers reply", modes(streamedM, none), exchange(post("a", "b"), ok200("{}")),
			"request_headers request_body request_body+eos response_headers", ExtProcConfig{SendBodyWithoutWaiting: true}},
	}
	conn := NewExtProcServer(t, process(passthrough))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Mode = tt.mode
			res := ExtProc(t, conn, cfg, tt.ex)
			if res.Err != nil {
				t.Fatalf("err %v", res.Err)
			}
			if got := kinds(res.Sent); got != tt.want {
				t.Fatalf("sent %q, want %q", got, tt.want)
			}
			if !bytes.Equal(res.Downstream.Body(), tt.ex.Response.Body()) || res.Upstream == nil || !bytes.Equal(res.Upstream.Body(), tt.ex.Request.Body()) {
				t.Fatalf("bodies changed: up %q down %q", res.Upstream.Body(), res.Downstream.Body())
			}
		})
	}
}

func TestExtProcBufferOverflow(t *testing.T) {
	conn := NewExtProcServer(t, process(passthrough))
	tests := []struct {
		name     string
		mode     *filterv3.ProcessingMode
		wantCode int
		wantUp   bool
	}{
		{"request within the limit", modes(buffered, none), 200, true},
		{"request over the limit: 413", modes(buffered, none), 413, false},
		{"response over the limit: 500", modes(none, buffered), 500, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := 1 << 20
			if tt.name != "request within the limit" {
				limit = 3
			}
			res := ExtProc(t, conn, ExtProcConfig{Mode: tt.mode, BufferLimit: limit}, exchange(post("abcd"), ok200("efgh")))
			if res.Downstream.Status() != tt.wantCode || (res.Upstream != nil) != tt.wantUp {
				t.Fatalf("status %d upstream %v", res.Downstream.Status(), res.Upstream != nil)
			}
		})
	}
}

func TestExtProcMetadataAndAttributes(t *testing.T) {
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{"envoy.filters.http.ext_authz": {Fields: map[string]*structpb.Value{"sub": structpb.NewStringValue("alice")}}}}
	conn := NewExtProcServer(t, process(passthrough))
	res := ExtProc(t, conn, ExtProcConfig{
		Mode:               modes(buffered, buffered),
		Metadata:           md,
		RequestAttributes:  map[string]*structpb.Value{"request.id": structpb.NewStringValue("r1")},
		ResponseAttributes: map[string]*structpb.Value{"response.code": structpb.NewNumberValue(200)},
	}, exchange(post(listRequest), ok200("{}")))
	if res.Err != nil || len(res.Sent) != 4 {
		t.Fatalf("err %v, sent %q", res.Err, kinds(res.Sent))
	}
	for i, m := range res.Sent {
		if m.GetMetadataContext().GetFilterMetadata()["envoy.filters.http.ext_authz"].GetFields()["sub"].GetStringValue() != "alice" {
			t.Errorf("message %d (%s) lacks metadata_context", i, kindOf(m))
		}
		first := i == 0 || i == 2
		if got := m.GetAttributes()[extProcAttributesKey] != nil; got != first {
			t.Errorf("message %d (%s): attributes present %v, want %v", i, kindOf(m), got, first)
		}
		if got := m.GetProtocolConfig() != nil; got != (i == 0) {
			t.Errorf("message %d: protocol_config present %v", i, got)
		}
	}
	if res.Sent[0].GetProtocolConfig().GetRequestBodyMode() != buffered {
		t.Errorf("protocol_config %v", res.Sent[0].GetProtocolConfig())
	}
}

// overrideToBuffered answers the response headers with a mode_override
// asking for the response body BUFFERED.
func overrideToBuffered(_ int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
	m := cont(req)
	if req.GetResponseHeaders() != nil {
		m.ModeOverride = &filterv3.ProcessingMode{ResponseBodyMode: buffered}
	}
	return one(m)
}

func TestExtProcModeOverride(t *testing.T) {
	conn := NewExtProcServer(t, process(overrideToBuffered))
	tests := []struct {
		name string
		cfg  ExtProcConfig
		want string
	}{
		{"honoured with allow_mode_override", ExtProcConfig{AllowModeOverride: true},
			"request_headers+eos response_headers response_body+eos"},
		{"ignored without allow_mode_override", ExtProcConfig{},
			"request_headers+eos response_headers"},
		{"ignored with send_body_without_waiting", ExtProcConfig{AllowModeOverride: true, SendBodyWithoutWaiting: true},
			"request_headers+eos response_headers"},
		{"ignored when the filter config has FULL_DUPLEX", ExtProcConfig{AllowModeOverride: true,
			Mode: &filterv3.ProcessingMode{RequestBodyMode: fullDuplex, RequestTrailerMode: sendMode}},
			"request_headers+eos response_headers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := exchange(ExtProcRequest("GET", "h", "/", nil), ok200(`{"a":1}`))
			res := ExtProc(t, conn, tt.cfg, ex)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := kinds(res.Sent); got != tt.want {
				t.Fatalf("sent %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExtProcSpurious(t *testing.T) {
	tests := []struct {
		name      string
		mode      *filterv3.ProcessingMode
		failOpen  bool
		reply     func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error)
		wantErr   error
		wantCode  int
		wantReset bool
	}{
		{name: "in order: fine", reply: passthrough, wantCode: 200},
		{name: "wrong kind: body reply to headers", reply: func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			if req.GetRequestHeaders() != nil {
				return one(respBody(nil, false))
			}
			return one(cont(req))
		}, wantErr: ErrExtProcSpurious, wantCode: 500},
		{name: "wrong kind, failure mode allow: processor dropped", failOpen: true, reply: func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			return one(respBody(nil, false))
		}, wantErr: ErrExtProcSpurious, wantCode: 200},
		{name: "two replies to one message", mode: modes(buffered, none), reply: func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			if req.GetRequestHeaders() != nil {
				return []*extprocv3.ProcessingResponse{cont(req), cont(req)}, nil
			}
			return one(cont(req))
		}, wantErr: ErrExtProcSpurious, wantCode: 500},
		// The duplicate is caught either at once (nothing outstanding) or
		// while the response headers are awaited (wrong kind): 500 both ways.
		{name: "second reply to request_headers, no body", reply: func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			if req.GetRequestHeaders() != nil {
				return []*extprocv3.ProcessingResponse{cont(req), cont(req)}, nil
			}
			return one(cont(req))
		}, wantErr: ErrExtProcSpurious, wantCode: 500},
		{name: "streamed_response outside duplex", mode: modes(none, buffered), reply: func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			if b := req.GetResponseBody(); b != nil {
				return one(streamed(req, b.GetBody(), true))
			}
			return one(cont(req))
		}, wantErr: ErrExtProcSpurious, wantCode: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := NewExtProcServer(t, process(tt.reply))
			res := ExtProc(t, conn, ExtProcConfig{Mode: tt.mode, FailureModeAllow: tt.failOpen}, exchange(post(listRequest), ok200("{}")))
			if !errors.Is(res.Err, tt.wantErr) {
				t.Fatalf("err %v, want %v", res.Err, tt.wantErr)
			}
			if res.Downstream.Status() != tt.wantCode || res.Reset != tt.wantReset {
				t.Fatalf("status %d reset %v, want %d", res.Downstream.Status(), res.Reset, tt.wantCode)
			}
		})
	}
}

func TestExtProcFailures(t *testing.T) {
	slow := func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		time.Sleep(150 * time.Millisecond)
		return one(cont(req))
	}
	tests := []struct {
		name         string
		cfg          ExtProcConfig
		reply        func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error)
		wantErr      error
		wantCode     int
		wantUpstream bool
	}{
		{"reply within message_timeout", ExtProcConfig{MessageTimeout: time.Second}, slow, nil, 200, true},
		{"timeout fails closed with 504", ExtProcConfig{MessageTimeout: 20 * time.Millisecond}, slow, ErrExtProcTimeout, 504, false},
		{"timeout with failure_mode_allow continues", ExtProcConfig{MessageTimeout: 20 * time.Millisecond, FailureModeAllow: true}, slow, ErrExtProcTimeout, 200, true},
		{"grpc error: status_on_error default 500", ExtProcConfig{}, func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			return nil, status.Error(codes.Internal, "boom")
		}, ErrExtProcStream, 500, false},
		{"grpc error: status_on_error 503", ExtProcConfig{StatusOnError: 503}, func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			return nil, status.Error(codes.Unavailable, "down")
		}, ErrExtProcStream, 503, false},
		{"grpc error with failure_mode_allow continues", ExtProcConfig{FailureModeAllow: true}, func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			return nil, status.Error(codes.Internal, "boom")
		}, ErrExtProcStream, 200, true},
		{"stream closed OK: Envoy continues without it", ExtProcConfig{}, func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			return nil, errCloseOK
		}, nil, 200, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := process(tt.reply)
			conn := NewExtProcServer(t, okCloser{srv})
			res := ExtProc(t, conn, tt.cfg, exchange(post(listRequest), ok200("{}")))
			if !errors.Is(res.Err, tt.wantErr) {
				t.Fatalf("err %v, want %v", res.Err, tt.wantErr)
			}
			if res.Downstream.Status() != tt.wantCode || (res.Upstream != nil) != tt.wantUpstream {
				t.Fatalf("status %d upstream %v, want %d %v", res.Downstream.Status(), res.Upstream != nil, tt.wantCode, tt.wantUpstream)
			}
		})
	}
}

// errCloseOK makes okCloser end the stream with status OK.
var errCloseOK = errors.New("close OK")

type okCloser struct{ *scripted }

func (o okCloser) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	if err := o.scripted.Process(stream); !errors.Is(err, errCloseOK) {
		return err
	}
	return nil
}

func TestExtProcContinueAndReplace(t *testing.T) {
	replacement := `{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"Authorization required"}}`
	conn := NewExtProcServer(t, process(func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		if req.GetResponseHeaders() != nil {
			return one(replyTo(req, &extprocv3.CommonResponse{
				Status:         extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
				HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set(":status", "200")}, RemoveHeaders: []string{"www-authenticate"}},
				BodyMutation:   &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(replacement)}},
			}))
		}
		return one(cont(req))
	}))
	up := ExtProcResponse(401, http.Header{"Www-Authenticate": {`Bearer resource_metadata="x"`}, "Mcp-Session-Id": {"s1"}, "Content-Length": {"12"}}, "unauthorized")
	res := ExtProc(t, conn, ExtProcConfig{Mode: modes(none, streamedM)}, exchange(post(listRequest), up))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	d := res.Downstream
	if d.Status() != 200 || string(d.Body()) != replacement || d.Has("content-length") || d.Has("www-authenticate") || d.Get("mcp-session-id") != "s1" {
		t.Fatalf("downstream %+v body %s", d.Headers, d.Body())
	}
	if got := kinds(res.Sent); got != "request_headers response_headers" {
		t.Fatalf("body still sent after CONTINUE_AND_REPLACE: %q", got)
	}
}

func TestExtProcImmediateResponse(t *testing.T) {
	at := func(phase string) func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		return func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			if strings.HasPrefix(kindOf(req), phase) {
				return one(immediateReply(0, `{"denied":true}`))
			}
			return one(cont(req))
		}
	}
	tests := []struct {
		phase        string
		mode         *filterv3.ProcessingMode
		wantUpstream bool
		wantReset    bool
	}{
		{"request_headers", nil, false, false},
		{"request_body", modes(buffered, none), false, false},
		{"response_headers", nil, true, false},
		{"response_body", modes(none, buffered), true, false},
		{"response_body", modes(none, streamedM), true, true}, // headers already went downstream
	}
	for _, tt := range tests {
		t.Run(tt.phase+fmt.Sprint(tt.mode.GetResponseBodyMode()), func(t *testing.T) {
			conn := NewExtProcServer(t, process(at(tt.phase)))
			res := ExtProc(t, conn, ExtProcConfig{Mode: tt.mode}, ExtProcExchange{Request: post(listRequest), Response: ok200("a", "b")})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if (res.Upstream != nil) != tt.wantUpstream || res.Reset != tt.wantReset {
				t.Fatalf("upstream %v reset %v", res.Upstream != nil, res.Reset)
			}
			d := res.Downstream
			if d.Status() != 200 || string(d.Body()) != `{"denied":true}` || d.Get("content-type") != jsonCT {
				t.Fatalf("downstream %+v %s", d.Headers, d.Body())
			}
		})
	}
}

func TestExtProcContentLength(t *testing.T) {
	const newBody = `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`
	replaceBody := func(fixCL bool) func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		return func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			if req.GetResponseBody() != nil {
				var hm *extprocv3.HeaderMutation
				if fixCL {
					hm = &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("content-length", fmt.Sprint(len(newBody)))}}
				}
				return one(setBody(req, newBody, hm))
			}
			return one(cont(req))
		}
	}
	// overrideStreamed: BUFFERED in the filter, STREAMED by override; the
	// content-length stays unless the headers reply removes it.
	overrideStreamed := func(removeCL bool) func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		return func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			switch {
			case req.GetResponseHeaders() != nil:
				m := cont(req)
				m.ModeOverride = &filterv3.ProcessingMode{ResponseBodyMode: streamedM}
				if removeCL {
					m.GetResponseHeaders().Response.HeaderMutation = &extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}}
				}
				return one(m)
			case req.GetResponseBody() != nil:
				return one(setBody(req, strings.ToUpper(string(req.GetResponseBody().GetBody()))+"!", nil))
			}
			return one(cont(req))
		}
	}
	tests := []struct {
		name     string
		mode     *filterv3.ProcessingMode
		reply    func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error)
		wantErr  error
		wantCode int
		wantCL   string
	}{
		{"buffered+send with matching content-length", modes(none, buffered), replaceBody(true), nil, 200, fmt.Sprint(len(newBody))},
		{"buffered+send without fixing content-length", modes(none, buffered), replaceBody(false), ErrExtProcContentLength, 500, ""},
		{"buffered+skip: removed at header time", &filterv3.ProcessingMode{ResponseHeaderMode: filterv3.ProcessingMode_SKIP, ResponseBodyMode: buffered}, replaceBody(false), nil, 200, ""},
		{"streamed: removed at header time", modes(none, streamedM), overrideStreamed(false), nil, 200, ""},
		{"override to streamed, content-length removed by the processor", modes(none, buffered), overrideStreamed(true), nil, 200, ""},
		{"override to streamed keeps a stale content-length", modes(none, buffered), overrideStreamed(false), ErrExtProcContentLength, 200, "9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := NewExtProcServer(t, process(tt.reply))
			res := ExtProc(t, conn, ExtProcConfig{Mode: tt.mode, AllowModeOverride: true}, ExtProcExchange{Request: post(listRequest), Response: ok200("abcd", "efghi")})
			if !errors.Is(res.Err, tt.wantErr) {
				t.Fatalf("err %v, want %v", res.Err, tt.wantErr)
			}
			if res.Downstream.Status() != tt.wantCode || res.Downstream.Get("content-length") != tt.wantCL {
				t.Fatalf("status %d content-length %q, want %d %q", res.Downstream.Status(), res.Downstream.Get("content-length"), tt.wantCode, tt.wantCL)
			}
		})
	}
}

func TestExtProcHeaderMutationRules(t *testing.T) {
	mutate := func(hm *extprocv3.HeaderMutation) func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		return func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			return one(replyTo(req, &extprocv3.CommonResponse{HeaderMutation: hm}))
		}
	}
	tests := []struct {
		name         string
		hm           *extprocv3.HeaderMutation
		disallowErr  bool
		wantRejected int
		wantErr      error
		check        func(res ExtProcResult) bool
	}{
		{"allowed set", &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-user", "alice")}}, false, 0, nil,
			func(r ExtProcResult) bool {
				return r.Upstream.Get("x-user") == "alice" && r.Downstream.Get("x-user") == "alice"
			}},
		{"x-envoy and host ignored", &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-envoy-foo", "1"), set("host", "evil")}}, false, 4, nil,
			func(r ExtProcResult) bool { return !r.Upstream.Has("x-envoy-foo") && !r.Downstream.Has("x-envoy-foo") }},
		{"pseudo-header removal ignored", &extprocv3.HeaderMutation{RemoveHeaders: []string{":path"}}, false, 2, nil,
			func(r ExtProcResult) bool { return r.Upstream.Get(":path") == "/mcp" }},
		{"disallow_is_error", &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-envoy-foo", "1")}}, true, 0, ErrExtProcMutation,
			func(r ExtProcResult) bool { return r.Downstream.Status() == 500 && r.Upstream == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := NewExtProcServer(t, process(mutate(tt.hm)))
			res := ExtProc(t, conn, ExtProcConfig{DisallowIsError: tt.disallowErr}, exchange(post(listRequest), ok200("{}")))
			if !errors.Is(res.Err, tt.wantErr) || res.RejectedMutations != tt.wantRejected || !tt.check(res) {
				t.Fatalf("err %v rejected %d up %+v down %+v", res.Err, res.RejectedMutations, res.Upstream, res.Downstream.Headers)
			}
		})
	}
	t.Run(":status settable on the response", func(t *testing.T) {
		conn := NewExtProcServer(t, process(func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
			if req.GetResponseHeaders() != nil {
				return one(replyTo(req, &extprocv3.CommonResponse{HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set(":status", "201")}}}))
			}
			return one(cont(req))
		}))
		if res := ExtProc(t, conn, ExtProcConfig{}, exchange(post(listRequest), ok200("{}"))); res.Downstream.Status() != 201 {
			t.Fatalf("status %d", res.Downstream.Status())
		}
	})
}

// duplexProcessor echoes every response chunk as a streamed_response; with
// inject set it sends an extra event at the moment inject names.
func duplexProcessor(inject string) func(int, *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
	event := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/elicitation/complete\",\"params\":{\"elicitationId\":\"e1\"}}\n\n")
	injected := false
	return func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		switch {
		case req.GetResponseHeaders() != nil:
			out := []*extprocv3.ProcessingResponse{}
			if inject == "before headers reply" {
				out = append(out, respBody(event, false))
			}
			out = append(out, cont(req))
			if inject == "right after headers reply" {
				out = append(out, respBody(event, false))
			}
			return out, nil
		case req.GetResponseBody() != nil:
			b := req.GetResponseBody()
			var out []*extprocv3.ProcessingResponse
			if inject == "after first chunk" && !injected {
				injected = true
				out = append(out, respBody(b.GetBody(), false), respBody(event, false))
			} else {
				out = append(out, respBody(b.GetBody(), b.GetEndOfStream()))
			}
			if inject == "after eos" && b.GetEndOfStream() {
				out = append(out, respBody(event, false))
			}
			if inject == "body mutation" {
				out = []*extprocv3.ProcessingResponse{setBody(req, "x", nil)}
			}
			return out, nil
		}
		return one(cont(req))
	}
}

func TestExtProcFullDuplex(t *testing.T) {
	sse := ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, "id: 1\ndata:\n\n", "event: message\ndata: {}\n\n")
	cfg := ExtProcConfig{Mode: &filterv3.ProcessingMode{ResponseBodyMode: fullDuplex, ResponseTrailerMode: sendMode}, StreamIdleTimeout: 2 * time.Second}
	tests := []struct {
		inject    string
		delay     time.Duration
		failOpen  bool
		wantErr   error
		wantCode  int
		wantReset bool
		wantBody  string
	}{
		{inject: "", wantCode: 200, wantBody: "id: 1\ndata:\n\nevent: message\ndata: {}\n\n"},
		{inject: "after first chunk", wantCode: 200, wantBody: "id: 1\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/elicitation/complete\",\"params\":{\"elicitationId\":\"e1\"}}\n\nevent: message\ndata: {}\n\n"},
		{inject: "before headers reply", wantErr: ErrExtProcSpurious, wantCode: 500},
		{inject: "right after headers reply", delay: 300 * time.Millisecond, wantErr: ErrExtProcSpurious, wantCode: 500, wantReset: true},
		{inject: "after eos", wantErr: ErrExtProcSpurious, wantCode: 200, wantBody: "id: 1\ndata:\n\nevent: message\ndata: {}\n\n"},
		{inject: "body mutation", wantErr: ErrExtProcSpurious, wantCode: 500, wantReset: true},
		// Once a duplex direction sent body data, failure_mode_allow no
		// longer applies.
		{inject: "body mutation", failOpen: true, wantErr: ErrExtProcSpurious, wantCode: 500, wantReset: true},
		// Before any body data it does: the processor is dropped and the
		// upstream body passes.
		{inject: "right after headers reply", delay: 300 * time.Millisecond, failOpen: true, wantErr: ErrExtProcSpurious, wantCode: 200,
			wantBody: "id: 1\ndata:\n\nevent: message\ndata: {}\n\n"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("inject %s fail open %v", tt.inject, tt.failOpen), func(t *testing.T) {
			conn := NewExtProcServer(t, process(duplexProcessor(tt.inject)))
			cfg := cfg
			cfg.FailureModeAllow = tt.failOpen
			res := ExtProc(t, conn, cfg, ExtProcExchange{Request: ExtProcRequest("GET", "h", "/mcp", nil), Response: sse, FirstByteDelay: tt.delay})
			if !errors.Is(res.Err, tt.wantErr) {
				t.Fatalf("err %v, want %v", res.Err, tt.wantErr)
			}
			if res.Downstream.Status() != tt.wantCode || res.Reset != tt.wantReset {
				t.Fatalf("status %d reset %v, want %d %v", res.Downstream.Status(), res.Reset, tt.wantCode, tt.wantReset)
			}
			if tt.wantBody != "" && string(res.Downstream.Body()) != tt.wantBody {
				t.Fatalf("body %q, want %q", res.Downstream.Body(), tt.wantBody)
			}
		})
	}
}

// FuzzExtProcChunking: for any split of a body into data frames, a
// STREAMED processor sees every frame as one message in order (eos on the
// last) and a processor that rewrites frames yields the rewritten body;
// BUFFERED sees the whole body in one message.
func FuzzExtProcChunking(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"a\":1}\n\nevent: message\ndata: {}\n\n"), uint64(7))
	f.Add([]byte("x"), uint64(1))
	upper := func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		if b := req.GetResponseBody(); b != nil {
			return one(setBody(req, string(asciiUpper(b.GetBody())), nil))
		}
		return one(cont(req))
	}
	conn := NewExtProcServer(f, process(upper))
	f.Fuzz(func(t *testing.T, body []byte, seed uint64) {
		if len(body) == 0 || len(body) > 4096 {
			return
		}
		chunks := splitSeeded(body, seed)
		resp := ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, chunks...)
		for _, mode := range []filterv3.ProcessingMode_BodySendMode{streamedM, buffered} {
			res := ExtProc(t, conn, ExtProcConfig{Mode: modes(none, mode), MessageTimeout: 5 * time.Second}, exchange(ExtProcRequest("GET", "h", "/", nil), resp))
			if res.Err != nil {
				t.Fatalf("%v: %v", mode, res.Err)
			}
			if want := asciiUpper(body); !bytes.Equal(res.Downstream.Body(), want) {
				t.Fatalf("%v chunks %q: body %q, want %q", mode, chunks, res.Downstream.Body(), want)
			}
			var sent []string
			for _, m := range res.Sent {
				if b := m.GetResponseBody(); b != nil {
					sent = append(sent, string(b.GetBody())+eos(b.GetEndOfStream()))
				}
			}
			want := []string{string(body) + "+eos"}
			if mode == streamedM {
				want = nil
				for i, c := range chunks {
					want = append(want, c+eos(i == len(chunks)-1))
				}
			}
			if strings.Join(sent, "|") != strings.Join(want, "|") {
				t.Fatalf("%v: sent %q, want %q", mode, sent, want)
			}
		}
	})
}

// splitSeeded cuts b into 1..16-byte chunks chosen by seed (xorshift).
func splitSeeded(b []byte, seed uint64) []string {
	var out []string
	x := seed | 1
	for len(b) > 0 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		n := min(int(x%16)+1, len(b))
		out = append(out, string(b[:n]))
		b = b[n:]
	}
	return out
}

// asciiUpper upper-cases ASCII letters only, so that any bytes, split
// anywhere, map the same way.
func asciiUpper(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func TestExtProcBodyReplyHeaderMutation(t *testing.T) {
	conn := NewExtProcServer(t, process(func(n int, req *extprocv3.ProcessingRequest) ([]*extprocv3.ProcessingResponse, error) {
		if b := req.GetResponseBody(); b != nil {
			return one(setBody(req, string(b.GetBody()), &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{set("x-late", "1")}}))
		}
		return one(cont(req))
	}))
	tests := []struct {
		name string
		mode filterv3.ProcessingMode_BodySendMode
		want bool
	}{
		{"buffered: headers held, applied", buffered, true},
		{"streamed: headers gone, ignored", streamedM, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ExtProc(t, conn, ExtProcConfig{Mode: modes(none, tt.mode)}, exchange(post(listRequest), ok200("ab", "cd")))
			if res.Err != nil || res.Downstream.Has("x-late") != tt.want || string(res.Downstream.Body()) != "abcd" {
				t.Fatalf("err %v x-late %v body %q", res.Err, res.Downstream.Has("x-late"), res.Downstream.Body())
			}
		})
	}
}
