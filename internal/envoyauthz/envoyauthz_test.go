package envoyauthz

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const secret = "envoyauthz-test-secret-0123456789abcdef"

func checkRequest(headers map[string]string) *authv3.CheckRequest {
	h := map[string]string{
		":authority": "mcp.example.com", ":method": "POST", ":path": "/mcp", ":scheme": "https",
		"content-type": "application/json", "x-request-id": "8f2d7a4e-1b2c-4d3e-9f00-123456789abc", "x-forwarded-proto": "https",
	}
	for k, v := range headers {
		h[k] = v
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "1234", Method: "POST", Headers: h, Path: "/mcp", Host: "mcp.example.com", Scheme: "https", Protocol: "HTTP/1.1",
		}},
	}}
}

func TestInput(t *testing.T) {
	tests := []struct {
		name  string
		req   *authv3.CheckRequest
		check func(t *testing.T, in check.Request)
	}{
		{
			name: "headers map and attributes",
			req:  checkRequest(map[string]string{"x-envoy-auth-partial-body": "true"}),
			check: func(t *testing.T, in check.Request) {
				if in.Host != "mcp.example.com" || in.Path != "/mcp" || in.Method != "POST" || in.Scheme != "https" || in.Protocol != "HTTP/1.1" {
					t.Errorf("attributes: %+v", in)
				}
				if in.RequestID != "8f2d7a4e-1b2c-4d3e-9f00-123456789abc" || !in.BodyPartial {
					t.Errorf("request id %q partial %v", in.RequestID, in.BodyPartial)
				}
			},
		},
		{
			name: "raw header map merged like Envoy",
			req: &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
				HeaderMap: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
					{Key: ":authority", RawValue: []byte("a.example.com")},
					{Key: ":path", RawValue: []byte("/x")},
					{Key: "X-Multi", RawValue: []byte("1")},
					{Key: "x-multi", RawValue: []byte("2")},
					{Key: "x-bin", RawValue: []byte{'a', 0xff, 'b'}},
				}},
			}}}},
			check: func(t *testing.T, in check.Request) {
				if in.Host != "a.example.com" || in.Path != "/x" {
					t.Errorf("pseudo-headers not used: %+v", in)
				}
				if got := in.Headers["x-multi"]; got != "1,2" {
					t.Errorf("x-multi = %q", got)
				}
				if got := in.Headers["x-bin"]; got != "a!b" {
					t.Errorf("x-bin = %q", got)
				}
			},
		},
		{
			name: "raw body preferred",
			req: func() *authv3.CheckRequest {
				r := checkRequest(nil)
				r.Attributes.Request.Http.RawBody = []byte(`{"a":1}`)
				r.Attributes.Request.Http.Body = "ignored"
				return r
			}(),
			check: func(t *testing.T, in check.Request) {
				if string(in.Body) != `{"a":1}` {
					t.Errorf("body %q", in.Body)
				}
			},
		},
		{
			name: "context extensions and peer",
			req: func() *authv3.CheckRequest {
				r := checkRequest(nil)
				r.Attributes.ContextExtensions = map[string]string{"route": "files"}
				r.Attributes.Source = &authv3.AttributeContext_Peer{Principal: "spiffe://cluster.local/ns/a/sa/b"}
				return r
			}(),
			check: func(t *testing.T, in check.Request) {
				if in.ContextExtensions["route"] != "files" || in.SourcePrincipal != "spiffe://cluster.local/ns/a/sa/b" {
					t.Errorf("%+v", in)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, Input(tt.req)) })
	}
}

