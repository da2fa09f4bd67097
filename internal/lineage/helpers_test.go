package lineage

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/testclock"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

// epoch is the fake clock's start: a fixed time keeps tokens reproducible.
var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeClock is a clock tests move by hand.
type fakeClock = testclock.Clock

func newClock() *fakeClock { return testclock.New(epoch) }

// logBuffer collects log output, safe for the goroutines that log.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// golden compares got with testdata/name, or rewrites it with -update.
func matchGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// newKeyPEM returns a fresh private key of the given kind as PEM.
func newKeyPEM(t testing.TB, kind string) []byte {
	t.Helper()
	var key any
	switch kind {
	case "ed25519":
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = k
	case "es256":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		key = k
	default:
		t.Fatalf("unknown key kind %q", kind)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// replaceFile swaps path for a new file with data, as a deployment would:
// write aside, then rename over.
func replaceFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes data to a new file in a test directory.
func writeFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testSigner is a signer on testdata/ed25519.pem with a fake clock.
func testSigner(t testing.TB, clock *fakeClock, issuer string) *Signer {
	t.Helper()
	s, err := NewSigner(SignerOptions{
		KeyFile: filepath.Join("testdata", "ed25519.pem"),
		Issuer:  issuer,
		TTL:     time.Minute,
		Now:     clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
