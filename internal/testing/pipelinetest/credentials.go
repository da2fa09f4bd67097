package pipelinetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/testing/introspecttest"
)

// Credentials are issuers of the other credential kinds for a fixture: an
// introspection issuer "opaque" backed by a running test authorization
// server, and an API-key issuer "keys" backed by a keys file.
type Credentials struct {
	// Issuers is YAML to put under issuers: (two list items).
	Issuers string
	// Getenv supplies the introspection client secret (check.Deps.Getenv).
	Getenv func(string) string
	// APIKey is a valid key of subject "agent"; Opaque an active opaque
	// token of subject "carol", valid for an hour. Each names a session.
	APIKey, Opaque string
	AS             *introspecttest.Server
}

// NewCredentials starts the authorization server and writes the keys file.
func NewCredentials(tb testing.TB) Credentials {
	tb.Helper()
	as := introspecttest.New(tb, introspecttest.Options{})
	const opaque = "2YotnFZFEjr1zCsicMWpAA"
	// Both name a session, as the JWTs of the benchmarks do: a check
	// without one mints a lineage context id each time.
	as.Set(opaque, map[string]any{"sub": "carol", "scope": "read", "session_id": "sess-carol", "exp": float64(time.Now().Add(time.Hour).Unix())})
	key, entry, err := apikey.NewEntry("agent-key", "agent", []string{"read"})
	if err != nil {
		tb.Fatal(err)
	}
	entry.Claims = map[string]any{"session_id": "sess-agent"}
	doc, err := entry.YAML()
	if err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(tb.TempDir(), "keys.yaml")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		tb.Fatal(err)
	}
	issuers := fmt.Sprintf(`  - name: opaque
    issuer: %s
    introspection:
      endpoint: %s
      client_auth: {method: client_secret_basic, client_id: %s, client_secret_env: INTROSPECTION_SECRET}
  - name: keys
    api_keys: {file: %s, header: x-api-key}
`, as.URL, as.IntrospectURL, introspecttest.ClientID, file)
	getenv := func(k string) string {
		if k == "INTROSPECTION_SECRET" {
			return introspecttest.ClientSecret
		}
		return ""
	}
	return Credentials{Issuers: issuers, Getenv: getenv, APIKey: key, Opaque: opaque, AS: as}
}
