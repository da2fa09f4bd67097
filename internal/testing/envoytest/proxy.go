package envoytest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultTimeout is Envoy's ext_authz gRPC timeout when grpc_service.timeout
// is unset.
const DefaultTimeout = 200 * time.Millisecond

// ProxyOptions configure a Proxy like an ext_authz filter configuration.
type ProxyOptions struct {
	// Build holds the filter-wide settings: body buffering, raw header
	// encoding, peers, metadata and connection manager behaviour. Its
	// ContextExtensions act as the virtual host's; a route's override them
	// key by key.
	Build BuildOptions
	// Route returns the per-route settings for a request (nil: none).
	Route func(r *http.Request) RouteSettings
	// Timeout is the per-call deadline (DefaultTimeout when zero).
	Timeout time.Duration
	// FailureModeAllow lets a request through when the call fails (gRPC
	// error, timeout, unreachable server, error_response).
	// FailureModeAllowHeaderAdd then adds x-envoy-auth-failure-mode-allowed:
	// true to the upstream request.
	FailureModeAllow          bool
	FailureModeAllowHeaderAdd bool
	// StatusOnError is the status of the reply to a failed call when failure
	// mode does not allow it (403 when zero, as in Envoy).
	StatusOnError int
	// HTTP2 makes the proxy accept cleartext HTTP/2 (h2c) and Client speak
	// it, so the CheckRequest says "HTTP/2".
	HTTP2 bool
}

// RouteSettings are the ExtAuthzPerRoute settings of the route a request
// matched.
type RouteSettings struct {
	// Disabled skips the check: the request goes upstream with only the
	// connection manager's changes (x-request-id, x-forwarded-*).
	Disabled bool
	// ContextExtensions are merged over the filter-wide ones.
	ContextExtensions map[string]string
	// WithBody replaces the filter's body settings with these. (Envoy reads
	// pack_as_bytes from the filter only; here the route's value is used.)
	WithBody        bool
	MaxRequestBytes int
	AllowPartial    bool
	PackAsBytes     bool
}

// Check is one call the proxy made to the authorization server.
type Check struct {
	Request  *authv3.CheckRequest
	Response *authv3.CheckResponse // nil when the call failed
	Err      error                 // the gRPC error, nil on success
}

// Proxy is a front proxy that behaves like Envoy with the ext_authz filter in
// front of an upstream: for every request it calls
// envoy.service.auth.v3.Authorization/Check over a plaintext HTTP/2 gRPC
// connection, then replies with Envoy's local reply on a denial or forwards
// the mutated request upstream on an allow.
//
// Like Envoy it answers 413 without a check when a body to buffer is over
// the limit and partial messages are off, and 503 when the upstream cannot
// be reached. An answer that breaks this package's contract (ErrAppendUnset,
// ErrRawValue) fails the test and gets a 500; an invalid mutation gets a 500
// only, as from Envoy.
type Proxy struct {
	// URL is the proxy's base URL, http://127.0.0.1:port.
	URL string

	t         testing.TB
	opts      ProxyOptions
	authz     authv3.AuthorizationClient
	upstream  *httputil.ReverseProxy
	client    *http.Client
	mu        sync.Mutex
	last      Check
	callCount int
}

// NewProxy starts a Proxy in front of upstream, which it serves on its own
// 127.0.0.1 listener. authzAddr is the ext_authz gRPC server's host:port.
// Everything is shut down by t.Cleanup.
func NewProxy(t testing.TB, authzAddr string, upstream http.Handler, opts ProxyOptions) *Proxy {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatalf("envoytest: upstream URL: %v", err)
	}
	return NewProxyToURL(t, authzAddr, u, opts)
}

