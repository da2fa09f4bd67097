package envoyauthz

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestEncodeAllow: the hand-written encoding of an allow decodes, with
// the protobuf library, to the very message it was written from, for
// every kind of metadata value; a message holding anything okResponse
// does not set is left to the library.
func TestEncodeAllow(t *testing.T) {
	nested, err := structpb.NewStruct(map[string]any{"department": "eng", "level": 3.5, "groups": []any{"a", "b", nil, true}})
	if err != nil {
		t.Fatal(err)
	}
	allow := func(hs []check.Header, remove []string, fields map[string]*structpb.Value) *authv3.CheckResponse {
		resp, md := okResponse(headerOptions(hs), remove)
		md.Fields = fields
		return resp
	}
	tests := []struct {
		name string
		resp *authv3.CheckResponse
		want bool // encoded here
	}{
		{"empty", allow(nil, nil, nil), true},
		{"headers and removals", allow([]check.Header{{Name: "x-user", Value: "dev:alice"}, {Name: "x-empty", Value: ""}}, []string{"authorization", "cookie"}, nil), true},
		{"every value kind", allow(nil, nil, map[string]*structpb.Value{
			"s": structpb.NewStringValue("alice"), "empty": structpb.NewStringValue(""),
			"n": structpb.NewNumberValue(1.7e9), "zero": structpb.NewNumberValue(0),
			"t": structpb.NewBoolValue(true), "f": structpb.NewBoolValue(false),
			"null": structpb.NewNullValue(), "claims": structpb.NewStructValue(nested),
			"list": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("x"), structpb.NewStructValue(nested)}}),
			"":     structpb.NewStringValue("empty key"),
			"long": structpb.NewStringValue(strings.Repeat("v", 300)),
		}), true},
		{"response headers to add", func() *authv3.CheckResponse {
			r := allow(nil, nil, nil)
			r.GetOkResponse().ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "k"}}}
			return r
		}(), false},
		{"raw header value", func() *authv3.CheckResponse {
			r := allow([]check.Header{{Name: "x", Value: "y"}}, nil, nil)
			r.GetOkResponse().Headers[0].Header.RawValue = []byte("z")
			return r
		}(), false},
		{"append action", func() *authv3.CheckResponse {
			r := allow([]check.Header{{Name: "x", Value: "y"}}, nil, nil)
			r.GetOkResponse().Headers[0].AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
			return r
		}(), false},
		{"denial", Response(&check.Verdict{Outcome: check.Forbidden}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// What the codec sends decodes to the message, whoever wrote it.
			sent, err := codec{proto: encoding.GetCodecV2("proto")}.Marshal(tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			var decoded authv3.CheckResponse
			if err := proto.Unmarshal(sent.Materialize(), &decoded); err != nil || !proto.Equal(&decoded, tt.resp) {
				t.Fatalf("the codec sent %v (%v), want %v", &decoded, err, tt.resp)
			}
			sent.Free()

			b := encodeAllow(tt.resp)
			if (b != nil) != tt.want {
				t.Fatalf("encoded: %v, want %v", b != nil, tt.want)
			}
			if b == nil {
				return
			}
			var got authv3.CheckResponse
			if err := proto.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(&got, tt.resp) {
				t.Fatalf("decoded %v\nwant %v", &got, tt.resp)
			}
			if lib, err := proto.Marshal(tt.resp); err != nil || len(lib) != len(b) {
				t.Fatalf("%d bytes, the protobuf library writes %d (%v)", len(b), len(lib), err)
			}
		})
	}
}

// TestVarintSizes holds the encoder's sizes to protowire's at every
// boundary of a varint's length.
func TestVarintSizes(t *testing.T) {
	for _, v := range []uint64{0, 1, 0x7f, 0x80, 0x3fff, 0x4000, 1<<21 - 1, 1 << 21, 1<<35 - 1, 1 << 35, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		if got, want := sizeVarint(v), protowire.SizeVarint(v); got != want {
			t.Errorf("sizeVarint(%#x) = %d, want %d", v, got, want)
		}
	}
	for num := protowire.Number(1); num <= 15; num++ {
		for _, n := range []int{0, 1, 0x7f, 0x80, 0x3fff, 0x4000} {
			b := appendLen(nil, num, n)
			want := protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.BytesType), uint64(n))
			if !bytes.Equal(b, want) || messageSize(num, n) != len(want)+n {
				t.Errorf("field %d, length %d: appendLen wrote %x (size %d), want %x (size %d)", num, n, b, messageSize(num, n), want, len(want)+n)
			}
		}
	}
}

