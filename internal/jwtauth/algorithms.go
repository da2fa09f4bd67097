package jwtauth

import (
	"crypto"
	"crypto/elliptic"

	"github.com/golang-jwt/jwt/v5"
)

// keyFamily is the kind of key an algorithm verifies with. An issuer's key
// source fixes its family: an HMAC secret only ever verifies HS*, a key set
// only ever verifies asymmetric algorithms.
type keyFamily uint8

const (
	familyHMAC keyFamily = iota + 1
	familyRSA
	familyEC
	familyEdDSA
)

// algorithm is one supported JWS "alg".
type algorithm struct {
	name   string
	bit    algSet
	family keyFamily
	curve  elliptic.Curve // familyEC only
	hash   crypto.Hash    // the digest signed (HMAC's hash for HS*); unused for EdDSA
	pss    bool           // RSASSA-PSS rather than PKCS #1 v1.5
	// method is the golang-jwt implementation, for signing (SignHMAC) and
	// for the callers that parse their own tokens with golang-jwt.
	method jwt.SigningMethod
}

// algSet is a bit set of algorithms, so that the per-token allow-list and
// key checks are a single AND.
type algSet uint16

var supportedAlgorithms = []*algorithm{
	{name: "HS256", hash: crypto.SHA256, family: familyHMAC, method: jwt.SigningMethodHS256},
	{name: "HS384", hash: crypto.SHA384, family: familyHMAC, method: jwt.SigningMethodHS384},
	{name: "HS512", hash: crypto.SHA512, family: familyHMAC, method: jwt.SigningMethodHS512},
	{name: "RS256", hash: crypto.SHA256, family: familyRSA, method: jwt.SigningMethodRS256},
	{name: "RS384", hash: crypto.SHA384, family: familyRSA, method: jwt.SigningMethodRS384},
	{name: "RS512", hash: crypto.SHA512, family: familyRSA, method: jwt.SigningMethodRS512},
	{name: "PS256", hash: crypto.SHA256, pss: true, family: familyRSA, method: jwt.SigningMethodPS256},
	{name: "PS384", hash: crypto.SHA384, pss: true, family: familyRSA, method: jwt.SigningMethodPS384},
	{name: "PS512", hash: crypto.SHA512, pss: true, family: familyRSA, method: jwt.SigningMethodPS512},
	{name: "ES256", hash: crypto.SHA256, family: familyEC, curve: elliptic.P256(), method: jwt.SigningMethodES256},
	{name: "ES384", hash: crypto.SHA384, family: familyEC, curve: elliptic.P384(), method: jwt.SigningMethodES384},
	{name: "ES512", hash: crypto.SHA512, family: familyEC, curve: elliptic.P521(), method: jwt.SigningMethodES512},
	{name: "EdDSA", family: familyEdDSA, method: jwt.SigningMethodEdDSA},
}

// algorithmsByName indexes supportedAlgorithms; it is never written after
// init. "none" is deliberately absent.
var algorithmsByName = func() map[string]*algorithm {
	m := make(map[string]*algorithm, len(supportedAlgorithms))
	for i, a := range supportedAlgorithms {
		a.bit = 1 << i
		m[a.name] = a
	}
	return m
}()

// familyAlgs is every supported algorithm of family f.
func familyAlgs(f keyFamily) algSet {
	var s algSet
	for _, a := range supportedAlgorithms {
		if a.family == f {
			s |= a.bit
		}
	}
	return s
}

// Minimum HMAC secret length. RFC 7518 section 3.2 asks for a key as long as
// the hash output; 32 bytes (HS256's) is enforced for every HS* algorithm
// because anything shorter can be brute-forced offline from one token.
const minSecretLen = 32

// Minimum RSA modulus size; smaller keys in a key set are ignored.
const minRSABits = 2048
