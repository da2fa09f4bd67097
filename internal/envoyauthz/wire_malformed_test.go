package envoyauthz

import (
	"bytes"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"
)

// TestWireDecodeMalformed: what a peer able to reach the gRPC port could
// send instead of a CheckRequest. The wire decoder refuses it, as the
// protobuf library does, and does not panic.
func TestWireDecodeMalformed(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
	}{
		{name: "tag without a length", b: []byte{0x0a}},
		{name: "length past the end", b: []byte{0x0a, 0x05, 0x01}},
		{name: "length varint never ending", b: append([]byte{0x0a}, bytes.Repeat([]byte{0xff}, 11)...)},
		{name: "length beyond the int range", b: []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{name: "field number zero", b: []byte{0x02, 0x00}},
		{name: "end group never started", b: []byte{0x0c}},
		{name: "unknown fixed64 cut short", b: []byte{0x79, 0x01, 0x02}},
		// attributes (1) > request (4) > http (2) > headers map entry (3),
		// the innermost length running past its message.
		{name: "nested length past its message", b: []byte{0x0a, 0x08, 0x22, 0x06, 0x12, 0x04, 0x1a, 0x02, 0x0a, 0x09}},
		{name: "attributes cut inside the source peer", b: []byte{0x0a, 0x03, 0x0a, 0x02, 0x0a}},
		// attributes (1) > source (1) > certificate (5), its length running
		// past the peer.
		{name: "certificate length past the source peer", b: []byte{0x0a, 0x05, 0x0a, 0x03, 0x2a, 0x08, 0x41}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w wireRequest
			if err := w.decode(bytes.Clone(tc.b)); err == nil {
				t.Errorf("decode(%x) = nil, want an error", tc.b)
			}
			if err := proto.Unmarshal(tc.b, new(authv3.CheckRequest)); err == nil {
				t.Errorf("the case does not hold what it says: the protobuf library reads %x", tc.b)
			}
		})
	}
}
