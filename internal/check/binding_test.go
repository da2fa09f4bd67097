package check

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/dpop"
	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testcert"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestSenderConstrainedTokens tries what a thief of a bound token would:
// the token alone, the token with a proof of the thief's own key, a proof
// seen on the wire replayed or moved to another URL, and bindings this
// service cannot check. Each is refused with the challenge that says why;
// the token's owner, with its proof or certificate, passes.
func TestSenderConstrainedTokens(t *testing.T) {
	client, thief := testtoken.EC(t, ""), testtoken.EC(t, "")
	// clientCert is the x5t#S256 a token is bound to; presented and
	// otherCert are certificates as Envoy sends them (URL-encoded PEM).
	mine, other := testcert.New(t, "client"), testcert.New(t, "other")
	clientCert, presented, otherCert := mine.X5t(), testcert.URLEncodedPEM(mine.DER), testcert.URLEncodedPEM(other.DER)
	f := newFixture(t, "")
	bound := f.hs(t, jwt.MapClaims{"cnf": map[string]any{"jkt": client.Thumbprint(t)}})
	certBound := f.hs(t, jwt.MapClaims{"cnf": map[string]any{"x5t#S256": clientCert}})
	bearer := f.hs(t, nil)
	jti := 0
	proof := func(key testtoken.Key, token string, edit func(jwt.MapClaims)) string {
		jti++
		c := jwt.MapClaims{"jti": strings.Repeat("j", jti), "htm": "POST", "htu": "https://agent.example.com/a2a", "iat": t0.Unix(),
			"ath": dpop.AccessTokenHash(token)}
		if edit != nil {
			edit(c)
		}
		return key.Proof(t, nil, c)
	}
	replayed := proof(client, bound, nil)
	if v := f.pl.Check(context.Background(), agentReq(Headers{"authorization": "DPoP " + bound, "dpop": replayed})); v.Outcome != Allowed {
		t.Fatalf("the proof's first use: %v (%s)", v.Outcome, v.Description)
	}

	tests := []struct {
		name       string
		headers    Headers
		clientCert string
		want       Outcome
		challenge  string // in WWW-Authenticate
	}{
		{name: "bearer token as bearer", headers: Headers{"authorization": "Bearer " + bearer}, want: Allowed},
		{name: "bound token with its proof", headers: Headers{"authorization": "DPoP " + bound, "dpop": proof(client, bound, nil)}, want: Allowed},
		{name: "bound token, a cache hit, with a fresh proof", headers: Headers{"authorization": "DPoP " + bound, "dpop": proof(client, bound, nil)}, want: Allowed},
		{name: "stolen bound token as a bearer token", headers: Headers{"authorization": "Bearer " + bound},
			want: InvalidToken, challenge: `DPoP error="invalid_token", error_description="token is DPoP-bound`},
		{name: "stolen bound token in the alternative header", headers: Headers{"x-api-token": bound},
			want: InvalidToken, challenge: `DPoP error="invalid_token"`},
		{name: "stolen bound token with a proof of the thief's key", headers: Headers{"authorization": "DPoP " + bound, "dpop": proof(thief, bound, nil)},
			want: InvalidToken, challenge: `DPoP error="invalid_token", error_description="DPoP proof is signed by another key`},
		{name: "stolen bound token with a replayed proof", headers: Headers{"authorization": "DPoP " + bound, "dpop": replayed},
			want: InvalidToken, challenge: `DPoP error="invalid_dpop_proof", error_description="DPoP proof was used before"`},
		{name: "bound token without a proof", headers: Headers{"authorization": "DPoP " + bound},
			want: InvalidToken, challenge: `error="invalid_dpop_proof", error_description="DPoP proof is missing"`},
		{name: "proof made for another URL", headers: Headers{"authorization": "DPoP " + bound,
			"dpop": proof(client, bound, func(c jwt.MapClaims) { c["htu"] = "https://agent.example.com/other" })},
			want: InvalidToken, challenge: `error="invalid_dpop_proof", error_description="DPoP proof is invalid: htu`},
		{name: "proof made for another token", headers: Headers{"authorization": "DPoP " + bound, "dpop": proof(client, bearer, nil)},
			want: InvalidToken, challenge: `error_description="DPoP proof is invalid: ath`},
		{name: "bearer token with the DPoP scheme", headers: Headers{"authorization": "DPoP " + bearer, "dpop": proof(client, bearer, nil)},
			want: InvalidToken, challenge: `DPoP error="invalid_token", error_description="token is not DPoP-bound`},
		{name: "bound by a method not checked here", headers: Headers{"authorization": "Bearer " + f.hs(t, jwt.MapClaims{"cnf": map[string]any{"kid": "k1"}})},
			want: InvalidToken, challenge: `Bearer error="invalid_token", error_description="token is bound (cnf) by a method`},
		{name: "bound by a known and an unknown method", headers: Headers{"authorization": "Bearer " + f.hs(t, jwt.MapClaims{"cnf": map[string]any{"x5t#S256": clientCert, "jwk": map[string]any{"kty": "EC"}}})},
			clientCert: presented, want: InvalidToken, challenge: `by a method this service cannot check`},
		{name: "cnf not an object", headers: Headers{"authorization": "Bearer " + f.hs(t, jwt.MapClaims{"cnf": "bound"})},
			want: InvalidToken, challenge: `cnf is not an object`},
		{name: "cnf empty", headers: Headers{"authorization": "Bearer " + f.hs(t, jwt.MapClaims{"cnf": map[string]any{}})},
			want: InvalidToken, challenge: `cnf is not an object`},
		{name: "jkt not a thumbprint", headers: Headers{"authorization": "Bearer " + f.hs(t, jwt.MapClaims{"cnf": map[string]any{"jkt": "abc"}})},
			want: InvalidToken, challenge: `cnf is not an object`},
		{name: "cnf in another case", headers: Headers{"authorization": "Bearer " + f.hs(t, jwt.MapClaims{"CNF": map[string]any{"jkt": client.Thumbprint(t)}})},
			want: InvalidToken},
		{name: "certificate-bound token with its certificate", headers: Headers{"authorization": "Bearer " + certBound}, clientCert: presented, want: Allowed},
		{name: "certificate-bound token without a certificate", headers: Headers{"authorization": "Bearer " + certBound},
			want: InvalidToken, challenge: `Bearer error="invalid_token", error_description="token is bound to a client certificate`},
		{name: "certificate-bound token with another certificate", headers: Headers{"authorization": "Bearer " + certBound}, clientCert: otherCert,
			want: InvalidToken, challenge: `token is bound to a client certificate`},
		{name: "certificate-bound token with the DPoP scheme", headers: Headers{"authorization": "DPoP " + certBound, "dpop": proof(client, certBound, nil)},
			clientCert: presented, want: InvalidToken, challenge: `token is not DPoP-bound`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := agentReq(tc.headers)
			req.ClientCert = tc.clientCert
			v := f.pl.Check(context.Background(), req)
			if v.Outcome != tc.want {
				t.Fatalf("outcome %v (%s), want %v", v.Outcome, v.Description, tc.want)
			}
			got, _ := header(v.ResponseHeaders, "www-authenticate")
			if !strings.Contains(got, tc.challenge) {
				t.Fatalf("WWW-Authenticate %q, want it to hold %q", got, tc.challenge)
			}
			if strings.HasPrefix(got, "DPoP ") && !strings.Contains(got, `algs="ES256`) {
				t.Fatalf("a DPoP challenge names no algorithms: %q", got)
			}
		})
	}
}

