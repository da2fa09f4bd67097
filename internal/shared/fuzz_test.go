package shared

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzDecodeEvent: whatever arrives on the bus, decoding never panics, and
// what it accepts survives a round trip.
func FuzzDecodeEvent(f *testing.F) {
	for _, e := range goldenEvents {
		b, err := encodeEvent(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"kind":"resync"}`))
	f.Add([]byte(`{"kind":"session","id":"","at":-1}`))
	f.Add([]byte(`{"kind":"revoke","id":"\u0000","at":9223372036854775807}`))
	f.Add([]byte(`{"kind":"revoke_api_key","id":"a/b/c","at":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEvent(b)
		if err != nil {
			return
		}
		switch e.Kind {
		case EventSession, EventRevoke, EventConfig, EventRevokeAPIKey, EventElicitationComplete:
		default:
			t.Fatalf("accepted kind %q", e.Kind)
		}
		again, err := encodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := decodeEvent(again)
		if err != nil {
			t.Fatalf("re-encoded event does not decode: %v (%s)", err, again)
		}
		if e2.Kind != e.Kind || e2.ID != e.ID || e2.Origin != e.Origin || !e2.At.Equal(e.At) {
			t.Fatalf("round trip: %+v became %+v", e, e2)
		}
	})
}

// FuzzOpen: a value read from Redis opens only if it was sealed for that
// key; anything else is refused without a panic.
func FuzzOpen(f *testing.F) {
	s, err := newSealer(testKey, [][]byte{otherKey})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(s.seal([]byte("token"), "k"), "k", []byte("token"))
	f.Add([]byte{sealVersion, 0, 0, 0, 0}, "k", []byte{})
	f.Add([]byte{}, "", []byte("x"))
	f.Fuzz(func(t *testing.T, sealed []byte, ad string, plain []byte) {
		if got, err := s.open(sealed, ad); err == nil {
			// Only a genuine seal opens; the fuzzer cannot forge GCM tags,
			// so it must have reused a seed for its own key.
			again := s.seal(got, ad)
			if back, err := s.open(again, ad); err != nil || !bytes.Equal(back, got) {
				t.Fatalf("reseal of an opened value fails: %v", err)
			}
		}
		sealed = s.seal(plain, ad)
		got, err := s.open(sealed, ad)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("round trip: %q, %v; want %q", got, err, plain)
		}
		if _, err := s.open(sealed, ad+"x"); err == nil {
			t.Fatal("opened under another key name")
		}
	})
}

// FuzzParseAPIKey: what parses prints back as itself, so a revocation read
// from Redis or the bus names the key it was stored under.
func FuzzParseAPIKey(f *testing.F) {
	for _, s := range []string{"keys/k1", "a/b/k1", "/k1", "k1/", "", "/", "a//b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, ok := ParseAPIKey(s)
		if !ok {
			return
		}
		if k.Issuer == "" || k.ID == "" || strings.Contains(k.ID, "/") || k.String() != s {
			t.Fatalf("ParseAPIKey(%q) = %+v", s, k)
		}
	})
}
