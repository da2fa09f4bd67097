package oauthclient_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/oauthclient"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

func writeKey(t *testing.T, k testtoken.Key) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name       string
		in         oauthclient.Config
		wantMethod string
		wantErr    string
	}{
		{"empty is none", oauthclient.Config{}, oauthclient.None, ""},
		{"secret defaults to basic", oauthclient.Config{ClientID: "c", ClientSecret: "s"}, oauthclient.ClientSecretBasic, ""},
		{"post without id", oauthclient.Config{Method: oauthclient.ClientSecretPost, ClientSecret: "s"}, "", "needs a client id and a client secret"},
		{"secret with none", oauthclient.Config{Method: oauthclient.None, ClientSecret: "s"}, "", "method is none"},
		{"private_key_jwt without key", oauthclient.Config{Method: oauthclient.PrivateKeyJWT, ClientID: "c"}, "", "private key file"},
		{"unknown", oauthclient.Config{Method: "tls_client_auth"}, "", "unknown client authentication method"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.Normalize()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Method != tc.wantMethod {
				t.Fatalf("Normalize = %q, %v; want %q", got.Method, err, tc.wantMethod)
			}
		})
	}
}

func TestApply(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	ec := testtoken.EC(t, "ec-1")
	const endpoint = "https://as.example/introspect"
	tests := []struct {
		name  string
		cfg   oauthclient.Config
		check func(t *testing.T, form url.Values, h http.Header)
	}{
		{"basic escapes before base64", oauthclient.Config{Method: oauthclient.ClientSecretBasic, ClientID: "gw:1 +", ClientSecret: "s:%"}, func(t *testing.T, form url.Values, h http.Header) {
			want := "Basic " + base64.StdEncoding.EncodeToString([]byte("gw%3A1+%2B:s%3A%25"))
			if got := h.Get("Authorization"); got != want || len(form) != 0 {
				t.Errorf("Authorization = %q, form %v; want %q", got, form, want)
			}
		}},
		{"post", oauthclient.Config{Method: oauthclient.ClientSecretPost, ClientID: "gw", ClientSecret: "s"}, func(t *testing.T, form url.Values, h http.Header) {
			if form.Get("client_id") != "gw" || form.Get("client_secret") != "s" || h.Get("Authorization") != "" {
				t.Errorf("form %v header %v", form, h)
			}
		}},
		{"none with id", oauthclient.Config{ClientID: "pub"}, func(t *testing.T, form url.Values, h http.Header) {
			if form.Get("client_id") != "pub" || form.Has("client_secret") {
				t.Errorf("form %v", form)
			}
		}},
		{"private_key_jwt", oauthclient.Config{Method: oauthclient.PrivateKeyJWT, ClientID: "gw", PrivateKeyFile: writeKey(t, ec), KeyID: "ec-1"}, func(t *testing.T, form url.Values, h http.Header) {
			if form.Get("client_assertion_type") != oauthclient.AssertionType {
				t.Fatalf("assertion type %q", form.Get("client_assertion_type"))
			}
			tok, err := jwt.Parse(form.Get("client_assertion"), func(*jwt.Token) (any, error) { return ec.Private.Public(), nil },
				jwt.WithValidMethods([]string{"ES256"}), jwt.WithTimeFunc(func() time.Time { return now }), jwt.WithAudience(endpoint), jwt.WithIssuer("gw"), jwt.WithSubject("gw"))
			if err != nil {
				t.Fatalf("assertion: %v", err)
			}
			if tok.Header["kid"] != "ec-1" {
				t.Errorf("kid = %v", tok.Header["kid"])
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := oauthclient.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			form, h := url.Values{}, http.Header{}
			if err := a.Apply(form, h, endpoint, now); err != nil {
				t.Fatal(err)
			}
			tc.check(t, form, h)
		})
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	ec := writeKey(t, testtoken.EC(t, "ec"))
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, file, alg, want string
	}{
		{"missing", filepath.Join(t.TempDir(), "none.pem"), "", "reading the client private key"},
		{"not PEM", garbage, "", "no PEM private key"},
		{"algorithm mismatch", ec, "RS256", "does not match the key"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := oauthclient.New(oauthclient.Config{Method: oauthclient.PrivateKeyJWT, ClientID: "c", PrivateKeyFile: tc.file, Algorithm: tc.alg})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
