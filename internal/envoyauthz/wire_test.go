package envoyauthz

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/peer"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testcert"
	"github.com/extauthz/extauthz/internal/testing/testtoken"

	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

// wireRequests are CheckRequests of every shape the wire decoder must read
// exactly like the generated code.
func wireRequests(t testing.TB) map[string]*authv3.CheckRequest {
	out := map[string]*authv3.CheckRequest{}
	caps, err := envoytest.Captures()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		out["capture "+c.Name] = c.Request
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	r, _ := http.NewRequest("POST", "http://mcp.example.com/mcp?x=1", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer a.b.c")
	r.Header.Add("X-Multi", "1")
	r.Header.Add("X-Multi", "2")
	opts := map[string]envoytest.BuildOptions{
		"headers map with body":        {WithBody: true, MaxRequestBytes: 1 << 16},
		"raw header map with raw body": {WithBody: true, MaxRequestBytes: 1 << 16, EncodeRawHeaders: true, PackAsBytes: true},
		"partial body":                 {WithBody: true, MaxRequestBytes: 10, AllowPartial: true},
		"mTLS peer and extensions":     {SourcePrincipal: "spiffe://cluster.local/ns/a/sa/b", ContextExtensions: map[string]string{"route": "r", "x": "y"}},
	}
	for name, o := range opts {
		out[name] = envoytest.BuildCheckRequest(r.Clone(context.Background()), body, o)
	}
	// A name with an underscore (Request.UnderscoreNames), merged and raw.
	underscored := r.Clone(context.Background())
	underscored.Header["X_user_id"] = []string{"mallory"}
	out["an underscore name"] = envoytest.BuildCheckRequest(underscored, body, envoytest.BuildOptions{})
	out["an underscore name, raw header map"] = envoytest.BuildCheckRequest(underscored, body, envoytest.BuildOptions{EncodeRawHeaders: true})
	addressed := envoytest.BuildCheckRequest(r.Clone(context.Background()), body, envoytest.BuildOptions{})
	addressed.Attributes.Source = &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
		SocketAddress: &corev3.SocketAddress{Address: "10.1.2.3", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}}}
	out["peer address"] = addressed

	// include_peer_certificate: the client's leaf certificate, as Envoy
	// sends it and as a hostile peer of the gRPC port could.
	tlsReq := r.Clone(context.Background())
	tlsReq.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{testcert.New(t, "client").Leaf}}
	out["client certificate"] = envoytest.BuildCheckRequest(tlsReq, body, envoytest.BuildOptions{IncludePeerCertificate: true, SourcePrincipal: "spiffe://cluster.local/ns/a/sa/b"})
	for name, c := range map[string]string{
		"client certificate not PEM":          "not%20a%20certificate",
		"client certificate a private key":    testcert.Escape("-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n"),
		"client certificate broken escape":    "-----BEGIN%2",
		"client certificate over the bound":   strings.Repeat("A", peer.MaxCertBytes+1),
		"client certificate, raw PEM":         string(testcert.New(t, "raw").CertPEM),
		"client certificate with a chain":     testcert.URLEncodedPEM(testcert.New(t, "a").DER) + testcert.URLEncodedPEM(testcert.New(t, "b").DER),
		"client certificate with a junk tail": testcert.URLEncodedPEM(testcert.New(t, "a").DER) + "%00",
	} {
		req := envoytest.BuildCheckRequest(r.Clone(context.Background()), body, envoytest.BuildOptions{})
		req.Attributes.Source.Certificate = c
		out[name] = req
	}
	return out
}

