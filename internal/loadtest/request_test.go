package loadtest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// decode is what the server sees.
func decode(t *testing.T, r *envoyRequest) *authv3.CheckRequest {
	t.Helper()
	var msg authv3.CheckRequest
	if err := proto.Unmarshal(r.buf, &msg); err != nil {
		t.Fatalf("the encoded request does not decode: %v", err)
	}
	return &msg
}

func TestCheckRequestShape(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msg := checkRequest(now, "123", "rid", "Bearer abc")
	h := msg.GetAttributes().GetRequest().GetHttp()
	wantHeaders := map[string]string{
		":authority":        RequestHost,
		":method":           "POST",
		":path":             "/mcp",
		":scheme":           "http",
		"content-type":      "application/json",
		"x-forwarded-proto": "http",
		"x-request-id":      "rid",
		"authorization":     "Bearer abc",
	}
	for k, want := range wantHeaders {
		if got := h.GetHeaders()[k]; got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	for k := range h.GetHeaders() {
		if k != strings.ToLower(k) {
			t.Errorf("header key %q is not lower-case, Envoy's are", k)
		}
	}
	if h.GetId() != "123" || h.GetMethod() != "POST" || h.GetPath() != "/mcp" || h.GetHost() != RequestHost || h.GetScheme() != "http" || h.GetProtocol() == "" {
		t.Errorf("http attributes: id %q method %q path %q host %q scheme %q protocol %q", h.GetId(), h.GetMethod(), h.GetPath(), h.GetHost(), h.GetScheme(), h.GetProtocol())
	}
	if got := msg.GetAttributes().GetRequest().GetTime().AsTime(); !got.Equal(now) {
		t.Errorf("request time %v, want %v", got, now)
	}
}

// TestEnvoyRequestEncoding: the pre-encoded template plus the appended
// per-request fields decode to exactly the message checkRequest builds.
func TestEnvoyRequestEncoding(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newEnvoyRequest([16]byte{1, 2, 3}, now)
	long := "Bearer " + strings.Repeat("x", 5000) // multi-byte lengths
	seen := map[string]bool{}
	for i, auth := range []string{"Bearer abc", long, "Bearer def", ""} {
		got := decode(t, r.next(auth))
		h := got.GetAttributes().GetRequest().GetHttp()
		rid := h.GetHeaders()["x-request-id"]
		if !uuidV4.MatchString(rid) {
			t.Errorf("request %d: x-request-id %q is not a version 4 UUID", i, rid)
		}
		if seen[rid] || seen[h.GetId()] || h.GetId() == "" {
			t.Errorf("request %d reuses x-request-id %q or id %q", i, rid, h.GetId())
		}
		seen[rid], seen[h.GetId()] = true, true
		want := checkRequest(now, h.GetId(), rid, auth)
		if auth == "" {
			// An empty header is still sent, as Envoy would for "authorization:".
			want.GetAttributes().GetRequest().GetHttp().GetHeaders()["authorization"] = ""
		}
		if !proto.Equal(want, got) {
			t.Errorf("request %d decodes differently:\nwant %s\ngot  %s", i, prototext.Format(want), prototext.Format(got))
		}
	}
	other := decode(t, newEnvoyRequest([16]byte{9, 9, 9}, now).next("Bearer abc"))
	if seen[other.GetAttributes().GetRequest().GetHttp().GetHeaders()["x-request-id"]] {
		t.Error("two callers sent the same x-request-id")
	}
}

// BenchmarkEnvoyRequestNext is the load tool's own per-request cost before
// gRPC: it should allocate nothing.
func BenchmarkEnvoyRequestNext(b *testing.B) {
	r := newEnvoyRequest([16]byte{1}, time.Now())
	auth := "Bearer " + strings.Repeat("x", 300)
	b.ReportAllocs()
	for b.Loop() {
		r.next(auth)
	}
}

// BenchmarkProtoMarshalRequest is what encoding the whole CheckRequest on
// every request would cost instead.
func BenchmarkProtoMarshalRequest(b *testing.B) {
	msg := checkRequest(time.Now(), "12345678901234567890", "6f1f3c8e-6a7b-4c1d-9e2f-0a1b2c3d4e5f", "Bearer "+strings.Repeat("x", 300))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := proto.Marshal(msg); err != nil {
			b.Fatal(err)
		}
	}
}