// TestExplainSpendsNoProof: explaining a decision checks the proof but
// does not record it, so the client's request with it still passes.
func TestExplainSpendsNoProof(t *testing.T) {
	client := testtoken.EC(t, "")
	f := newFixture(t, "")
	bound := f.hs(t, jwt.MapClaims{"cnf": map[string]any{"jkt": client.Thumbprint(t)}})
	p := client.Proof(t, nil, jwt.MapClaims{"jti": "x", "htm": "POST", "htu": "https://agent.example.com/a2a", "iat": t0.Unix(), "ath": dpop.AccessTokenHash(bound)})
	req := func() *Request { return agentReq(Headers{"authorization": "DPoP " + bound, "dpop": p}) }
	if v, _ := f.pl.Explain(context.Background(), req()); v.Outcome != Allowed {
		t.Fatalf("explained: %v (%s)", v.Outcome, v.Description)
	}
	if v := f.pl.Check(context.Background(), req()); v.Outcome != Allowed {
		t.Fatalf("checked after the explanation: %v (%s)", v.Outcome, v.Description)
	}
	if v := f.pl.Check(context.Background(), req()); v.Outcome != InvalidToken {
		t.Fatalf("checked again: %v, want the replay refused", v.Outcome)
	}
}

// TestDPoPProofOnceAcrossReplicas: a proof accepted by one replica is
// refused by another sharing the Redis tier, the way an attacker who saw it
// on the wire would send it; with Redis down the check fails closed.
func TestDPoPProofOnceAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	client := testtoken.EC(t, "")
	var mint *fixture
	replica := func(addr string) *Pipeline {
		st, err := shared.New(t.Context(), shared.Config{Addrs: []string{addr}, OpTimeout: time.Second}, shared.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		f := newFixture(t, "")
		mint = f
		p := compileDoc(t, fmt.Sprintf(`
issuers: [{name: dev, algorithms: [HS256], secret: %s}]
routes: [{name: agent, default: true, issuers: [dev]}]
`, secret), Deps{Now: f.clock.Now})
		t.Cleanup(p.Close)
		pl, err := New(p, Options{Now: f.clock.Now, Shared: st})
		if err != nil {
			t.Fatal(err)
		}
		return mustLoad(t, pl)
	}
	// down read the revocations before Redis went down: a replica that
	// never did refuses every token earlier (TestReplicaStartedWithoutRedisWaitsForRevocations).
	a, b, down := replica(srv.Addr), replica(srv.Addr), replica(srv.Addr)
	bound := mint.hs(t, jwt.MapClaims{"cnf": map[string]any{"jkt": client.Thumbprint(t)}})
	p := client.Proof(t, nil, jwt.MapClaims{"jti": "once", "htm": "POST", "htu": "https://agent.example.com/a2a", "iat": t0.Unix(), "ath": dpop.AccessTokenHash(bound)})
	req := func() *Request { return agentReq(Headers{"authorization": "DPoP " + bound, "dpop": p}) }
	if v := a.Check(t.Context(), req()); v.Outcome != Allowed {
		t.Fatalf("first replica: %v (%s)", v.Outcome, v.Description)
	}
	if v := b.Check(t.Context(), req()); v.Outcome != InvalidToken || !strings.Contains(v.Description, "used before") {
		t.Fatalf("second replica: %v (%s), want the replay refused", v.Outcome, v.Description)
	}
	srv.Kill()
	if v := down.Check(t.Context(), req()); v.Outcome != Unavailable || !strings.Contains(v.Description, "DPoP replay check") {
		t.Fatalf("replica without Redis: %v (%s), want Unavailable", v.Outcome, v.Description)
	}
}

