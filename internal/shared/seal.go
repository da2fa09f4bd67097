package shared

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// keySize is the AES-256 key length.
const keySize = 32

// sealVersion starts every sealed value, so the format can change later.
const sealVersion = 1

// sealHeader is the version byte and the 4-byte key id.
const sealHeader = 1 + 4

// errUnsealable means a stored value could not be opened: sealed with a key
// this replica does not have, damaged, or moved from another key.
var errUnsealable = errors.New("shared: value cannot be opened")

// sealer seals values with AES-256-GCM. A sealed value is
//
//	version (1) | key id (4) | nonce (12) | ciphertext | tag (16)
//
// The key id names the key that sealed it, so keys can rotate: a replica
// opens values sealed by any key it knows and seals with its current one.
// The Redis key the value is stored under is the additional data, so a
// value copied to another key does not open. Random 96-bit nonces keep
// one key safe for about 2^32 values; rotate well before that.
type sealer struct {
	current uint32
	aeads   map[uint32]cipher.AEAD
}

func newSealer(key []byte, old [][]byte) (*sealer, error) {
	s := &sealer{aeads: make(map[uint32]cipher.AEAD, 1+len(old))}
	for i, k := range append([][]byte{key}, old...) {
		if len(k) != keySize {
			return nil, fmt.Errorf("shared: encryption key must be %d bytes, not %d", keySize, len(k))
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("shared: %w", err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("shared: %w", err)
		}
		id := keyID(k)
		if i == 0 {
			s.current = id
		}
		if _, dup := s.aeads[id]; !dup {
			s.aeads[id] = aead
		}
	}
	return s, nil
}

// keyID names a key without revealing it: 4 bytes of a domain-separated
// SHA-256. It only picks the key to try; GCM authenticates the value.
func keyID(key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte("extauthz shared token key\x00"))
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// seal encrypts plaintext for the Redis key ad.
func (s *sealer) seal(plaintext []byte, ad string) []byte {
	aead := s.aeads[s.current]
	out := make([]byte, sealHeader, sealHeader+len(plaintext)+aead.Overhead())
	out[0] = sealVersion
	binary.BigEndian.PutUint32(out[1:sealHeader], s.current)
	return aead.Seal(out, nil, plaintext, additional(out[:sealHeader], ad))
}

// open decrypts a value sealed for the Redis key ad.
func (s *sealer) open(sealed []byte, ad string) ([]byte, error) {
	if len(sealed) < sealHeader || sealed[0] != sealVersion {
		return nil, errUnsealable
	}
	aead, ok := s.aeads[binary.BigEndian.Uint32(sealed[1:sealHeader])]
	if !ok || len(sealed) < sealHeader+aead.Overhead() {
		return nil, errUnsealable
	}
	plaintext, err := aead.Open(nil, nil, sealed[sealHeader:], additional(sealed[:sealHeader], ad))
	if err != nil {
		return nil, errUnsealable
	}
	return plaintext, nil
}

// additional authenticates the header along with the Redis key, so neither
// can be changed without the value failing to open.
func additional(header []byte, ad string) []byte {
	b := make([]byte, 0, len(header)+len(ad))
	return append(append(b, header...), ad...)
}
