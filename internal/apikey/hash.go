package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Prefix starts every generated key: a credential with it is an API key,
// never a JWT or an opaque token, so the service skips JWT parsing for it.
const Prefix = "ek_"

// secretBytes is the randomness of a generated key: 256 bits.
const secretBytes = 32

// encodedLen is the length of a generated key: the prefix and 32 bytes in
// unpadded base64url.
var encodedLen = len(Prefix) + base64.RawURLEncoding.EncodedLen(secretBytes)

// minEntropyBits is what a key must have to be stored as a plain SHA-256
// digest: a fast hash is only safe for keys nobody can guess.
const minEntropyBits = 8 * secretBytes

// Argon2id parameters of hashes made here (OWASP's first recommendation:
// 19 MiB, 2 passes, 1 lane) and the bounds accepted in a file, so that a
// file cannot make one check cost seconds or gigabytes.
const (
	Argon2Memory  = 19 * 1024 // KiB
	Argon2Time    = 2
	Argon2Threads = 1
	argon2KeyLen  = 32
	argon2SaltLen = 16

	maxArgon2Memory  = 256 * 1024 // KiB
	maxArgon2Time    = 10
	maxArgon2Threads = 16
)

// Hash schemes of a file entry.
const (
	schemeSHA256   = "sha256:"
	schemeArgon2id = "argon2id:"
)

// WellFormed reports whether s has the shape of a generated key: the
// prefix and exactly 32 bytes of unpadded base64url.
func WellFormed(s string) bool {
	if len(s) != encodedLen || !strings.HasPrefix(s, Prefix) {
		return false
	}
	for i := len(Prefix); i < len(s); i++ {
		if !isBase64URL(s[i]) {
			return false
		}
	}
	// The last character carries 2 padding bits that must be zero for
	// the encoding to be canonical (one key, one spelling).
	_, err := base64.RawURLEncoding.Strict().DecodeString(s[len(Prefix):])
	return err == nil
}

func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// Generate returns a new key: the prefix and 32 random bytes in base64url.
func Generate() (string, error) {
	b := make([]byte, secretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// SHA256Hash is the hash field of a high-entropy key: "sha256:" and the hex
// digest.
func SHA256Hash(key string) string {
	d := sha256.Sum256([]byte(key))
	return schemeSHA256 + hex.EncodeToString(d[:])
}

// Argon2idHash is the hash field of a human-chosen secret: "argon2id:" and
// the PHC string, with a random salt and the package's parameters.
func Argon2idHash(secret string) (string, error) {
	salt := make([]byte, argon2SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	p := argon2Params{memory: Argon2Memory, time: Argon2Time, threads: Argon2Threads, salt: salt}
	p.hash = argon2.IDKey([]byte(secret), salt, p.time, p.memory, p.threads, argon2KeyLen)
	return schemeArgon2id + p.String(), nil
}

// argon2Params is a parsed PHC string.
type argon2Params struct {
	memory, time uint32
	threads      uint8
	salt, hash   []byte
}

func (p argon2Params) String() string {
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.memory, p.time, p.threads,
		enc.EncodeToString(p.salt), enc.EncodeToString(p.hash))
}

// verify runs Argon2id on secret and compares in constant time.
func (p *argon2Params) verify(secret string) bool {
	got := argon2.IDKey([]byte(secret), p.salt, p.time, p.memory, p.threads, uint32(len(p.hash)))
	return subtle.ConstantTimeCompare(got, p.hash) == 1
}

// parseArgon2id reads "$argon2id$v=19$m=M,t=T,p=P$salt$hash" (base64
// without padding), within the bounds.
func parseArgon2id(s string) (*argon2Params, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return nil, errors.New("not a $argon2id$ PHC string")
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return nil, fmt.Errorf("argon2id version %q is not v=%d", parts[2], argon2.Version)
	}
	var p argon2Params
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("argon2id parameter %q is not a number", k)
		}
		switch k {
		case "m":
			p.memory = uint32(n)
		case "t":
			p.time = uint32(n)
		case "p":
			if n > maxArgon2Threads {
				return nil, fmt.Errorf("argon2id p=%d exceeds %d", n, maxArgon2Threads)
			}
			p.threads = uint8(n)
		default:
			return nil, fmt.Errorf("unknown argon2id parameter %q", k)
		}
	}
	switch {
	case p.time < 1 || p.time > maxArgon2Time:
		return nil, fmt.Errorf("argon2id t must be 1..%d", maxArgon2Time)
	case p.threads < 1:
		return nil, errors.New("argon2id p must be at least 1")
	case p.memory < 8*uint32(p.threads) || p.memory > maxArgon2Memory:
		return nil, fmt.Errorf("argon2id m must be 8*p..%d KiB", maxArgon2Memory)
	}
	var err error
	if p.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(p.salt) < 8 {
		return nil, errors.New("argon2id salt must be at least 8 bytes of unpadded base64")
	}
	if p.hash, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(p.hash) < 16 || len(p.hash) > 64 {
		return nil, errors.New("argon2id hash must be 16 to 64 bytes of unpadded base64")
	}
	return &p, nil
}

// entropyBits estimates the entropy of a plain key as its length times the
// bits of the smallest character set it is drawn from (hex, base64url, or
// printable ASCII). It overestimates keys with a pattern, which is why a
// key must also use many distinct characters (see plainKeyError).
func entropyBits(s string) float64 {
	hexOnly, b64 := true, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			hexOnly = false
		}
		if !isBase64URL(c) {
			b64 = false
		}
	}
	set := 95.0
	switch {
	case hexOnly:
		set = 16
	case b64:
		set = 64
	}
	return float64(len(s)) * math.Log2(set)
}

// plainKeyError says why a plain key in a file is too weak to be stored as a
// SHA-256 digest, nil when it is not. A generated key is always accepted.
func plainKeyError(key string) error {
	if strings.HasPrefix(key, Prefix) {
		if !WellFormed(key) {
			return fmt.Errorf("a key starting with %s must be %d bytes of base64url (use apikey new)", Prefix, secretBytes)
		}
		return nil
	}
	distinct := map[byte]bool{}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return errors.New("a key must be printable ASCII without spaces")
		}
		distinct[key[i]] = true
	}
	if entropyBits(key) < minEntropyBits || len(distinct) < 16 {
		return fmt.Errorf("a plain key needs at least %d bytes of entropy (use apikey new, or an argon2id hash for a human-chosen key)", secretBytes)
	}
	return nil
}