// routeOf names the route of the fixture's hosts, as Envoy does in
// context_extensions (the fixture's default route matches every host).
func routeOf(host string) map[string]string {
	name, _, _ := strings.Cut(host, ".")
	if name == "agent" {
		return nil
	}
	return map[string]string{"route": name + "-only"}
}

// TestSenderConstrainedRoutes: a route that takes only bound tokens
// refuses a valid bearer token, says so in its challenges and metadata,
// and still takes a token bound the way it asks.
func TestSenderConstrainedRoutes(t *testing.T) {
	client := testtoken.EC(t, "")
	mine := testcert.New(t, "client")
	cert, presented := mine.X5t(), testcert.URLEncodedPEM(mine.DER)
	f := newFixture(t, `  - {name: dpop-only, hosts: [dpop.example.com], issuers: [dev], sender_constrained: dpop}
  - {name: mtls-only, hosts: [mtls.example.com], issuers: [dev], sender_constrained: mtls}
`)
	bearer := f.hs(t, nil)
	keyBound := f.hs(t, jwt.MapClaims{"cnf": map[string]any{"jkt": client.Thumbprint(t)}})
	certBound := f.hs(t, jwt.MapClaims{"cnf": map[string]any{"x5t#S256": cert}})
	req := func(host string, h Headers, clientCert string) *Request {
		r := agentReq(h)
		r.Host, r.Headers[":authority"], r.ClientCert = host, host, clientCert
		r.ContextExtensions = routeOf(host)
		return r
	}
	proof := client.Proof(t, nil, jwt.MapClaims{"jti": "r1", "htm": "POST", "htu": "https://dpop.example.com/a2a", "iat": t0.Unix(), "ath": dpop.AccessTokenHash(keyBound)})
	tests := []struct {
		name      string
		req       *Request
		want      Outcome
		challenge string
	}{
		{name: "dpop route, no token", req: req("dpop.example.com", nil, ""), want: MissingToken, challenge: `DPoP resource_metadata="https://dpop.example.com/.well-known/oauth-protected-resource", algs="ES256`},
		{name: "dpop route, a bearer token", req: req("dpop.example.com", Headers{"authorization": "Bearer " + bearer}, ""),
			want: InvalidToken, challenge: `DPoP error="invalid_token", error_description="this route takes only DPoP-bound tokens"`},
		{name: "dpop route, a certificate-bound token", req: req("dpop.example.com", Headers{"authorization": "Bearer " + certBound}, presented),
			want: InvalidToken, challenge: `this route takes only DPoP-bound tokens`},
		{name: "dpop route, a DPoP-bound token and its proof", req: req("dpop.example.com", Headers{"authorization": "DPoP " + keyBound, "dpop": proof}, ""), want: Allowed},
		{name: "mtls route, a bearer token", req: req("mtls.example.com", Headers{"authorization": "Bearer " + bearer}, presented),
			want: InvalidToken, challenge: `Bearer error="invalid_token", error_description="this route takes only certificate-bound tokens"`},
		{name: "mtls route, a certificate-bound token with its certificate", req: req("mtls.example.com", Headers{"authorization": "Bearer " + certBound}, presented), want: Allowed},
		{name: "mtls route, no token", req: req("mtls.example.com", nil, presented), want: MissingToken, challenge: `Bearer resource_metadata=`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := f.pl.Check(context.Background(), tc.req)
			if v.Outcome != tc.want {
				t.Fatalf("outcome %v (%s), want %v", v.Outcome, v.Description, tc.want)
			}
			if got, _ := header(v.ResponseHeaders, "www-authenticate"); !strings.Contains(got, tc.challenge) {
				t.Fatalf("WWW-Authenticate %q, want it to hold %q", got, tc.challenge)
			}
		})
	}
	for host, want := range map[string]string{
		"dpop.example.com":  `"dpop_bound_access_tokens_required":true`,
		"mtls.example.com":  `"tls_client_certificate_bound_access_tokens":true`,
		"agent.example.com": `"dpop_signing_alg_values_supported":["ES256"`,
	} {
		r := &Request{Method: "GET", Scheme: "https", Host: host, Path: "/.well-known/oauth-protected-resource",
			Headers: Headers{":authority": host, ":method": "GET", ":path": "/.well-known/oauth-protected-resource"}, ContextExtensions: routeOf(host)}
		v := f.pl.Check(context.Background(), r)
		if v.Outcome != ResourceMetadata || !strings.Contains(string(v.Body), want) {
			t.Errorf("%s metadata: %v %s, want it to hold %s", host, v.Outcome, v.Body, want)
		}
		if host == "agent.example.com" && strings.Contains(string(v.Body), "required") {
			t.Errorf("a route taking bearer tokens says bound ones are required: %s", v.Body)
		}
	}
}

