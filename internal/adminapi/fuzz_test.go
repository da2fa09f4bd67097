package adminapi

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// FuzzParseCheckRequest feeds explain's file reader arbitrary bytes: it must
// never panic, and whatever it accepts must survive a round trip unchanged.
func FuzzParseCheckRequest(f *testing.F) {
	f.Add(mustRead(f, "testdata/check-request.json"))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"attributes": {"request": {"http": {"hedaers": {}}}}}`))
	captures, err := envoytest.Captures()
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range captures {
		data, err := protojson.Marshal(c.Request)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := parseCheckRequest(data)
		if err != nil {
			return
		}
		again, err := protojson.Marshal(req)
		if err != nil {
			t.Fatalf("accepted %q but cannot write it back: %v", data, err)
		}
		back, err := parseCheckRequest(again)
		if err != nil {
			t.Fatalf("cannot read back %q: %v", again, err)
		}
		if !proto.Equal(req, back) {
			t.Fatalf("round trip changed %v into %v", req, back)
		}
	})
}
