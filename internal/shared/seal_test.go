package shared

import (
	"bytes"
	"testing"
)

func TestSealOpen(t *testing.T) {
	s, err := newSealer(testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("a bearer token")
	sealed := s.seal(plain, "extauthz:token:k1")
	if again := s.seal(plain, "extauthz:token:k1"); bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	if got, err := s.open(sealed, "extauthz:token:k1"); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("open = %q, %v", got, err)
	}

	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		return b
	}
	tests := []struct {
		name   string
		sealed []byte
		ad     string
	}{
		{"other key name", sealed, "extauthz:token:k2"},
		{"version changed", flip(0), "extauthz:token:k1"},
		{"key id changed", flip(2), "extauthz:token:k1"},
		{"nonce changed", flip(sealHeader), "extauthz:token:k1"},
		{"ciphertext changed", flip(sealHeader + 12), "extauthz:token:k1"},
		{"tag changed", flip(len(sealed) - 1), "extauthz:token:k1"},
		{"truncated", sealed[:len(sealed)-1], "extauthz:token:k1"},
		{"header only", sealed[:sealHeader], "extauthz:token:k1"},
		{"empty", nil, "extauthz:token:k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := s.open(tt.sealed, tt.ad); err == nil {
				t.Fatalf("open succeeded: %q", got)
			}
		})
	}
}

func TestSealerKeys(t *testing.T) {
	old, err := newSealer(testKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := newSealer(otherKey, [][]byte{testKey})
	if err != nil {
		t.Fatal(err)
	}
	fromOld := old.seal([]byte("v"), "k")
	if got, err := rotated.open(fromOld, "k"); err != nil || string(got) != "v" {
		t.Fatalf("rotated sealer cannot open the old key's value: %q, %v", got, err)
	}
	if _, err := old.open(rotated.seal([]byte("v"), "k"), "k"); err == nil {
		t.Fatal("old sealer opened a value sealed with a key it lacks")
	}
	if keyID(testKey) == keyID(otherKey) {
		t.Fatal("two keys share an id")
	}
	if _, err := newSealer([]byte("short"), nil); err == nil {
		t.Fatal("newSealer accepted a short key")
	}
}