// TestIntrospectedDPoPToken: an opaque DPoP-bound token, reported by the
// introspection endpoint as token_type DPoP with its cnf.jkt, passes with a
// proof of that key and is refused as a bearer token or with another key's
// proof.
func TestIntrospectedDPoPToken(t *testing.T) {
	client, thief := testtoken.EC(t, ""), testtoken.EC(t, "")
	f := newCredFixture(t)
	const token = "opaque-dpop-bound"
	f.as.Set(token, map[string]any{"sub": "alice", "token_type": "DPoP", "cnf": map[string]any{"jkt": client.Thumbprint(t)}})
	proof := func(key testtoken.Key, jti string) string {
		return key.Proof(t, nil, jwt.MapClaims{"jti": jti, "htm": "GET", "htu": "https://tools.example.com/mcp", "iat": t0.Unix(),
			"ath": dpop.AccessTokenHash(token)})
	}
	tests := []struct {
		name    string
		headers Headers
		want    Outcome
	}{
		{name: "with its proof", headers: Headers{"authorization": "DPoP " + token, "dpop": proof(client, "a")}, want: Allowed},
		{name: "as a bearer token", headers: Headers{"authorization": "Bearer " + token}, want: InvalidToken},
		{name: "with a proof of another key", headers: Headers{"authorization": "DPoP " + token, "dpop": proof(thief, "b")}, want: InvalidToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if v := f.pl.Check(t.Context(), hostReq("tools.example.com", tc.headers)); v.Outcome != tc.want {
				t.Fatalf("%v (%s), want %v", v.Outcome, v.Description, tc.want)
			}
		})
	}
}

