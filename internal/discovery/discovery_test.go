package discovery

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func TestURLs(t *testing.T) {
	tests := []struct {
		name, issuer string
		want         []string
	}{
		{"host only", "https://idp.example", []string{"https://idp.example/.well-known/oauth-authorization-server", "https://idp.example/.well-known/openid-configuration"}},
		{"trailing slash", "https://idp.example/", []string{"https://idp.example/.well-known/oauth-authorization-server", "https://idp.example/.well-known/openid-configuration"}},
		{"issuer path: RFC 8414 inserts, OIDC appends", "https://idp.example/t/1", []string{"https://idp.example/.well-known/oauth-authorization-server/t/1", "https://idp.example/t/1/.well-known/openid-configuration"}},
		{"userinfo and query are not carried over", "https://u:p@idp.example/t?x=1", []string{"https://idp.example/.well-known/oauth-authorization-server/t", "https://idp.example/t/.well-known/openid-configuration"}},
		{"relative", "/t/1", nil},
		{"not a URL", "::", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := URLs(tc.issuer); strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("URLs(%q) = %q, want %q", tc.issuer, got, tc.want)
			}
		})
	}
}

// metadataServer serves docs by path; each doc is a Metadata whose Issuer
// "{issuer}" is replaced by the server's issuer URL.
func metadataServer(t *testing.T, path string, docs map[string]Metadata) (issuer string, hits func() []string) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		md, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if md.Issuer == "{issuer}" {
			md.Issuer = issuer
		}
		_ = json.NewEncoder(w).Encode(md)
	}))
	t.Cleanup(srv.Close)
	issuer = srv.URL + path
	return issuer, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

func TestDiscover(t *testing.T) {
	const jwks = "https://keys.example/jwks"
	tests := []struct {
		name     string
		path     string
		docs     map[string]Metadata
		wantJWKS string
		wantErr  string
		wantHits []string
	}{
		{
			name: "RFC 8414 first when both are served",
			docs: map[string]Metadata{
				"/.well-known/oauth-authorization-server": {Issuer: "{issuer}", JWKSURI: jwks},
				"/.well-known/openid-configuration":       {Issuer: "{issuer}", JWKSURI: "https://other.example/jwks"},
			},
			wantJWKS: jwks,
			wantHits: []string{"/.well-known/oauth-authorization-server"},
		},
		{
			name:     "OpenID Connect appended under an issuer path",
			path:     "/realms/a",
			docs:     map[string]Metadata{"/realms/a/.well-known/openid-configuration": {Issuer: "{issuer}", JWKSURI: jwks}},
			wantJWKS: jwks,
			wantHits: []string{"/.well-known/oauth-authorization-server/realms/a", "/realms/a/.well-known/openid-configuration"},
		},
		{
			name:    "metadata naming another issuer",
			docs:    map[string]Metadata{"/.well-known/oauth-authorization-server": {Issuer: "https://impostor.example", JWKSURI: jwks}},
			wantErr: `metadata names issuer "https://impostor.example"`,
		},
		{
			name:    "field missing",
			docs:    map[string]Metadata{"/.well-known/openid-configuration": {Issuer: "{issuer}"}},
			wantErr: "jwks_uri",
		},
		{
			name:    "nothing served",
			wantErr: "status 404",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			issuer, hits := metadataServer(t, tc.path, tc.docs)
			md, err := Discover(t.Context(), http.DefaultClient, issuer, 1<<20, JWKSURI)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Discover() = %+v, %v; want an error containing %q", md, err, tc.wantErr)
				}
				return
			}
			if err != nil || md.JWKSURI != tc.wantJWKS {
				t.Fatalf("Discover() = %+v, %v; want jwks_uri %q", md, err, tc.wantJWKS)
			}
			if strings.Join(hits(), " ") != strings.Join(tc.wantHits, " ") {
				t.Errorf("fetched %q, want %q", hits(), tc.wantHits)
			}
		})
	}
}

// An issuer configured with credentials in its URL (userinfo or query) never
// shows them in an error, whichever way the fetch fails.
func TestDiscoverScrubsCredentials(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	t.Cleanup(srv.Close)
	for _, base := range []string{srv.URL, downURL} {
		u, _ := url.Parse(base)
		u.User = url.UserPassword("client", "s3cret-pass")
		u.Path = "/tenant"
		issuer := u.String()
		_, err := Discover(t.Context(), http.DefaultClient, issuer, 1<<20, TokenEndpoint)
		if err == nil {
			t.Fatalf("Discover(%s) succeeded", base)
		}
		if strings.Contains(err.Error(), "s3cret-pass") || strings.Contains(err.Error(), "client:") {
			t.Fatalf("error shows credentials: %v", err)
		}
	}
}

func TestDiscoverTooLarge(t *testing.T) {
	var issuer string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat(" ", 100)))
		_ = json.NewEncoder(w).Encode(Metadata{Issuer: issuer, TokenEndpoint: "https://sts.example/token"})
	}))
	t.Cleanup(srv.Close)
	issuer = srv.URL
	if _, err := Discover(t.Context(), http.DefaultClient, issuer, 64, TokenEndpoint); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("Discover() over the limit = %v", err)
	}
	md, err := Discover(t.Context(), http.DefaultClient, issuer, 1<<10, TokenEndpoint)
	if err != nil || md.TokenEndpoint != "https://sts.example/token" {
		t.Fatalf("Discover() = %+v, %v", md, err)
	}
}
