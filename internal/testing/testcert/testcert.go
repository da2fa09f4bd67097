// Package testcert makes TLS certificates for tests of client
// certificates (mutual TLS, RFC 8705 certificate-bound tokens), and spells
// them the ways proxies pass them on. It is not used by the service
// itself.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Cert is a key and its self-signed certificate, valid for an hour around
// now, usable by a client and by a server on 127.0.0.1 or localhost.
type Cert struct {
	DER  []byte
	Leaf *x509.Certificate
	TLS  tls.Certificate
	// CertPEM and KeyPEM are the certificate and its PKCS #8 key in PEM.
	CertPEM, KeyPEM []byte
}

// New makes a certificate with the common name cn.
func New(t testing.TB, cn string) Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // so that a server's own certificate is its trust root
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Cert{
		DER:     der,
		Leaf:    leaf,
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
	}
}

// Pool is a pool trusting c alone.
func (c Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Leaf)
	return p
}

// Files writes the certificate and key as PEM into dir and returns their
// paths, for proxies that read them from files.
func (c Cert) Files(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, c.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, c.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// X5t is RFC 8705's x5t#S256 of the certificate: the SHA-256 of its DER,
// base64url without padding.
func (c Cert) X5t() string { return X5t(c.DER) }

// HexSHA256 is the SHA-256 of the certificate's DER in lower-case hex,
// as Envoy's XFCC Hash and Caddy's fingerprint write it.
func (c Cert) HexSHA256() string { return HexSHA256(c.DER) }

// HexSHA256 is the SHA-256 of der in lower-case hex.
func HexSHA256(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// X5t is the x5t#S256 of der, computed the plain way.
func X5t(der []byte) string {
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// URLEncodedPEM is a certificate (DER) as Envoy sends it in
// source.certificate and XFCC's Cert (the ssl connection info's
// urlEncodedPemEncodedPeerCertificate): PEM, then every byte but ALPHA,
// DIGIT, '*', '-', '.' and '_' as %XX (Http::Utility::PercentEncoding::
// urlEncode). nginx's $ssl_client_escaped_cert differs only in leaving
// '~' and escaping '*', neither of which PEM contains.
func URLEncodedPEM(der []byte) string {
	return Escape(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
}

// Escape is URLEncodedPEM's escaping of any text, for tests that escape
// something other than one well-formed certificate.
func Escape(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '*' || c == '-' || c == '.' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}