// TestDPoPFloodLocksNobodyOut: a user with a DPoP-bound token of its own
// sends fresh proofs as fast as it can. The replica's replay set must not
// fill up with them and turn every other DPoP client away (503): the
// flooding user is refused (429) once it holds its share, the others pass.
func TestDPoPFloodLocksNobodyOut(t *testing.T) {
	const entries = 16
	f := newFixture(t, fmt.Sprintf("dpop: {replay_entries: %d}\n", entries))
	mallory, alice := testtoken.EC(t, ""), testtoken.EC(t, "")
	tokenOf := func(sub string, key testtoken.Key) string {
		return f.hs(t, jwt.MapClaims{"sub": sub, "cnf": map[string]any{"jkt": key.Thumbprint(t)}})
	}
	malloryToken, aliceToken := tokenOf("mallory", mallory), tokenOf("alice", alice)
	jti := 0
	check := func(key testtoken.Key, token string) Verdict {
		jti++
		p := key.Proof(t, nil, jwt.MapClaims{"jti": fmt.Sprint(jti), "htm": "POST", "htu": "https://agent.example.com/a2a", "iat": t0.Unix(),
			"ath": dpop.AccessTokenHash(token)})
		return f.pl.Check(t.Context(), agentReq(Headers{"authorization": "DPoP " + token, "dpop": p}))
	}
	refused := 0
	for range entries {
		switch v := check(mallory, malloryToken); v.Outcome {
		case Allowed:
		case RateLimited:
			refused++
		default:
			t.Fatalf("mallory's flood: %v (%s)", v.Outcome, v.Description)
		}
	}
	if refused == 0 {
		t.Fatalf("all %d of mallory's proofs were accepted: the replay set is hers", entries)
	}
	if v := check(alice, aliceToken); v.Outcome != Allowed {
		t.Fatalf("alice after mallory's flood: %v (%s), want allowed", v.Outcome, v.Description)
	}
}