func TestWireDecodeMatchesProto(t *testing.T) {
	for name, req := range wireRequests(t) {
		t.Run(name, func(t *testing.T) {
			b, err := proto.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			var w wireRequest
			if err := w.decode(bytes.Clone(b)); err != nil {
				t.Fatal(err)
			}
			got := *w.request()
			want := Input(req)
			if strings.Contains(name, "underscore") && !got.UnderscoreNames {
				t.Error("the underscore name is not noted")
			}
			// X-Multi is sent twice: a raw header map shows it, a merged
			// one cannot.
			if raw := req.GetAttributes().GetRequest().GetHttp().GetHeaderMap() != nil; raw != slices.Equal(got.Repeated, []string{"x-multi"}) {
				t.Errorf("repeated %q from a raw header map: %v", got.Repeated, raw)
			}
			normalize(&got)
			normalize(&want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("wire decode differs:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// normalize makes nil and empty equal for comparison.
func normalize(r *check.Request) {
	if len(r.Body) == 0 {
		r.Body = nil
	}
	if len(r.ContextExtensions) == 0 {
		r.ContextExtensions = nil
	}
	if len(r.Headers) == 0 {
		r.Headers = nil
	}
}

func FuzzWireDecode(f *testing.F) {
	for _, req := range wireRequests(f) {
		b, _ := proto.Marshal(req)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var w wireRequest
		werr := w.decode(bytes.Clone(b))
		var req authv3.CheckRequest
		perr := proto.Unmarshal(b, &req)
		if perr == nil && werr != nil {
			t.Fatalf("the protobuf library reads %x, the wire decoder refuses it: %v", b, werr)
		}
		if perr != nil || werr != nil {
			return // malformed (or invalid UTF-8 the generated code refuses): nothing to compare
		}
		got, want := *w.request(), Input(&req)
		normalize(&got)
		normalize(&want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("wire decode differs:\n got %+v\nwant %+v", got, want)
		}
	})
}

// wireClient serves srv on a gRPC server with the wire path (Register), on
// a loopback port of its own, and returns a client of it; both end with
// the test.
func wireClient(t *testing.T, srv *Server) authv3.AuthorizationClient {
	t.Helper()
	gs := grpc.NewServer(ServerOptions()...)
	Register(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return authv3.NewAuthorizationClient(conn)
}

// TestWirePathOverGRPC: a real gRPC client against Register; repeated checks
// of one conversation are answered with the pre-encoded response, which must
// decode to the same message as the first.
func TestWirePathOverGRPC(t *testing.T) {
	pl := pipelinetest.New(t, "issuers: [{name: a, secret: "+secret+"}]\nroutes: [{name: r, default: true, issuers: [a]}]\n", check.Deps{}, check.Options{})
	client := wireClient(t, NewServer(pl))
	tok := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "session_id": "s1", "exp": time.Now().Add(time.Hour).Unix()})
	var first *authv3.CheckResponse
	for i := range 4 {
		resp, err := client.Check(context.Background(), checkRequest(map[string]string{"authorization": "Bearer " + tok, "x-user-id": "mallory"}))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetStatus().GetCode() != 0 {
			t.Fatalf("denied: %v", resp)
		}
		var user string
		for _, h := range resp.GetOkResponse().GetHeaders() {
			if h.GetHeader().GetKey() == "x-user-id" {
				user = h.GetHeader().GetValue()
			}
			//lint:ignore SA1019 the service sets append, deprecated but read by every Envoy
			if h.GetAppend() == nil || h.GetAppend().GetValue() {
				t.Fatal("append must be explicitly false")
			}
		}
		if user != "alice" {
			t.Fatalf("x-user-id %q", user)
		}
		switch i {
		case 0:
		case 1:
			first = resp // the first cache hit; later ones are pre-encoded copies of it
		default:
			if !proto.Equal(resp, first) {
				t.Fatalf("pre-encoded response differs:\n%v\n%v", resp, first)
			}
		}
	}
	// A denial and a malformed request still get clear answers.
	resp, err := client.Check(context.Background(), checkRequest(nil))
	if err != nil || resp.GetDeniedResponse().GetStatus().GetCode() != 401 {
		t.Fatalf("missing token: %v %v", resp, err)
	}
	resp, err = client.Check(context.Background(), &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{HeaderMap: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":path", RawValue: []byte("/")}}}}}}})
	if err != nil || resp.GetStatus().GetCode() == 0 {
		t.Fatalf("request without a token allowed: %v %v", resp, err)
	}
	if !strings.Contains(resp.GetDeniedResponse().GetBody(), "missing_token") {
		t.Fatalf("body %q", resp.GetDeniedResponse().GetBody())
	}
}

func BenchmarkWireDecode(b *testing.B) {
	req := checkRequest(map[string]string{"authorization": "Bearer a.b.c"})
	enc, _ := proto.Marshal(req)
	b.Run("wire", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var w wireRequest
			w.decode(bytes.Clone(enc))
			w.request()
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r authv3.CheckRequest
			proto.Unmarshal(enc, &r)
			Input(&r)
		}
	})
}

// TestWireSourceAddress: the peer's address reaches the request from either
// decoder, as protobuf merges a repeated address.
func TestWireSourceAddress(t *testing.T) {
	req := wireRequests(t)["peer address"]
	if got := Input(req).SourceAddress; got != "10.1.2.3" {
		t.Fatalf("Input: SourceAddress %q", got)
	}
	b, _ := proto.Marshal(req)
	// A second Peer.address that is a pipe clears the socket address.
	pipe, _ := proto.Marshal(&authv3.CheckRequest{Attributes: &authv3.AttributeContext{Source: &authv3.AttributeContext_Peer{
		Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/tmp/s"}}}}}})
	for name, tt := range map[string]struct {
		b    []byte
		want string
	}{"socket": {b, "10.1.2.3"}, "then a pipe": {append(bytes.Clone(b), pipe...), ""}} {
		var w wireRequest
		if err := w.decode(tt.b); err != nil {
			t.Fatal(err)
		}
		var m authv3.CheckRequest
		if err := proto.Unmarshal(tt.b, &m); err != nil {
			t.Fatal(err)
		}
		if got, want := w.request().SourceAddress, Input(&m).SourceAddress; got != tt.want || want != tt.want {
			t.Errorf("%s: wire %q, proto %q, want %q", name, got, want, tt.want)
		}
	}
}

// TestWireInterceptedCostsNothing: the service's interceptors (panic
// recovery) wrap every check; a cache hit through them allocates no more
// than one without, and its request still goes back to the pool.
func TestWireInterceptedCostsNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	srv := verdictFixture(t, 16)
	enc, err := proto.Marshal(typicalRequest(typicalToken(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	dec := func(v any) error { return v.(*wireRequest).decode(enc) }
	passThrough := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(ctx, req)
	}
	ctx := context.Background()
	allocs := func(icpt grpc.UnaryServerInterceptor) float64 {
		for range 2 { // the first decides, the second memoizes
			if _, err := srv.handleWire(nil, ctx, dec, icpt); err != nil {
				t.Fatal(err)
			}
		}
		return testing.AllocsPerRun(200, func() { srv.handleWire(nil, ctx, dec, icpt) })
	}
	if plain, intercepted := allocs(nil), allocs(passThrough); intercepted > plain {
		t.Errorf("a cache hit allocates %.0f times through an interceptor, %.0f without", intercepted, plain)
	}
}
