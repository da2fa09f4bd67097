package shared

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/redistest"
)

// testCA writes a CA and a server certificate for localhost and 127.0.0.1
// into dir and returns their paths.
func testCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caKey, srvKey := newKey(), newKey()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

func TestTLSAndAuth(t *testing.T) {
	redistest.Need(t)
	dir := t.TempDir()
	caFile, certFile, keyFile := testCA(t, dir)
	args := func(port int) []string {
		return []string{
			"--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", certFile, "--tls-key-file", keyFile,
			"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no",
			"--user", "default", "off",
			"--user", "app", "on", ">app-secret", "~*", "&*", "+@all",
		}
	}
	r, err := redistest.Launch(redistest.Options{Dir: dir, Args: args, TLS: &tls.Config{InsecureSkipVerify: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Kill)

	tests := []struct {
		name   string
		edit   func(*Config)
		wantOK bool
	}{
		{"tls and user", func(c *Config) {}, true},
		{"tls with a server name", func(c *Config) { c.TLSServerName = "localhost" }, true},
		{"wrong password", func(c *Config) { c.Password = "wrong" }, false},
		{"no user", func(c *Config) { c.Username, c.Password = "", "" }, false},
		{"system roots do not know the CA", func(c *Config) { c.TLSCAFile = "" }, false},
		{"wrong server name", func(c *Config) { c.TLSServerName = "redis.example" }, false},
		{"plain TCP to a TLS port", func(c *Config) { c.TLS, c.TLSCAFile = false, "" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, r.Addr, func(c *Config, _ *Options) {
				c.TLS, c.TLSCAFile = true, caFile
				c.Username, c.Password = "app", "app-secret"
				c.OpTimeout = time.Second // TLS handshakes under -race
				tt.edit(c)
			})
			var err error
			attempts := 100 // the first dial may still be under way
			if !tt.wantOK {
				attempts = 3
			}
			ok := eventually(attempts, func() bool {
				_, _, err = s.Bind(t.Context(), "r\x00s", "alice", time.Minute, 0)
				return err == nil
			})
			if ok != tt.wantOK {
				t.Fatalf("Bind works: %v, want %v (last error %v)", ok, tt.wantOK, err)
			}
			if !tt.wantOK && !errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			if tt.wantOK && !eventually(300, s.Ready) {
				t.Fatal("never ready")
			}
		})
	}
}
