package envoytest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// checkFunc is the decision of the in-test authorization server.
type checkFunc func(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error)

type fakeAuthz struct {
	authv3.UnimplementedAuthorizationServer
	check checkFunc
}

func (f *fakeAuthz) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return f.check(ctx, req)
}

// startAuthz serves check as an ext_authz gRPC server on 127.0.0.1:0.
func startAuthz(t testing.TB, check checkFunc) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	authv3.RegisterAuthorizationServer(s, &fakeAuthz{check: check})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// upstreamSeen is what reached the protected workload.
type upstreamSeen struct {
	calls  int
	header http.Header
	host   string
	uri    string
	body   string
}

// upstreamRecorder is the protected workload: it records what reached it.
type upstreamRecorder struct {
	mu   sync.Mutex
	seen upstreamSeen
}

func (u *upstreamRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen = upstreamSeen{calls: u.seen.calls + 1, header: r.Header.Clone(), host: r.Host, uri: r.URL.RequestURI(), body: string(body)}
	u.mu.Unlock()
	w.Header().Set("X-Upstream", "yes")
	w.Header().Set("X-Authz", "upstream-value")
	io.WriteString(w, "from upstream")
}

func (u *upstreamRecorder) snapshot() upstreamSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen
}

func okResponse(ok *authv3.OkHttpResponse) *authv3.CheckResponse {
	return &authv3.CheckResponse{
		Status:       &status.Status{Code: int32(codes.OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok},
	}
}

func deniedResponse(code codes.Code, d *authv3.DeniedHttpResponse) *authv3.CheckResponse {
	resp := &authv3.CheckResponse{Status: &status.Status{Code: int32(code)}}
	if d != nil {
		resp.HttpResponse = &authv3.CheckResponse_DeniedResponse{DeniedResponse: d}
	}
	return resp
}

func answer(resp *authv3.CheckResponse, err error) checkFunc {
	return func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) { return resp, err }
}

// clientRequest is what the test client sends through the proxy.
type clientRequest struct {
	method, path string
	header       map[string]string
	body         string
}

