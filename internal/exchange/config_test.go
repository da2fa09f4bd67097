package exchange_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

func TestNewRejects(t *testing.T) {
	ec := testtoken.EC(t, "ec")
	ecFile := writeKey(t, ec)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	const ep = "https://sts.example/token"
	tests := []struct {
		name string
		cfg  exchange.Config
		want string
	}{
		{"no endpoint or issuer", exchange.Config{}, "token endpoint or an issuer"},
		{"relative endpoint", exchange.Config{TokenEndpoint: "/token"}, "not an http(s) URL"},
		{"ftp issuer", exchange.Config{Issuer: "ftp://sts.example"}, "not an http(s) URL"},
		{"unknown method", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: "tls_client_auth", ClientID: "c"}}, "unknown client authentication method"},
		{"basic without secret", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: exchange.AuthClientSecretBasic, ClientID: "c"}}, "needs a client id and a client secret"},
		{"post without id", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: exchange.AuthClientSecretPost, ClientSecret: "s"}}, "needs a client id and a client secret"},
		{"secret with none", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: exchange.AuthNone, ClientSecret: "s"}}, "method is none"},
		{"private_key_jwt without key", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "c"}}, "private key file"},
		{"private_key_jwt key missing", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "c", PrivateKeyFile: filepath.Join(t.TempDir(), "none.pem")}}, "reading the client private key"},
		{"private_key_jwt not PEM", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "c", PrivateKeyFile: garbage}}, "no PEM private key"},
		{"algorithm not matching key", exchange.Config{TokenEndpoint: ep, Auth: exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "c", PrivateKeyFile: ecFile, Algorithm: "RS256"}}, "does not match the key"},
		{"id_token requested", exchange.Config{TokenEndpoint: ep, RequestedTokenType: exchange.TokenTypeIDToken}, "not usable as a bearer token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := exchange.New(tc.cfg, exchange.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestTargetValidate(t *testing.T) {
	tests := []struct {
		name   string
		target exchange.Target
		ok     bool
	}{
		{"empty", exchange.Target{}, true},
		{"audience and resource", exchange.Target{Audience: []string{"docs"}, Resource: []string{"https://docs.example/mcp"}}, true},
		{"empty audience", exchange.Target{Audience: []string{""}}, false},
		{"relative resource", exchange.Target{Resource: []string{"/mcp"}}, false},
		{"resource with fragment", exchange.Target{Resource: []string{"https://docs.example/mcp#x"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.target.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok = %v", err, tc.ok)
			}
		})
	}
}

func TestTargetOverride(t *testing.T) {
	route := exchange.Target{Audience: []string{"files"}, Resource: []string{"https://files.example/mcp"}, Scope: "files.read"}
	tests := []struct {
		name     string
		override exchange.Target
		want     exchange.Target
	}{
		{"none", exchange.Target{}, route},
		{"scope", exchange.Target{Scope: "files.write"}, exchange.Target{Audience: route.Audience, Resource: route.Resource, Scope: "files.write"}},
		{"audience", exchange.Target{Audience: []string{"admin"}}, exchange.Target{Audience: []string{"admin"}, Resource: route.Resource, Scope: route.Scope}},
		{"everything", exchange.Target{Audience: []string{"a"}, Resource: []string{"https://a.example"}, Scope: "s"}, exchange.Target{Audience: []string{"a"}, Resource: []string{"https://a.example"}, Scope: "s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := route.Override(tc.override); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Override = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestKind(t *testing.T) {
	tests := []struct {
		kind   exchange.Kind
		name   string
		status int
	}{
		{exchange.Unavailable, "unavailable", 503},
		{exchange.Unauthorized, "unauthorized", 401},
		{exchange.Forbidden, "forbidden", 403},
		{exchange.InteractionRequired, "interaction_required", 403},
		{exchange.Kind(0), "unknown", 503},
		{exchange.Kind(99), "unknown", 503},
	}
	for _, tc := range tests {
		if tc.kind.String() != tc.name || tc.kind.HTTPStatus() != tc.status {
			t.Errorf("Kind(%d) = %q %d, want %q %d", tc.kind, tc.kind.String(), tc.kind.HTTPStatus(), tc.name, tc.status)
		}
	}
	if exchange.KindOf(nil) != 0 || exchange.KindOf(os.ErrNotExist) != exchange.Unavailable {
		t.Error("KindOf of nil or a foreign error")
	}
}