func TestResponse(t *testing.T) {
	allowed := Response(&check.Verdict{
		Outcome: check.Allowed, Route: "r", CacheHit: true,
		Grant:  check.NewGrant(check.Identity{Route: "r", Subject: "alice", Session: "s", Issuer: "dev"}),
		Set:    []check.Header{{Name: "x-user-id", Value: "alice"}, {Name: "x-session-id", Value: "s"}},
		Remove: []string{"authorization"},
	})
	if allowed.GetStatus().GetCode() != int32(codes.OK) {
		t.Fatal("allow is not OK")
	}
	ok := allowed.GetOkResponse()
	if len(ok.GetHeaders()) != 2 || ok.GetHeadersToRemove()[0] != "authorization" {
		t.Fatalf("ok response %v", ok)
	}
	for _, h := range ok.GetHeaders() {
		//lint:ignore SA1019 the service sets append, deprecated but read by every Envoy
		if h.GetAppend() == nil || h.GetAppend().GetValue() {
			t.Fatalf("header %s: append must be explicitly false", h.GetHeader().GetKey())
		}
		if h.GetAppendAction() != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
			t.Fatalf("append_action set alongside append")
		}
	}
	md := allowed.GetDynamicMetadata().GetFields()
	if md["user"].GetStringValue() != "alice" || md["session"].GetStringValue() != "s" || md["issuer"].GetStringValue() != "dev" ||
		md["route"].GetStringValue() != "r" || !md["cached"].GetBoolValue() {
		t.Fatalf("metadata %v", md)
	}

	for _, tc := range []struct {
		outcome check.Outcome
		code    codes.Code
	}{
		{check.MissingToken, codes.Unauthenticated},
		{check.InvalidToken, codes.Unauthenticated},
		{check.InsufficientScope, codes.PermissionDenied},
		{check.NoRoute, codes.PermissionDenied},
		{check.Malformed, codes.InvalidArgument},
		{check.Unavailable, codes.Unavailable},
	} {
		t.Run(tc.outcome.String(), func(t *testing.T) {
			r := Response(&check.Verdict{Outcome: tc.outcome, Body: []byte(`{}`), ResponseHeaders: []check.Header{{Name: "www-authenticate", Value: "Bearer"}}})
			if r.GetStatus().GetCode() != int32(tc.code) {
				t.Errorf("grpc code %v, want %v", codes.Code(r.GetStatus().GetCode()), tc.code)
			}
			d := r.GetDeniedResponse()
			if int(d.GetStatus().GetCode()) != tc.outcome.Status() {
				t.Errorf("http status %d, want %d", d.GetStatus().GetCode(), tc.outcome.Status())
			}
			//lint:ignore SA1019 the service sets append, deprecated but read by every Envoy
			if d.GetBody() != "{}" || d.GetHeaders()[0].GetAppend() == nil {
				t.Errorf("denied response %v", d)
			}
		})
	}
}

// benchFixture builds a pipeline accepting HS256, RS256 and ES256 tokens.
func benchFixture(b *testing.B) (*Server, map[string]func(i int) string) {
	rs, es := testtoken.RSA(b, "rs1"), testtoken.EC(b, "es1")
	jwks := testtoken.WriteJWKS(b, b.TempDir(), rs, es)
	creds := pipelinetest.NewCredentials(b)
	doc := fmt.Sprintf(`issuers:
  - {name: dev, algorithms: [HS256], secret: %s}
  - {name: rsa, issuer: https://idp.example.com/rsa, algorithms: [RS256], jwks_file: %s}
  - {name: ec, issuer: https://idp.example.com/ec, algorithms: [ES256], jwks_file: %s}
%sroutes: [{name: bench, default: true, issuers: [dev, rsa, ec, opaque, keys]}]
cache: {max_entries: 1000000}
`, secret, jwks, jwks, creds.Issuers)
	pl := pipelinetest.New(b, doc, check.Deps{Getenv: creds.Getenv}, check.Options{})
	exp := time.Now().Add(time.Hour).Unix()
	claims := func(i int, iss string) jwt.MapClaims {
		c := jwt.MapClaims{"sub": fmt.Sprint("user-", i), "session_id": fmt.Sprint("sess-", i), "exp": exp}
		if iss != "" {
			c["iss"] = iss
		}
		return c
	}
	return NewServer(pl), map[string]func(int) string{
		// The other credential kinds have one credential each: hits only.
		"apikey":        func(int) string { return creds.APIKey },
		"introspection": func(int) string { return creds.Opaque },
		"HS256":         func(i int) string { return testtoken.HMAC(b, "HS256", secret, claims(i, "")) },
		"RS256":         func(i int) string { return rs.Sign(b, claims(i, "https://idp.example.com/rsa")) },
		"ES256":         func(i int) string { return es.Sign(b, claims(i, "https://idp.example.com/ec")) },
	}
}