func (c clientRequest) send(t *testing.T, p *Proxy) (*http.Response, string) {
	t.Helper()
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(method, p.URL+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := p.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestProxy(t *testing.T) {
	blockUntilDeadline := func(ctx context.Context, _ *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tests := []struct {
		name         string
		check        checkFunc
		opts         ProxyOptions
		req          clientRequest
		wantStatus   int
		wantHeader   map[string]string // on the client response
		wantBody     string
		wantUpstream bool
		wantChecks   int
		assert       func(t *testing.T, p *Proxy, up upstreamSeen)
	}{
		{
			name: "allow: identity header replaces the forged one, response header added",
			check: answer(okResponse(&authv3.OkHttpResponse{
				Headers:              []*corev3.HeaderValueOption{hv("x-user-id", "alice", false)},
				HeadersToRemove:      []string{"x-session-id", "authorization"},
				ResponseHeadersToAdd: []*corev3.HeaderValueOption{hv("x-authz", "checked", false), hv("x-trace", "t1", true)},
			}), nil),
			req: clientRequest{path: "/mcp?x=1", header: map[string]string{
				"X-User-Id": "forged", "X-Session-Id": "forged", "Authorization": "Bearer opaque-test-credential",
			}},
			wantStatus:   http.StatusOK,
			wantHeader:   map[string]string{"X-Upstream": "yes", "X-Authz": "checked", "X-Trace": "t1"},
			wantBody:     "from upstream",
			wantUpstream: true,
			wantChecks:   1,
			assert: func(t *testing.T, p *Proxy, up upstreamSeen) {
				if got := up.header.Values("X-User-Id"); !reflect.DeepEqual(got, []string{"alice"}) {
					t.Errorf("upstream x-user-id = %q, want [alice]", got)
				}
				for _, k := range []string{"X-Session-Id", "Authorization"} {
					if up.header.Get(k) != "" {
						t.Errorf("upstream still got %s", k)
					}
				}
				checked := httpOf(p.LastCheck().Request).GetHeaders()
				if up.header.Get("X-Request-Id") == "" || up.header.Get("X-Request-Id") != checked["x-request-id"] {
					t.Errorf("upstream x-request-id %q, check saw %q", up.header.Get("X-Request-Id"), checked["x-request-id"])
				}
				if up.header.Get("X-Forwarded-Proto") != "http" {
					t.Errorf("upstream x-forwarded-proto = %q", up.header.Get("X-Forwarded-Proto"))
				}
				if want := strings.TrimPrefix(p.URL, "http://"); up.host != want || checked[":authority"] != want {
					t.Errorf("upstream host %q, :authority %q, want the client's %q", up.host, checked[":authority"], want)
				}
				if up.uri != "/mcp?x=1" || checked[":path"] != "/mcp?x=1" {
					t.Errorf("upstream uri %q, :path %q", up.uri, checked[":path"])
				}
				if checked["authorization"] != "Bearer opaque-test-credential" {
					t.Error("the check did not see the client's credential")
				}
			},
		},
		{
			name: "deny: 401 with WWW-Authenticate and a JSON-RPC body",
			check: answer(deniedResponse(codes.Unauthenticated, &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{
					hv("www-authenticate", `Bearer resource_metadata="http://mcp.example.test/.well-known/oauth-protected-resource"`, false),
					hv("content-type", "application/json", false),
				},
				Body: `{"jsonrpc":"2.0","error":{"code":-32001,"message":"unauthorized"},"id":1}`,
			}), nil),
			req:        clientRequest{method: "POST", path: "/mcp", body: `{"jsonrpc":"2.0","method":"tools/list","id":1}`},
			wantStatus: http.StatusUnauthorized,
			wantHeader: map[string]string{
				"Www-Authenticate": `Bearer resource_metadata="http://mcp.example.test/.well-known/oauth-protected-resource"`,
				"Content-Type":     "application/json",
			},
			wantBody:   `{"jsonrpc":"2.0","error":{"code":-32001,"message":"unauthorized"},"id":1}`,
			wantChecks: 1,
		},
		{
			name:       "UNAUTHENTICATED without an HTTP status is still 403",
			check:      answer(deniedResponse(codes.Unauthenticated, nil), nil),
			wantStatus: http.StatusForbidden,
			wantChecks: 1,
		},
		{
			name:       "a gRPC error fails closed with 403",
			check:      answer(nil, grpcstatus.Error(codes.PermissionDenied, "no")),
			wantStatus: http.StatusForbidden,
			wantChecks: 1,
			assert: func(t *testing.T, p *Proxy, _ upstreamSeen) {
				if c := p.LastCheck(); grpcstatus.Code(c.Err) != codes.PermissionDenied || c.Response != nil {
					t.Errorf("recorded check err %v response %v", c.Err, c.Response)
				}
			},
		},
		{
			name:       "a gRPC error with status_on_error 503",
			check:      answer(nil, grpcstatus.Error(codes.Internal, "boom")),
			opts:       ProxyOptions{StatusOnError: http.StatusServiceUnavailable},
			wantStatus: http.StatusServiceUnavailable,
			wantChecks: 1,
		},
		{
			name:         "a gRPC error with failure_mode_allow goes through",
			check:        answer(nil, grpcstatus.Error(codes.PermissionDenied, "denial returned as an error")),
			opts:         ProxyOptions{FailureModeAllow: true, FailureModeAllowHeaderAdd: true},
			wantStatus:   http.StatusOK,
			wantBody:     "from upstream",
			wantUpstream: true,
			wantChecks:   1,
			assert: func(t *testing.T, _ *Proxy, up upstreamSeen) {
				if up.header.Get("X-Envoy-Auth-Failure-Mode-Allowed") != "true" {
					t.Error("upstream did not get x-envoy-auth-failure-mode-allowed")
				}
			},
		},
		{
			name:       "a timeout fails closed",
			check:      blockUntilDeadline,
			opts:       ProxyOptions{Timeout: 20 * time.Millisecond},
			wantStatus: http.StatusForbidden,
			wantChecks: 1,
			assert: func(t *testing.T, p *Proxy, _ upstreamSeen) {
				if code := grpcstatus.Code(p.LastCheck().Err); code != codes.DeadlineExceeded {
					t.Errorf("recorded error code %v, want DeadlineExceeded", code)
				}
			},
		},
		{
			name:         "a timeout with failure_mode_allow goes through",
			check:        blockUntilDeadline,
			opts:         ProxyOptions{Timeout: 20 * time.Millisecond, FailureModeAllow: true},
			wantStatus:   http.StatusOK,
			wantUpstream: true,
			wantBody:     "from upstream",
			wantChecks:   1,
			assert: func(t *testing.T, _ *Proxy, up upstreamSeen) {
				if up.header.Get("X-Envoy-Auth-Failure-Mode-Allowed") != "" {
					t.Error("failure-mode header added without failure_mode_allow_header_add")
				}
			},
		},
		{
			name: "error_response: its status and body unless failure mode allows",
			check: answer(&authv3.CheckResponse{
				Status:       &status.Status{Code: int32(codes.Unavailable)},
				HttpResponse: &authv3.CheckResponse_ErrorResponse{ErrorResponse: &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}, Body: "jwks down"}},
			}, nil),
			wantStatus: http.StatusServiceUnavailable,
			wantBody:   "jwks down",
			wantChecks: 1,
		},
		{
			name:       "body larger than max_request_bytes: 413 before any check",
			check:      answer(okResponse(nil), nil),
			opts:       ProxyOptions{Build: BuildOptions{WithBody: true, MaxRequestBytes: 8}},
			req:        clientRequest{method: "POST", path: "/mcp", body: "0123456789"},
			wantStatus: http.StatusRequestEntityTooLarge,
			wantChecks: 0,
		},
		{
			name:  "per-route partial body: the check sees the cut, upstream the whole body",
			check: answer(okResponse(nil), nil),
			opts: ProxyOptions{Route: func(*http.Request) RouteSettings {
				return RouteSettings{WithBody: true, MaxRequestBytes: 4, AllowPartial: true}
			}},
			req:          clientRequest{method: "POST", path: "/a2a", body: "hello world"},
			wantStatus:   http.StatusOK,
			wantUpstream: true,
			wantBody:     "from upstream",
			wantChecks:   1,
			assert: func(t *testing.T, p *Proxy, up upstreamSeen) {
				h := httpOf(p.LastCheck().Request)
				if h.GetBody() != "hell" || h.GetHeaders()[headerPartialBody] != "true" {
					t.Errorf("check body %q partial %q", h.GetBody(), h.GetHeaders()[headerPartialBody])
				}
				if up.body != "hello world" {
					t.Errorf("upstream body %q", up.body)
				}
			},
		},
		{
			name:  "per-route context extensions override the filter-wide ones",
			check: answer(okResponse(nil), nil),
			opts: ProxyOptions{
				Build: BuildOptions{ContextExtensions: map[string]string{"virtual_host": "mcp", "kind": "default"}},
				Route: func(r *http.Request) RouteSettings {
					return RouteSettings{ContextExtensions: map[string]string{"kind": "tools"}}
				},
			},
			wantStatus:   http.StatusOK,
			wantUpstream: true,
			wantBody:     "from upstream",
			wantChecks:   1,
			assert: func(t *testing.T, p *Proxy, _ upstreamSeen) {
				got := p.LastCheck().Request.GetAttributes().GetContextExtensions()
				if want := map[string]string{"virtual_host": "mcp", "kind": "tools"}; !reflect.DeepEqual(got, want) {
					t.Errorf("context_extensions %v, want %v", got, want)
				}
			},
		},
		{
			name:         "disabled route skips the check",
			check:        answer(deniedResponse(codes.PermissionDenied, nil), nil),
			opts:         ProxyOptions{Route: func(*http.Request) RouteSettings { return RouteSettings{Disabled: true} }},
			wantStatus:   http.StatusOK,
			wantUpstream: true,
			wantBody:     "from upstream",
			wantChecks:   0,
		},
		{
			name: "query parameters rewritten before forwarding",
			check: answer(okResponse(&authv3.OkHttpResponse{
				QueryParametersToSet:    []*corev3.QueryParameter{{Key: "tenant", Value: "t1"}},
				QueryParametersToRemove: []string{"access_token"},
			}), nil),
			req:          clientRequest{path: "/mcp?access_token=opaque&b=2"},
			wantStatus:   http.StatusOK,
			wantUpstream: true,
			wantBody:     "from upstream",
			wantChecks:   1,
			assert: func(t *testing.T, _ *Proxy, up upstreamSeen) {
				if up.uri != "/mcp?b=2&tenant=t1" {
					t.Errorf("upstream uri %q", up.uri)
				}
			},
		},
		{
			name:       "an invalid header value answers 500",
			check:      answer(okResponse(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-user-id", "a\nb", false)}}), nil),
			wantStatus: http.StatusInternalServerError,
			wantChecks: 1,
		},
		{
			name:         "a response without status is an allow, as in Envoy",
			check:        answer(&authv3.CheckResponse{}, nil),
			wantStatus:   http.StatusOK,
			wantUpstream: true,
			wantBody:     "from upstream",
			wantChecks:   1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := &upstreamRecorder{}
			p := NewProxy(t, startAuthz(t, tt.check), up, tt.opts)
			resp, body := tt.req.send(t, p)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d (body %q)", resp.StatusCode, tt.wantStatus, body)
			}
			for k, v := range tt.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("response header %s = %q, want %q", k, got, v)
				}
			}
			if tt.wantBody != "" && body != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
			got := up.snapshot()
			if (got.calls > 0) != tt.wantUpstream {
				t.Errorf("upstream calls = %d, want reached=%v", got.calls, tt.wantUpstream)
			}
			if n := p.CheckCount(); n != tt.wantChecks {
				t.Errorf("checks = %d, want %d", n, tt.wantChecks)
			}
			if tt.assert != nil {
				tt.assert(t, p, got)
			}
		})
	}
}