// NewProxyToURL is NewProxy for an upstream that already listens at upstream.
func NewProxyToURL(t testing.TB, authzAddr string, upstream *url.URL, opts ProxyOptions) *Proxy {
	t.Helper()
	conn, err := grpc.NewClient(authzAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("envoytest: ext_authz client for %q: %v", authzAddr, err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.Connect() // dial now, as Envoy keeps its cluster connected, so the first call is not slower
	if err := opts.Build.validate(); err != nil {
		t.Fatalf("%v", err)
	}

	upstreamTransport := &http.Transport{}
	t.Cleanup(upstreamTransport.CloseIdleConnections)
	p := &Proxy{
		t:     t,
		opts:  opts,
		authz: authv3.NewAuthorizationClient(conn),
	}
	p.upstream = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			// Envoy keeps the client's authority and forwards the
			// x-forwarded-* headers its connection manager set, which
			// Rewrite has stripped from Out.
			pr.Out.Host = pr.In.Host
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded"} {
				if v, ok := pr.In.Header[k]; ok {
					pr.Out.Header[k] = v
				}
			}
		},
		Transport: upstreamTransport,
		ModifyResponse: func(resp *http.Response) error {
			muts, _ := resp.Request.Context().Value(responseMutationsKey{}).([]headerMutation)
			for _, m := range muts {
				if m.appendValue {
					resp.Header.Add(m.key, m.value)
				} else {
					resp.Header.Set(m.key, m.value)
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			writeLocalReply(w, http.StatusServiceUnavailable, nil, []byte("upstream connect error"))
		},
	}

	srv := httptest.NewUnstartedServer(http.HandlerFunc(p.serveHTTP))
	clientTransport := &http.Transport{}
	if opts.HTTP2 {
		var server, client http.Protocols
		server.SetHTTP1(true)
		server.SetUnencryptedHTTP2(true)
		client.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = &server
		clientTransport.Protocols = &client
	}
	p.client = &http.Client{Transport: clientTransport}
	t.Cleanup(clientTransport.CloseIdleConnections)
	srv.Start()
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Client returns an HTTP client for the proxy (cleartext HTTP/2 with
// ProxyOptions.HTTP2). It follows no proxy settings from the environment.
func (p *Proxy) Client() *http.Client { return p.client }

// LastCheck returns the last call made to the authorization server (zero
// before the first).
func (p *Proxy) LastCheck() Check {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// CheckCount returns how many calls the proxy made to the authorization
// server.
func (p *Proxy) CheckCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.callCount
}

type responseMutationsKey struct{}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var route RouteSettings
	if p.opts.Route != nil {
		route = p.opts.Route(r)
	}
	opts := p.buildOptions(route)
	if err := opts.validate(); err != nil {
		p.t.Errorf("envoytest: route settings for %s: %v", r.URL.Path, err)
		writeLocalReply(w, http.StatusInternalServerError, nil, nil)
		return
	}
	d := newDownstream(r, &opts)
	out := r.Clone(r.Context())
	out.Header = d.upstreamHeader()
	if route.Disabled {
		p.forward(w, out, nil)
		return
	}

	var body []byte
	if opts.WithBody && !d.websocket && r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		// Envoy buffers up to the limit; one byte more tells whether the
		// body is longer. The rest streams upstream behind what was read.
		b, err := io.ReadAll(io.LimitReader(r.Body, int64(opts.MaxRequestBytes)+1))
		if err != nil {
			writeLocalReply(w, http.StatusBadRequest, nil, nil)
			return
		}
		body = b
		out.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), r.Body))
	}
	checkReq, err := d.checkRequest(body, &opts)
	if errors.Is(err, ErrPayloadTooLarge) {
		writeLocalReply(w, http.StatusRequestEntityTooLarge, nil, []byte("Payload Too Large"))
		return
	}
	if err != nil {
		p.t.Errorf("envoytest: building CheckRequest: %v", err)
		writeLocalReply(w, http.StatusInternalServerError, nil, nil)
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), p.timeout())
	resp, err := p.authz.Check(ctx, checkReq)
	cancel()
	p.record(Check{Request: checkReq, Response: resp, Err: err})

	switch {
	case err != nil:
		p.failed(w, out, nil)
	case resp.GetStatus().GetCode() == int32(codes.OK):
		// A CheckResponse without status is an allow, as in Envoy.
		muts, err := applyOK(out, resp.GetOkResponse())
		if err != nil {
			if !errors.Is(err, ErrInvalidMutation) {
				p.t.Errorf("envoytest: ext_authz answer breaks the contract: %v", err)
			}
			writeLocalReply(w, http.StatusInternalServerError, nil, nil)
			return
		}
		p.forward(w, out, muts)
	case resp.GetErrorResponse() != nil:
		p.failed(w, out, resp.GetErrorResponse())
	default:
		status, header, body := DeniedResponse(resp.GetDeniedResponse())
		writeLocalReply(w, status, header, body)
	}
}

// failed handles a call that failed or returned error_response: failure mode
// allow forwards the request, otherwise the client gets status_on_error (or
// error_response's status, headers and body when they are valid).
func (p *Proxy) failed(w http.ResponseWriter, out *http.Request, errResp *authv3.DeniedHttpResponse) {
	if p.opts.FailureModeAllow {
		if p.opts.FailureModeAllowHeaderAdd {
			out.Header.Set(headerFailureModeAllows, "true")
		}
		p.forward(w, out, nil)
		return
	}
	statusOnError := p.opts.StatusOnError
	if statusOnError == 0 {
		statusOnError = http.StatusForbidden
	}
	if errResp != nil {
		if status, header, body, ok := localReply(errResp, statusOnError); ok {
			writeLocalReply(w, status, header, body)
			return
		}
	}
	writeLocalReply(w, statusOnError, nil, nil)
}

func (p *Proxy) forward(w http.ResponseWriter, out *http.Request, responseMutations []headerMutation) {
	if len(responseMutations) > 0 {
		out = out.WithContext(context.WithValue(out.Context(), responseMutationsKey{}, responseMutations))
	}
	p.upstream.ServeHTTP(w, out)
}

func (p *Proxy) record(c Check) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = c
	p.callCount++
}

func (p *Proxy) timeout() time.Duration {
	if p.opts.Timeout > 0 {
		return p.opts.Timeout
	}
	return DefaultTimeout
}

// buildOptions merges route settings over the filter-wide ones.
func (p *Proxy) buildOptions(route RouteSettings) BuildOptions {
	opts := p.opts.Build
	if len(route.ContextExtensions) > 0 {
		merged := maps.Clone(opts.ContextExtensions)
		if merged == nil {
			merged = make(map[string]string, len(route.ContextExtensions))
		}
		maps.Copy(merged, route.ContextExtensions)
		opts.ContextExtensions = merged
	}
	if route.WithBody {
		opts.WithBody = true
		opts.MaxRequestBytes = route.MaxRequestBytes
		opts.AllowPartial = route.AllowPartial
		opts.PackAsBytes = route.PackAsBytes
	}
	return opts
}

// writeLocalReply writes a reply that Envoy generates itself.
func writeLocalReply(w http.ResponseWriter, status int, header http.Header, body []byte) {
	for k, vs := range header {
		w.Header()[k] = vs
	}
	if len(body) > 0 && w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/plain")
	}
	w.WriteHeader(status)
	w.Write(body)
}
