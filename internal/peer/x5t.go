package peer

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"strings"
)

// A certificate-bound access token (RFC 8705) names its client certificate
// by the SHA-256 of the certificate's DER, base64url without padding (its
// cnf "x5t#S256"). The front ends learn the certificate from their proxy in
// one of three forms, each turned into that spelling here, in one place:
//
//   - Envoy's ext_authz source.certificate and XFCC's Cert: the leaf
//     certificate as URL-encoded PEM (ThumbprintPEM);
//   - XFCC's Hash and ext_proc's connection.sha256_peer_certificate_digest:
//     the SHA-256 in hex (ThumbprintHex);
//   - a whole X-Forwarded-Client-Cert header (ThumbprintXFCC).
//
// Each returns "" for anything it cannot read exactly: "" presents no
// certificate, so a bound token is refused, never matched against a
// certificate read from a part of the input.

// MaxCertBytes bounds a URL-encoded PEM certificate. A client certificate
// is a few KiB; the bound keeps a hostile value from costing more.
const MaxCertBytes = 64 << 10

const pemCertBegin = "-----BEGIN CERTIFICATE-----"

// ThumbprintPEM is the x5t#S256 of the certificate in escaped, a
// URL-encoded PEM CERTIFICATE block as Envoy (source.certificate, XFCC
// Cert) and nginx ($ssl_client_escaped_cert) write it, or "" when escaped
// is empty or is not exactly one such block. The hash is over the DER as
// sent; the certificate is not parsed.
func ThumbprintPEM(escaped string) string {
	if escaped == "" || len(escaped) > MaxCertBytes {
		return ""
	}
	// Path unescaping: a '+' stays a '+', as base64 needs. Envoy and nginx
	// escape it; a proxy that wrote a space as '+' breaks the BEGIN line
	// and is refused.
	text, err := url.PathUnescape(escaped)
	if err != nil {
		return ""
	}
	der, ok := leafDER(text)
	if !ok {
		return ""
	}
	return thumbprint(sha256.Sum256(der))
}

// leafDER is the DER of text when text is one PEM CERTIFICATE block
// without headers and nothing but whitespace around it. pem.Decode alone
// is more lenient: it skips text before a block and skips a malformed
// block to the next, which would hash a certificate other than the one
// the proxy meant. A chain is refused too: every proxy sends the leaf
// alone.
func leafDER(text string) ([]byte, bool) {
	text = strings.TrimLeft(text, " \t\r\n")
	if !strings.HasPrefix(text, pemCertBegin) || strings.Count(text, "-----BEGIN") != 1 {
		return nil, false
	}
	b, rest := pem.Decode([]byte(text))
	if b == nil || b.Type != "CERTIFICATE" || len(b.Headers) != 0 || len(b.Bytes) == 0 || len(bytes.TrimSpace(rest)) != 0 {
		return nil, false
	}
	return b.Bytes, true
}

// ThumbprintHex is the x5t#S256 of a certificate whose SHA-256 is given
// as 64 hex digits (either case: they name the same bytes), or "".
func ThumbprintHex(digest string) string {
	var sum [sha256.Size]byte
	if len(digest) != hex.EncodedLen(len(sum)) {
		return ""
	}
	for i := range sum {
		hi, ok1 := fromHex(digest[2*i])
		lo, ok2 := fromHex(digest[2*i+1])
		if !ok1 || !ok2 {
			return ""
		}
		sum[i] = hi<<4 | lo
	}
	return thumbprint(sum)
}

// fromHex is the value of one hex digit. (hex.Decode wants a []byte, and
// converting the header's string to one costs an allocation per request.)
func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// ThumbprintXFCC is the x5t#S256 of the client certificate an
// X-Forwarded-Client-Cert header names in its last element (the one the
// nearest proxy added; earlier ones are the client's or farther proxies'),
// or "". The element's Cert is hashed here; a Hash next to it must name
// the same certificate, else neither is believed (a proxy writes both from
// one certificate, so a disagreement is a forgery or a broken proxy).
// Without a Cert, the Hash is read. An empty value is no value. The caller
// decides whether the header's sender may be believed at all.
func ThumbprintXFCC(header string) string {
	if header == "" {
		return ""
	}
	els, err := ParseXFCC(header)
	if err != nil {
		return ""
	}
	el := &els[len(els)-1]
	if el.Cert == "" {
		return ThumbprintHex(el.Hash)
	}
	t := ThumbprintPEM(el.Cert)
	if el.Hash != "" && ThumbprintHex(el.Hash) != t {
		return ""
	}
	return t
}

// thumbprint spells a SHA-256 as x5t#S256 does, with one allocation (the
// string).
func thumbprint(sum [sha256.Size]byte) string {
	var b [43]byte // base64.RawURLEncoding.EncodedLen(sha256.Size)
	base64.RawURLEncoding.Encode(b[:], sum[:])
	return string(b[:])
}