// TestWireAllowIsTheResponse: for the same verdict, the allow the wire
// path writes without a message (wireAllow) decodes, with the protobuf
// library, to the message the protobuf API answers (Response), first seen,
// repeated and memoized; and the cases between them show every metadata
// field either form writes.
func TestWireAllowIsTheResponse(t *testing.T) {
	doc := fmt.Sprintf(`issuers:
  - {name: corp, issuer: https://login.example.com, algorithms: [HS256], secret: %s}
routes:
  - name: tools
    default: true
    issuers: [corp]
    audiences: [https://mcp.example.com]
    claim_headers: [{claim: email, header: x-user-email}, {claim: nickname, header: x-user-nickname}]
    rules:
      - {name: search, methods: [tools/call], names: [search], claims: {department: [eng]}}
      - {name: others, methods: ["*"]}
lineage: {max_depth: 64}
`, secret)
	pl := pipelinetest.New(t, doc, check.Deps{}, check.Options{})
	now := time.Now()
	claims := func(sub string, extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": sub, "iss": "https://login.example.com", "aud": "https://mcp.example.com", "exp": now.Add(time.Hour).Unix()}
		maps.Copy(c, extra)
		return c
	}
	a2a := `{"jsonrpc":"2.0","id":"a1","method":"message/send","params":{"message":{"messageId":"m","contextId":"ctx-9","taskId":"task-4","role":"user","parts":[]}}}`
	tests := []struct {
		name    string
		claims  jwt.MapClaims
		headers map[string]string
		body    string // none: a GET, no call
	}{
		{"typical tool call", claims("alice", jwt.MapClaims{"session_id": "s-1", "iat": now.Unix(), "scope": "openid mcp:tools", "department": "eng", "email": "alice@example.com", "azp": "desktop"}),
			map[string]string{"mcp-session-id": "mcp-1"}, toolsCallBody},
		{"bare token, no call", claims("bob", nil), nil, ""},
		{"empty header value", claims("carol", jwt.MapClaims{"nickname": ""}), nil, ""},
		{"a2a message with lineage", claims("dave", jwt.MapClaims{"act": map[string]any{"sub": "agent-a", "act": map[string]any{"sub": "agent-b"}}}),
			map[string]string{"x-root-context-id": "root-1", "x-parent-context-id": "parent-2", "x-lineage-depth": "40"}, a2a},
		{"shallow lineage", claims("erin", nil), map[string]string{"x-root-context-id": "root-2"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	}
	seen := map[string]bool{}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"authorization": "Bearer " + testtoken.HMAC(t, "HS256", secret, tt.claims)}
			maps.Copy(h, tt.headers)
			req := checkRequest(h)
			if http := req.Attributes.Request.Http; tt.body == "" {
				http.Method, http.Headers[":method"] = "GET", "GET"
			} else {
				http.Body = tt.body
			}
			for _, round := range []string{"miss", "hit", "memoized"} {
				in := Input(req)
				v := pl.Check(ctx, &in)
				if v.Outcome != check.Allowed || v.CacheHit != (round != "miss") {
					t.Fatalf("%s: outcome %v, cached %v", round, v.Outcome, v.CacheHit)
				}
				e := wireAllow(&v)
				if e == nil {
					t.Fatalf("%s: no wire allow for a grant's verdict", round)
				}
				want := Response(&v)
				var got authv3.CheckResponse
				if err := proto.Unmarshal(e.b, &got); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(&got, want) {
					t.Fatalf("%s: the wire path wrote\n%v\nthe protobuf API answers\n%v", round, &got, want)
				}
				if lib, err := proto.Marshal(want); err != nil || len(lib) != len(e.b) {
					t.Fatalf("%s: %d bytes, the protobuf library writes %d (%v)", round, len(e.b), len(lib), err)
				}
				for k := range got.GetDynamicMetadata().GetFields() {
					seen[k] = true
				}
			}
		})
	}
	for _, k := range []string{"route", "outcome", "issuer", "client_id", "scope", "claims", "user", "session", "iat", "cached",
		"protocol", "method", "name", "mcp_session", "a2a_context_id", "a2a_task_id",
		"root_context_id", "parent_context_id", "lineage_depth", "actor_chain"} {
		if !seen[k] {
			t.Errorf("no case shows metadata %q", k)
		}
	}
}

// BenchmarkEncodeGrantAllow measures writing the allow of the typical
// token and call on the wire path: "memoized" in an allocation of its own,
// as a grant keeps it; "once" in a buffer of gRPC's pool, as a miss's is
// written, handed to gRPC and put back (Marshal, Free).
func BenchmarkEncodeGrantAllow(b *testing.B) {
	srv := verdictFixture(b, 16)
	in := Input(typicalRequest(typicalToken(b, 1)))
	v := srv.pipeline.Check(context.Background(), &in)
	if v.Outcome != check.Allowed {
		b.Fatalf("outcome %v", v.Outcome)
	}
	shape := check.RenderedShape(v.Grant, renderShape).encoded
	b.Run("memoized", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			encodeGrantAllow(&v, shape, nil)
		}
	})
	b.Run("once", func(b *testing.B) {
		cdc := codec{}
		b.ReportAllocs()
		for b.Loop() {
			enc, pooled := encodeGrantAllow(&v, shape, mem.DefaultBufferPool())
			sent, err := cdc.Marshal(&encodedResponse{b: enc, pooled: pooled})
			if err != nil {
				b.Fatal(err)
			}
			sent.Free()
		}
	})
}
