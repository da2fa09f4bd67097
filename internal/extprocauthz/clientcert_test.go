package extprocauthz

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/testcert"
)

// TestClientCert: the request's client certificate comes from the
// filter's request_attributes (connection.sha256_peer_certificate_digest),
// read as XFCC's Hash is, and never from a header the client sent.
func TestClientCert(t *testing.T) {
	alice, victim := testcert.New(t, "alice"), testcert.New(t, "victim")
	str := structpb.NewStringValue
	tests := []struct {
		name   string
		attrs  map[string]*structpb.Value
		header string // the request's x-forwarded-client-cert
		want   string
	}{
		{"Envoy's digest", map[string]*structpb.Value{attrPeerCertDigest: str(alice.HexSHA256())}, "", alice.X5t()},
		{"upper-case digest", map[string]*structpb.Value{attrPeerCertDigest: str(strings.ToUpper(alice.HexSHA256()))}, "", alice.X5t()},
		{"the digest next to the peer's address and SAN", map[string]*structpb.Value{"source.address": str("10.1.2.3:5555"),
			"connection.uri_san_peer_certificate": str("spiffe://mesh/ns/a/sa/agent"), attrPeerCertDigest: str(alice.HexSHA256())}, "", alice.X5t()},
		{"a forged header next to the digest", map[string]*structpb.Value{attrPeerCertDigest: str(alice.HexSHA256())}, "Hash=" + victim.HexSHA256(), alice.X5t()},

		{"a forged header alone", nil, "Hash=" + victim.HexSHA256(), ""},
		{"no attributes", nil, "", ""},
		{"other attributes only", map[string]*structpb.Value{"source.address": str("10.1.2.3:5555")}, "", ""},
		{"an empty digest (no client certificate)", map[string]*structpb.Value{attrPeerCertDigest: str("")}, "", ""},
		{"a digest of 63 digits", map[string]*structpb.Value{attrPeerCertDigest: str(alice.HexSHA256()[:63])}, "", ""},
		{"a digest that is not hex", map[string]*structpb.Value{attrPeerCertDigest: str("z" + alice.HexSHA256()[1:])}, "", ""},
		{"a SHA-1 digest", map[string]*structpb.Value{attrPeerCertDigest: str(alice.HexSHA256()[:40])}, "", ""},
		{"a digest that is not a string", map[string]*structpb.Value{attrPeerCertDigest: structpb.NewNumberValue(1)}, "", ""},
		{"the whole certificate where the digest goes", map[string]*structpb.Value{attrPeerCertDigest: str(testcert.URLEncodedPEM(alice.DER))}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs := []*corev3.HeaderValue{{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte("/mcp")}, {Key: ":authority", RawValue: []byte("mcp.example.com")}}
			if tc.header != "" {
				hs = append(hs, &corev3.HeaderValue{Key: "x-forwarded-client-cert", RawValue: []byte(tc.header)})
			}
			msg := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}}}}
			if tc.attrs != nil {
				msg.Attributes = map[string]*structpb.Struct{AttributesNamespace: {Fields: tc.attrs}}
			}
			st := &exchange{s: &Server{}, ctx: t.Context(), req: check.Request{Headers: check.Headers{}}}
			if _, err := st.handle(msg); err != nil {
				t.Fatal(err)
			}
			if got := st.req.ClientCertThumbprint(); got != tc.want {
				t.Errorf("ClientCertThumbprint() = %q, want %q", got, tc.want)
			}
		})
	}
}
