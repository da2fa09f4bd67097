package httpauthz

import (
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/dpop"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestDPoPBehindProxies: a DPoP proof names the URL the client called,
// which a forward-auth check learns from the proxy's conventions (Traefik
// and Caddy's X-Forwarded-*, ingress-nginx's X-Original-URL). A proof of
// that URL passes through each; a proof made for another URL, or the bound
// token without one, is answered with the DPoP challenge the client needs.
func TestDPoPBehindProxies(t *testing.T) {
	client := testtoken.EC(t, "")
	bound := token(t, jwt.MapClaims{"cnf": map[string]any{"jkt": client.Thumbprint(t)}})
	jti := 0
	proof := func(method, htu string) string {
		jti++
		return client.Proof(t, nil, jwt.MapClaims{"jti": strings.Repeat("p", jti), "htm": method, "htu": htu,
			"iat": t0.Unix(), "ath": dpop.AccessTokenHash(bound)})
	}
	forwarded := func(uri, p string) http.Header {
		return http.Header{"X-Forwarded-Method": {"GET"}, "X-Forwarded-Uri": {uri}, "X-Forwarded-Host": {"agent.example.com"},
			"X-Forwarded-Proto": {"https"}, "Authorization": {"DPoP " + bound}, "Dpop": {p}}
	}
	tests := []struct {
		name      string
		header    http.Header
		status    int
		challenge string
	}{
		{name: "traefik: the proof of the URL called", header: forwarded("/a2a?q=1", proof("GET", "https://agent.example.com/a2a")), status: 200},
		{name: "traefik: a proof made for another path", header: forwarded("/a2a", proof("GET", "https://agent.example.com/admin")),
			status: 401, challenge: `DPoP error="invalid_dpop_proof", error_description="DPoP proof is invalid: htu is not the request's URI"`},
		{name: "traefik: a proof made for plain http", header: forwarded("/a2a", proof("GET", "http://agent.example.com/a2a")),
			status: 401, challenge: `error="invalid_dpop_proof"`},
		{name: "traefik: a proof made for another method", header: forwarded("/a2a", proof("POST", "https://agent.example.com/a2a")),
			status: 401, challenge: `error="invalid_dpop_proof"`},
		{name: "ingress-nginx: the proof of the URL called", header: http.Header{"X-Original-Url": {"https://agent.example.com/a2a?x=1"},
			"X-Original-Method": {"GET"}, "Authorization": {"DPoP " + bound}, "Dpop": {proof("GET", "https://agent.example.com/a2a")}}, status: 200},
		{name: "the bound token as a bearer token", header: http.Header{"X-Forwarded-Method": {"GET"}, "X-Forwarded-Uri": {"/a2a"},
			"X-Forwarded-Host": {"agent.example.com"}, "X-Forwarded-Proto": {"https"}, "Authorization": {"Bearer " + bound}},
			status: 401, challenge: `DPoP error="invalid_token", error_description="token is DPoP-bound`},
		{name: "two proofs", header: func() http.Header {
			h := forwarded("/a2a", proof("GET", "https://agent.example.com/a2a"))
			h.Add("Dpop", proof("GET", "https://agent.example.com/a2a"))
			return h
		}(), status: 401, challenge: `error_description="more than one DPoP proof"`},
	}
	srv := serve(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := ask{path: "/check", header: tc.header}.do(t, srv)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, readAll(t, res.Body))
			}
			if got := res.Header.Get("Www-Authenticate"); !strings.Contains(got, tc.challenge) {
				t.Fatalf("WWW-Authenticate %q, want it to hold %q", got, tc.challenge)
			}
		})
	}
}
