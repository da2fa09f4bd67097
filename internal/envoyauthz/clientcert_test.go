package envoyauthz

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testcert"
)

// TestWireClientCert: source.certificate becomes Request.ClientCert, the
// same from the wire decoder and from the generated code, merged as
// protobuf merges a repeated source peer; anything that is not one PEM
// certificate gives "".
func TestWireClientCert(t *testing.T) {
	reqs := wireRequests(t)
	client := reqs["client certificate"]
	want := testcert.X5t(pemDER(t, client.GetAttributes().GetSource().GetCertificate()))
	raw := reqs["client certificate, raw PEM"]

	other := testcert.New(t, "other")
	second := func(p *authv3.AttributeContext_Peer) []byte {
		b, err := proto.Marshal(&authv3.CheckRequest{Attributes: &authv3.AttributeContext{Source: p}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	enc := func(r *authv3.CheckRequest) []byte {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"Envoy's include_peer_certificate", enc(client), want},
		{"raw PEM", enc(raw), testcert.X5t(pemDER(t, raw.GetAttributes().GetSource().GetCertificate()))},
		{"no certificate", enc(reqs["peer address"]), ""},
		{"not PEM", enc(reqs["client certificate not PEM"]), ""},
		{"a private key", enc(reqs["client certificate a private key"]), ""},
		{"broken escape", enc(reqs["client certificate broken escape"]), ""},
		{"over the bound", enc(reqs["client certificate over the bound"]), ""},
		{"a chain", enc(reqs["client certificate with a chain"]), ""},
		{"a junk tail", enc(reqs["client certificate with a junk tail"]), ""},
		{"a later source peer without one keeps it", append(enc(client), second(&authv3.AttributeContext_Peer{Principal: "x"})...), want},
		{"a later source peer's certificate replaces it", append(enc(client), second(&authv3.AttributeContext_Peer{Certificate: testcert.URLEncodedPEM(other.DER)})...), other.X5t()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w wireRequest
			if err := w.decode(bytes.Clone(tc.b)); err != nil {
				t.Fatal(err)
			}
			var m authv3.CheckRequest
			if err := proto.Unmarshal(tc.b, &m); err != nil {
				t.Fatal(err)
			}
			in := Input(&m)
			if got, fromProto := w.request().ClientCertThumbprint(), in.ClientCertThumbprint(); got != tc.want || fromProto != tc.want {
				t.Errorf("wire %q, proto %q, want %q", got, fromProto, tc.want)
			}
		})
	}
}

// pemDER reads the certificate of an escaped PEM with the standard
// library, as the reference the decoders are compared with.
func pemDER(t *testing.T, escaped string) []byte {
	t.Helper()
	text, err := url.PathUnescape(escaped)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode([]byte(text))
	if b == nil {
		t.Fatalf("no PEM in %q", escaped)
	}
	return b.Bytes
}

// TestWireNoCertCostsNothing: a request without a certificate (the usual
// one) allocates no more for the field than before it existed.
func TestWireNoCertCostsNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	plain, err := proto.Marshal(checkRequest(map[string]string{"authorization": "Bearer a.b.c"}))
	if err != nil {
		t.Fatal(err)
	}
	w := &wireRequest{in: check.Request{Headers: make(check.Headers, 8)}}
	n := testing.AllocsPerRun(200, func() {
		clear(w.in.Headers)
		*w = wireRequest{in: check.Request{Headers: w.in.Headers}}
		if err := w.decode(plain); err != nil {
			t.Fatal(err)
		}
		w.request()
	})
	if n != 0 {
		t.Errorf("decoding a request without a certificate: %.0f allocations", n)
	}
}

// TestClientCertOverGRPC: a client's TLS certificate, as an Envoy with
// include_peer_certificate describes it to a real gRPC server, is the
// request's ClientCert; a client's own x-forwarded-client-cert never is
// (on ext_authz only Envoy's view of the connection counts).
func TestClientCertOverGRPC(t *testing.T) {
	pl := pipelinetest.New(t, "issuers: [{name: a, secret: "+secret+"}]\nroutes: [{name: r, default: true, issuers: [a]}]\n", check.Deps{}, check.Options{})
	var mu sync.Mutex
	var seen []string
	record := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		resp, err := next(ctx, req)
		mu.Lock()
		seen = append(seen, req.(*wireRequest).in.ClientCertThumbprint())
		mu.Unlock()
		return resp, err
	}
	gs := grpc.NewServer(append(ServerOptions(), grpc.UnaryInterceptor(record))...)
	Register(gs, NewServer(pl))
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
	authz := authv3.NewAuthorizationClient(conn)

	// The front proxy: TLS, asking for a client certificate, checking each
	// request as Envoy's ext_authz filter with include_peer_certificate.
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := authz.Check(r.Context(), envoytest.BuildCheckRequest(r, nil, envoytest.BuildOptions{IncludePeerCertificate: true})); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	}))
	server := testcert.New(t, "front")
	front.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequestClientCert}
	front.StartTLS()
	t.Cleanup(front.Close)

	alice, victim := testcert.New(t, "alice"), testcert.New(t, "victim")
	forged := "Hash=" + victim.HexSHA256() + `;Cert="` + testcert.URLEncodedPEM(victim.DER) + `"`
	tests := []struct {
		name   string
		cert   *testcert.Cert
		forged bool
		want   string
	}{
		{"the client's certificate", &alice, false, alice.X5t()},
		{"no certificate", nil, false, ""},
		{"a forged x-forwarded-client-cert without a certificate", nil, true, ""},
		{"a forged x-forwarded-client-cert next to the client's certificate", &alice, true, alice.X5t()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: server.Pool(), ServerName: "localhost"}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{tc.cert.TLS}
			}
			tr := &http.Transport{TLSClientConfig: cfg}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest("GET", front.URL+"/mcp", nil)
			if tc.forged {
				req.Header.Set("X-Forwarded-Client-Cert", forged)
			}
			res, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("front proxy: %s", res.Status)
			}
			mu.Lock()
			got := seen[len(seen)-1]
			mu.Unlock()
			if got != tc.want {
				t.Errorf("ClientCert %q, want %q", got, tc.want)
			}
		})
	}
}