// BenchmarkCheck measures one in-process Check, Envoy request to Envoy
// response, for a cache hit and a cache miss per algorithm.
func BenchmarkCheck(b *testing.B) {
	srv, mint := benchFixture(b)
	ctx := context.Background()
	for _, kind := range []string{"apikey", "introspection"} {
		b.Run("hit/"+kind, func(b *testing.B) {
			req := checkRequest(map[string]string{"authorization": "Bearer " + mint[kind](0)})
			if r, _ := srv.Check(ctx, req); r.GetStatus().GetCode() != 0 {
				b.Fatalf("denied: %v", r)
			}
			b.ReportAllocs()
			for b.Loop() {
				srv.Check(ctx, req)
			}
		})
	}
	for _, alg := range []string{"HS256", "RS256", "ES256"} {
		b.Run("hit/"+alg, func(b *testing.B) {
			req := checkRequest(map[string]string{"authorization": "Bearer " + mint[alg](0)})
			if r, _ := srv.Check(ctx, req); r.GetStatus().GetCode() != 0 {
				b.Fatalf("denied: %v", r)
			}
			b.ReportAllocs()
			for b.Loop() {
				srv.Check(ctx, req)
			}
		})
		b.Run("miss/"+alg, func(b *testing.B) {
			// Distinct tokens minted up front; each is seen once.
			const n = 2000
			reqs := make([]*authv3.CheckRequest, n)
			for i := range reqs {
				reqs[i] = checkRequest(map[string]string{"authorization": "Bearer " + mint[alg](i+1_000_000*int(time.Now().UnixNano()%1000))})
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == n {
					// Start over with fresh tokens so every check stays a miss.
					b.StopTimer()
					for j := range reqs {
						reqs[j] = checkRequest(map[string]string{"authorization": "Bearer " + mint[alg](j+int(time.Now().UnixNano()))})
					}
					i = 0
					b.StartTimer()
				}
				if r, _ := srv.Check(ctx, reqs[i]); r.GetStatus().GetCode() != 0 {
					b.Fatalf("denied: %v", r)
				}
				i++
			}
		})
	}
}

// blockingVerifier holds every verification until released.
type blockingVerifier struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingVerifier) Verify(ctx context.Context, _ string, _, _ []string) (*jwtauth.Claims, error) {
	b.entered <- struct{}{}
	<-b.release
	return &jwtauth.Claims{IssuerName: "a", Subject: "alice", ExpiresAt: time.Now().Add(time.Hour), Raw: map[string]any{"sub": "alice"}}, nil
}

// TestOverloadIsShedFast: beyond max_concurrent_checks a check is answered
// at once with the configured status instead of queueing.
func TestOverloadIsShedFast(t *testing.T) {
	bv := &blockingVerifier{entered: make(chan struct{}, 1), release: make(chan struct{})}
	pl := pipelinetest.New(t, "issuers: [{name: a, secret: "+secret+"}]\nroutes: [{name: r, default: true, issuers: [a]}]\nlimits: {max_concurrent_checks: 1, overload_status: 429}\n",
		check.Deps{Verifier: bv}, check.Options{})
	srv := NewServer(pl)
	first := make(chan *authv3.CheckResponse, 1)
	go func() {
		r, _ := srv.Check(context.Background(), checkRequest(map[string]string{"authorization": "Bearer a.b.c"}))
		first <- r
	}()
	<-bv.entered // the first check is in progress
	r, err := srv.Check(context.Background(), checkRequest(map[string]string{"authorization": "Bearer d.e.f"}))
	if err != nil || r.GetDeniedResponse().GetStatus().GetCode() != 429 || r.GetStatus().GetCode() == 0 {
		t.Fatalf("overloaded check: %v %v", r, err)
	}
	var retry bool
	for _, h := range r.GetDeniedResponse().GetHeaders() {
		retry = retry || h.GetHeader().GetKey() == "retry-after"
	}
	if !retry {
		t.Fatal("no Retry-After on an overload answer")
	}
	close(bv.release)
	if r := <-first; r.GetStatus().GetCode() != 0 {
		t.Fatalf("the check in progress was not answered normally: %v", r)
	}
	// Capacity is back.
	r, _ = srv.Check(context.Background(), checkRequest(map[string]string{"authorization": "Bearer a.b.c"}))
	if r.GetStatus().GetCode() != 0 {
		t.Fatalf("after the overload: %v", r)
	}
}