func TestProxyHTTP2(t *testing.T) {
	up := &upstreamRecorder{}
	p := NewProxy(t, startAuthz(t, answer(okResponse(nil), nil)), up, ProxyOptions{HTTP2: true})
	resp, _ := clientRequest{path: "/mcp"}.send(t, p)
	if resp.ProtoMajor != 2 {
		t.Fatalf("client spoke %s, want HTTP/2", resp.Proto)
	}
	h := httpOf(p.LastCheck().Request)
	if h.GetProtocol() != "HTTP/2" || h.GetScheme() != "http" {
		t.Errorf("protocol %q scheme %q", h.GetProtocol(), h.GetScheme())
	}
	assertEnvoyShape(t, p.LastCheck().Request)
}

func TestProxyUnreachableAuthz(t *testing.T) {
	addr := refusingAddr(t)
	up := &upstreamRecorder{}
	p := NewProxy(t, addr, up, ProxyOptions{Timeout: time.Second})
	if resp, _ := (clientRequest{path: "/"}).send(t, p); resp.StatusCode != http.StatusForbidden {
		t.Errorf("status = %d, want 403", resp.StatusCode)
	}
	if up.snapshot().calls != 0 {
		t.Error("request reached the upstream")
	}
}

// recordingTB records the failures the proxy reports instead of failing.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errors...)
}

func TestProxyContractBreachFailsTheTest(t *testing.T) {
	tests := []struct {
		name         string
		ok           *authv3.OkHttpResponse
		wantFailures int
	}{
		{name: "unset append", ok: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hvUnset("x-user-id", "alice")}}, wantFailures: 1},
		{name: "invalid value is Envoy's 500, not a contract breach", ok: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-user-id", "a\x00", false)}}, wantFailures: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordingTB{TB: t}
			up := &upstreamRecorder{}
			p := NewProxy(rec, startAuthz(t, answer(okResponse(tt.ok), nil)), up, ProxyOptions{})
			resp, _ := clientRequest{path: "/"}.send(t, p)
			if resp.StatusCode != http.StatusInternalServerError {
				t.Errorf("status = %d, want 500", resp.StatusCode)
			}
			if got := rec.failures(); len(got) != tt.wantFailures {
				t.Errorf("test failures reported = %q, want %d", got, tt.wantFailures)
			}
			if up.snapshot().calls != 0 {
				t.Error("request reached the upstream")
			}
		})
	}
}

// refusingAddr returns a loopback address that refuses connections: a TCP
// socket bound to it but never listening holds the port for the test, so no
// other server can take it meanwhile (a closed listener's port can be).
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
