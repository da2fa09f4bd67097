package envoyauthz

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
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
