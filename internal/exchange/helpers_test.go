package exchange_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testclock"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// clock is a settable clock shared by the Exchanger and the STS.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Unix(1_800_000_000, 0)) }

// subjects mints inbound tokens; the STS reads them unverified.
var subjectKey = sync.OnceValue(func() testtoken.Key {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return testtoken.Key{KID: "idp-1", Alg: "EdDSA", Private: k}
})

func subjectToken(t testing.TB, c *clock, sub string, extra jwt.MapClaims) string {
	t.Helper()
	claims := jwt.MapClaims{"iss": "https://idp.example", "sub": sub, "aud": "gateway", "exp": c.Now().Add(time.Hour).Unix(), "session_id": "sess-" + sub}
	for k, v := range extra {
		claims[k] = v
	}
	return subjectKey().Sign(t, claims)
}

// newSTS starts an STS on c's clock.
func newSTS(t testing.TB, c *clock, o ststest.Options) *ststest.Server {
	t.Helper()
	o.Now = c.Now
	return ststest.New(t, o)
}

// newExchanger returns an Exchanger for sts with the default client, on c's
// clock, closed when the test ends. edit adjusts the config.
func newExchanger(t testing.TB, c *clock, sts *ststest.Server, edit func(*exchange.Config)) *exchange.Exchanger {
	t.Helper()
	cfg := exchange.Config{
		TokenEndpoint: sts.TokenURL,
		Auth: exchange.ClientAuth{
			Method:       exchange.AuthClientSecretBasic,
			ClientID:     ststest.DefaultClient.ID,
			ClientSecret: ststest.DefaultClient.Secret,
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	e, err := exchange.New(cfg, exchange.Options{HTTPClient: sts.Client(), Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// writeKey writes k's private key as PKCS#8 PEM and returns the path.
func writeKey(t testing.TB, k testtoken.Key) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), k.KID+".pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// asError returns err's *exchange.Error or fails.
func asError(t testing.TB, err error) *exchange.Error {
	t.Helper()
	e, ok := err.(*exchange.Error)
	if !ok {
		t.Fatalf("error = %T %v, want *exchange.Error", err, err)
	}
	return e
}
