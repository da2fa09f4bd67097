package jwtauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// verificationKey is one usable public key of a key set.
type verificationKey struct {
	kid string
	// id is the key's RFC 7638 thumbprint: what a token it verifies
	// records (Claims.KeyID) and what a refresh that drops it reports,
	// whatever kid the token or the set names.
	id   string
	key  any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	algs algSet // the algorithms this key may verify: its type, narrowed by the JWK's own "alg"
	// rsa is an RSA key prepared for RS256, RS384 and RS512 (nil: other
	// keys, and RSA keys crypto/rsa verifies itself).
	rsa *rsaModulus
}

// keySet is an immutable snapshot of an issuer's public keys. A refresh
// builds a new one and swaps it in whole, so Verify reads it without locks.
type keySet struct {
	byKID map[string][]verificationKey
	all   []verificationKey // for tokens without a kid
}

// errNoSuchKey reports that a key set has no key for a token: the caller may
// refetch the set and then reports ErrUnknownKey.
var errNoSuchKey = errors.New("no such key")

// candidates returns the keys that may have signed a token with the given
// kid and algorithm (keys of other algorithms among them are the caller's
// to skip), with find's errors.
func (s *keySet) candidates(kid []byte, hasKID bool, alg *algorithm) ([]verificationKey, error) {
	candidates := s.all
	if hasKID {
		var ok bool
		if candidates, ok = s.byKID[string(kid)]; !ok { // a lookup: no copy
			return nil, errNoSuchKey
		}
	}
	for _, k := range candidates {
		if k.algs&alg.bit != 0 {
			return candidates, nil
		}
	}
	if hasKID {
		return nil, ErrAlgorithm
	}
	return nil, errNoSuchKey
}

// find returns the key (or, when several qualify, a jwt.VerificationKeySet)
// for a token with the given kid and algorithm. A kid the set knows whose
// keys cannot verify alg is ErrAlgorithm: the JWK pins its algorithm.
func (s *keySet) find(kid string, hasKID bool, alg *algorithm) (any, error) {
	candidates := s.all
	if hasKID {
		var ok bool
		if candidates, ok = s.byKID[kid]; !ok {
			return nil, errNoSuchKey
		}
	}
	var (
		first any
		n     int
	)
	for _, k := range candidates {
		if k.algs&alg.bit != 0 {
			if n == 0 {
				first = k.key
			}
			n++
		}
	}
	switch {
	case n == 1:
		return first, nil
	case n > 1:
		set := jwt.VerificationKeySet{Keys: make([]jwt.VerificationKey, 0, n)}
		for _, k := range candidates {
			if k.algs&alg.bit != 0 {
				set.Keys = append(set.Keys, k.key)
			}
		}
		return set, nil
	case hasKID:
		return nil, ErrAlgorithm
	default:
		return nil, errNoSuchKey
	}
}

// size is the number of usable keys.
func (s *keySet) size() int { return len(s.all) }

// parseKeySet turns a JWK Set document into a keySet. Individual keys that
// are unusable for signature verification (encryption keys, symmetric keys,
// unsupported types or curves, weak RSA, malformed) are skipped and counted;
// a document with no usable key at all is an error, so that a broken
// publication never replaces a working key set.
func parseKeySet(doc []byte) (set *keySet, skipped int, err error) {
	var raw jwkset.JWKSMarshal
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, 0, fmt.Errorf("decode JWK set: %w", err)
	}
	set = &keySet{byKID: make(map[string][]verificationKey, len(raw.Keys))}
	for _, m := range raw.Keys {
		k, ok := verificationKeyFrom(m)
		if !ok {
			skipped++
			continue
		}
		set.all = append(set.all, k)
		if k.kid != "" {
			set.byKID[k.kid] = append(set.byKID[k.kid], k)
		}
	}
	if len(set.all) == 0 {
		return nil, skipped, fmt.Errorf("JWK set has no usable signature verification key (%d skipped)", skipped)
	}
	return set, skipped, nil
}

// verificationKeyFrom decodes one JWK, public part only, with jwkset and
// decides which algorithms it may verify.
func verificationKeyFrom(m jwkset.JWKMarshal) (verificationKey, bool) {
	if m.USE != "" && m.USE != jwkset.UseSig {
		return verificationKey{}, false
	}
	if len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify) {
		return verificationKey{}, false
	}
	// Private: false decodes only the public part of asymmetric keys and
	// refuses symmetric ("oct") keys: an HMAC secret has no place in a
	// published key set.
	jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: false}, jwkset.JWKValidateOptions{})
	if err != nil {
		return verificationKey{}, false
	}
	var (
		algs     algSet
		prepared *rsaModulus
	)
	key := jwk.Key()
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return verificationKey{}, false
		}
		algs = familyAlgs(familyRSA)
		prepared = newRSAModulus(k)
	case *ecdsa.PublicKey:
		for _, a := range supportedAlgorithms {
			if a.family == familyEC && a.curve == k.Curve {
				algs = a.bit
			}
		}
	case ed25519.PublicKey:
		algs = familyAlgs(familyEdDSA)
	}
	if m.ALG != "" {
		a, ok := algorithmsByName[string(m.ALG)]
		if !ok {
			return verificationKey{}, false
		}
		algs &= a.bit
	}
	id := thumbprint(key)
	if algs == 0 || id == "" {
		return verificationKey{}, false
	}
	return verificationKey{kid: m.KID, id: id, key: key, algs: algs, rsa: prepared}, true
}

// thumbprint is the RFC 7638 JWK thumbprint (SHA-256, base64url) of a
// public key: the hash of its required members, in lexical order, encoded
// from the decoded key so that two spellings of one key agree. It is ""
// for a key it cannot encode.
func thumbprint(key any) string {
	b64 := base64.RawURLEncoding.EncodeToString
	var doc string
	switch k := key.(type) {
	case *rsa.PublicKey:
		doc = `{"e":"` + b64(big.NewInt(int64(k.E)).Bytes()) + `","kty":"RSA","n":"` + b64(k.N.Bytes()) + `"}`
	case *ecdsa.PublicKey:
		pt, err := k.Bytes() // 0x04 || X || Y, each of the curve's size
		if err != nil {
			return ""
		}
		n := (len(pt) - 1) / 2
		doc = `{"crv":"` + k.Curve.Params().Name + `","kty":"EC","x":"` + b64(pt[1:1+n]) + `","y":"` + b64(pt[1+n:]) + `"}`
	case ed25519.PublicKey:
		doc = `{"crv":"Ed25519","kty":"OKP","x":"` + b64(k) + `"}`
	default:
		return ""
	}
	sum := sha256.Sum256([]byte(doc))
	return b64(sum[:])
}
