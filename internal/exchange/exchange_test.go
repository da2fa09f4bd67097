package exchange_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

var (
	alice   = exchange.Owner{Subject: "alice", Session: "mcp-1"}
	docsAPI = exchange.Target{Audience: []string{"docs-api"}, Scope: "docs.read"}
)

func TestClientAuthentication(t *testing.T) {
	rsa, ec, ed := testtoken.RSA(t, "rsa-1"), testtoken.EC(t, "ec-1"), testtoken.Ed(t, "ed-1")
	tests := []struct {
		name   string
		client ststest.Client
		auth   func(t *testing.T) exchange.ClientAuth
	}{
		{
			name: "client_secret_basic",
			// Characters RFC 6749 section 2.3.1 makes us form-encode.
			client: ststest.Client{ID: "gw:1 +", Method: "client_secret_basic", Secret: "s3cr%t:with +/="},
			auth: func(*testing.T) exchange.ClientAuth {
				return exchange.ClientAuth{Method: exchange.AuthClientSecretBasic, ClientID: "gw:1 +", ClientSecret: "s3cr%t:with +/="}
			},
		},
		{
			name:   "secret without method means basic",
			client: ststest.Client{ID: "gw", Method: "client_secret_basic", Secret: "secret"},
			auth: func(*testing.T) exchange.ClientAuth {
				return exchange.ClientAuth{ClientID: "gw", ClientSecret: "secret"}
			},
		},
		{
			name:   "client_secret_post",
			client: ststest.Client{ID: "gw", Method: "client_secret_post", Secret: "secret&="},
			auth: func(*testing.T) exchange.ClientAuth {
				return exchange.ClientAuth{Method: exchange.AuthClientSecretPost, ClientID: "gw", ClientSecret: "secret&="}
			},
		},
		{
			name:   "private_key_jwt RS256",
			client: ststest.Client{ID: "gw", Method: "private_key_jwt", Key: rsa.Private.Public()},
			auth: func(t *testing.T) exchange.ClientAuth {
				return exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "gw", PrivateKeyFile: writeKey(t, rsa), KeyID: "rsa-1"}
			},
		},
		{
			name:   "private_key_jwt ES256",
			client: ststest.Client{ID: "gw", Method: "private_key_jwt", Key: ec.Private.Public()},
			auth: func(t *testing.T) exchange.ClientAuth {
				return exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "gw", PrivateKeyFile: writeKey(t, ec), Algorithm: "ES256"}
			},
		},
		{
			name:   "private_key_jwt EdDSA with issuer audience",
			client: ststest.Client{ID: "gw", Method: "private_key_jwt", Key: ed.Private.Public()},
			auth: func(t *testing.T) exchange.ClientAuth {
				return exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "gw", PrivateKeyFile: writeKey(t, ed), Algorithm: "EdDSA", Audience: "ISSUER"}
			},
		},
		{
			name:   "none",
			client: ststest.Client{ID: "public-gw", Method: "none"},
			auth: func(*testing.T) exchange.ClientAuth {
				return exchange.ClientAuth{Method: exchange.AuthNone, ClientID: "public-gw"}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, ststest.Options{Clients: []ststest.Client{tc.client}})
			auth := tc.auth(t)
			if auth.Audience == "ISSUER" {
				auth.Audience = sts.Issuer
			}
			e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.Auth = auth })

			// Two misses: a private_key_jwt assertion must be fresh (jti) each time.
			for _, session := range []string{"s1", "s2"} {
				tok, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, exchange.Owner{Subject: "alice", Session: session})
				if err != nil {
					t.Fatalf("Exchange: %v", err)
				}
				claims, err := sts.Verify(tok.Value)
				if err != nil {
					t.Fatalf("issued token: %v", err)
				}
				if claims["client_id"] != tc.client.ID || claims["sub"] != "alice" {
					t.Errorf("issued claims = %v", claims)
				}
			}
			last, _ := sts.Last()
			if last.AuthMethod != tc.client.Method || last.ClientID != tc.client.ID {
				t.Errorf("STS saw client %q by %q, want %q by %q", last.ClientID, last.AuthMethod, tc.client.ID, tc.client.Method)
			}
			if tc.client.Method != "client_secret_post" && last.Form.Has("client_secret") {
				t.Error("client_secret sent in the form")
			}
		})
	}
}

func TestClientAuthenticationRefused(t *testing.T) {
	ec := testtoken.EC(t, "ec-1")
	other := testtoken.EC(t, "other")
	tests := []struct {
		name   string
		client ststest.Client
		auth   exchange.ClientAuth
		keyOf  testtoken.Key
	}{
		{"wrong secret", ststest.Client{ID: "gw", Method: "client_secret_basic", Secret: "right"},
			exchange.ClientAuth{ClientID: "gw", ClientSecret: "wrong"}, testtoken.Key{}},
		{"method not registered", ststest.Client{ID: "gw", Method: "client_secret_basic", Secret: "s"},
			exchange.ClientAuth{Method: exchange.AuthClientSecretPost, ClientID: "gw", ClientSecret: "s"}, testtoken.Key{}},
		{"assertion signed by another key", ststest.Client{ID: "gw", Method: "private_key_jwt", Key: ec.Private.Public()},
			exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "gw"}, other},
		{"assertion for another audience", ststest.Client{ID: "gw", Method: "private_key_jwt", Key: ec.Private.Public()},
			exchange.ClientAuth{Method: exchange.AuthPrivateKeyJWT, ClientID: "gw", Audience: "https://elsewhere.example"}, ec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, ststest.Options{Clients: []ststest.Client{tc.client}})
			auth := tc.auth
			if tc.keyOf.Private != nil {
				auth.PrivateKeyFile = writeKey(t, tc.keyOf)
			}
			e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.Auth = auth })
			_, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, alice)
			xe := asError(t, err)
			if xe.Kind != exchange.Unavailable || xe.Code != "invalid_client" || xe.Status != http.StatusUnauthorized {
				t.Errorf("error = %+v, want Unavailable invalid_client 401", xe)
			}
			// A misconfiguration is not an outage: the breaker stays closed.
			if e.Stats().BreakerOpen {
				t.Error("breaker opened on invalid_client")
			}
		})
	}
}

func TestRequestParameters(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.RequestedTokenType = exchange.TokenTypeJWT })
	target := exchange.Target{
		Audience: []string{"docs-api", "search-api"},
		Resource: []string{"https://docs.example/mcp"},
		Scope:    "docs.read docs.write",
	}
	subject := subjectToken(t, c, "alice", nil)
	tok, err := e.Exchange(context.Background(), subject, target, alice)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := sts.Last()
	want := map[string][]string{
		"grant_type":           {exchange.GrantTypeTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {exchange.TokenTypeAccessToken},
		"requested_token_type": {exchange.TokenTypeJWT},
		"audience":             target.Audience,
		"resource":             target.Resource,
		"scope":                {target.Scope},
	}
	for k, v := range want {
		if !slices.Equal(last.Form[k], v) {
			t.Errorf("form[%s] = %q, want %q", k, last.Form[k], v)
		}
	}
	for _, k := range []string{"actor_token", "actor_token_type", "client_secret"} {
		if last.Form.Has(k) {
			t.Errorf("form has %s", k)
		}
	}
	if tok.IssuedTokenType != exchange.TokenTypeJWT || tok.Scope != target.Scope || tok.Authorization != "Bearer "+tok.Value {
		t.Errorf("token = %v, Authorization prefix ok = %v", tok, strings.HasPrefix(tok.Authorization, "Bearer "))
	}
	claims, err := sts.Verify(tok.Value)
	if err != nil {
		t.Fatal(err)
	}
	aud, _ := claims.GetAudience()
	if !slices.Equal(aud, []string{"docs-api", "search-api", "https://docs.example/mcp"}) {
		t.Errorf("aud = %q", aud)
	}
	if got, want := tok.ExpiresAt, c.Now().Add(5*time.Minute); !got.Equal(want) {
		t.Errorf("ExpiresAt = %v, want %v", got, want)
	}
}

func TestCacheKey(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, nil)
	aliceToken, bobToken := subjectToken(t, c, "alice", nil), subjectToken(t, c, "bob", nil)
	ctx := context.Background()
	if _, err := e.Exchange(ctx, aliceToken, docsAPI, alice); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		subject string
		target  exchange.Target
		owner   exchange.Owner
		newCall bool
	}{
		{"same everything", aliceToken, docsAPI, alice, false},
		{"same target rebuilt", aliceToken, exchange.Target{Audience: []string{"docs-api"}, Scope: "docs.read"}, alice, false},
		{"another subject token", bobToken, docsAPI, exchange.Owner{Subject: "bob", Session: "mcp-1"}, true},
		{"another audience", aliceToken, exchange.Target{Audience: []string{"search-api"}, Scope: "docs.read"}, alice, true},
		{"a URL as audience", aliceToken, exchange.Target{Audience: []string{"https://docs.example/"}}, alice, true},
		{"the same URL as resource", aliceToken, exchange.Target{Resource: []string{"https://docs.example/"}}, alice, true},
		{"two audiences", aliceToken, exchange.Target{Audience: []string{"a", "b"}}, alice, true},
		{"the same audiences in one", aliceToken, exchange.Target{Audience: []string{"ab"}}, alice, true},
		{"another scope", aliceToken, exchange.Target{Audience: []string{"docs-api"}, Scope: "docs.write"}, alice, true},
		{"another session", aliceToken, docsAPI, exchange.Owner{Subject: "alice", Session: "mcp-2"}, true},
		{"no session", aliceToken, docsAPI, exchange.Owner{Subject: "alice"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := sts.Calls()
			if _, err := e.Exchange(ctx, tc.subject, tc.target, tc.owner); err != nil {
				t.Fatal(err)
			}
			if got := sts.Calls() - before; got != map[bool]int{false: 0, true: 1}[tc.newCall] {
				t.Errorf("STS calls = %d, new call wanted: %v", got, tc.newCall)
			}
		})
	}
}

func TestSingleFlight(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	// Unbounded waiters: this is about sharing one call (TestWaitersBounded
	// covers the bound).
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.MaxWaiting = -1 })
	subject := subjectToken(t, c, "alice", nil)

	release := sts.Pause()
	const n = 100
	var started, done sync.WaitGroup
	tokens := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			tok, err := e.Exchange(context.Background(), subject, docsAPI, alice)
			tokens[i], errs[i] = tok.Value, err
		}()
	}
	started.Wait()
	release()
	done.Wait()

	if got := sts.Calls(); got != 1 {
		t.Errorf("STS calls = %d, want 1", got)
	}
	for i := range n {
		if errs[i] != nil || tokens[i] != tokens[0] || tokens[i] == "" {
			t.Fatalf("caller %d: token equal = %v, err = %v", i, tokens[i] == tokens[0], errs[i])
		}
	}
}

func TestRefreshBeforeExpiry(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{Lifetime: 120 * time.Second})
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) {
		cfg.SafetyMargin = 10 * time.Second // used until 110s
		cfg.RefreshAhead = 30 * time.Second // refreshed from 80s
	})
	ctx := context.Background()
	subject := subjectToken(t, c, "alice", nil)
	first, err := e.Exchange(ctx, subject, docsAPI, alice)
	if err != nil {
		t.Fatal(err)
	}

	c.Advance(79 * time.Second)
	if tok, _ := e.Exchange(ctx, subject, docsAPI, alice); tok.Value != first.Value {
		t.Fatal("token changed before the refresh window")
	}
	e.WaitBackground()
	if got := sts.Calls(); got != 1 {
		t.Fatalf("STS calls before the refresh window = %d, want 1", got)
	}

	// In the window: the request is answered from the cache while the STS
	// is held; the refresh runs behind it.
	c.Advance(2 * time.Second)
	release := sts.Pause()
	tok, err := e.Exchange(ctx, subject, docsAPI, alice)
	if err != nil || tok.Value != first.Value {
		t.Fatalf("in the refresh window got a new token or %v", err)
	}
	// Only one refresh for many requests.
	for range 10 {
		if _, err := e.Exchange(ctx, subject, docsAPI, alice); err != nil {
			t.Fatal(err)
		}
	}
	release()
	e.WaitBackground()
	if got := sts.Calls(); got != 2 {
		t.Fatalf("STS calls after refresh = %d, want 2", got)
	}
	tok, err = e.Exchange(ctx, subject, docsAPI, alice)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Value == first.Value || !tok.ExpiresAt.After(first.ExpiresAt) {
		t.Errorf("after refresh: same token = %v, expires %v (was %v)", tok.Value == first.Value, tok.ExpiresAt, first.ExpiresAt)
	}
	if s := e.Stats(); s.Refreshes != 1 {
		t.Errorf("Stats.Refreshes = %d, want 1", s.Refreshes)
	}
}

func TestRefreshFailure(t *testing.T) {
	tests := []struct {
		name      string
		fault     ststest.Fault
		failure   *ststest.Failure
		keepToken bool
	}{
		{name: "STS down keeps the token", fault: ststest.Fault{Status: http.StatusServiceUnavailable}, keepToken: true},
		{name: "subject refused drops it", failure: &ststest.Failure{Code: "invalid_grant"}},
		{name: "consent revoked drops it", failure: &ststest.Failure{Code: "consent_required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, ststest.Options{Lifetime: 120 * time.Second})
			e := newExchanger(t, c, sts, func(cfg *exchange.Config) {
				cfg.SafetyMargin, cfg.RefreshAhead = 10*time.Second, 30*time.Second
			})
			ctx := context.Background()
			subject := subjectToken(t, c, "alice", nil)
			first, err := e.Exchange(ctx, subject, docsAPI, alice)
			if err != nil {
				t.Fatal(err)
			}
			sts.SetFault(tc.fault)
			if tc.failure != nil {
				sts.SetFailure("docs-api", *tc.failure)
			}
			c.Advance(85 * time.Second)
			if tok, err := e.Exchange(ctx, subject, docsAPI, alice); err != nil || tok.Value != first.Value {
				t.Fatalf("refresh window: %v", err)
			}
			e.WaitBackground()
			tok, err := e.Exchange(ctx, subject, docsAPI, alice)
			if tc.keepToken {
				if err != nil || tok.Value != first.Value {
					t.Errorf("after failed refresh: err = %v, same token = %v", err, tok.Value == first.Value)
				}
				return
			}
			if err == nil {
				t.Error("after a refused refresh the old token is still served")
			}
		})
	}
}

func TestLifetime(t *testing.T) {
	tests := []struct {
		name     string
		opts     ststest.Options
		lifetime time.Duration // what ExpiresAt should be from now
	}{
		{"expires_in", ststest.Options{Lifetime: 10 * time.Minute}, 10 * time.Minute},
		{"exp when expires_in is absent", ststest.Options{Lifetime: 7 * time.Minute, OmitExpiresIn: true}, 7 * time.Minute},
		{"exp when it is earlier than expires_in", ststest.Options{Lifetime: 3 * time.Minute, Respond: func(r map[string]any) { r["expires_in"] = 3600 }}, 3 * time.Minute},
		{"expires_in as a string", ststest.Options{Lifetime: 4 * time.Minute, Respond: func(r map[string]any) { r["expires_in"] = "240" }}, 4 * time.Minute},
		{"fallback for an opaque token", ststest.Options{OmitExpiresIn: true, Respond: func(r map[string]any) { r["access_token"] = "opaque-token-value" }}, 90 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, tc.opts)
			e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.FallbackLifetime = 90 * time.Second })
			tok, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, alice)
			if err != nil {
				t.Fatal(err)
			}
			if want := c.Now().Add(tc.lifetime); !tok.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v", tok.ExpiresAt, want)
			}
		})
	}
}

func TestCachedUntilSafetyMargin(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{Lifetime: 5 * time.Minute})
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) {
		cfg.SafetyMargin = 30 * time.Second
		cfg.RefreshAhead = time.Nanosecond // keep refreshes out of this test
	})
	ctx := context.Background()
	subject := subjectToken(t, c, "alice", nil)
	if _, err := e.Exchange(ctx, subject, docsAPI, alice); err != nil {
		t.Fatal(err)
	}
	c.Advance(4*time.Minute + 29*time.Second)
	if _, err := e.Exchange(ctx, subject, docsAPI, alice); err != nil || sts.Calls() != 1 {
		t.Fatalf("before the margin: calls = %d, err = %v", sts.Calls(), err)
	}
	e.WaitBackground()
	c.Advance(time.Second)
	if _, err := e.Exchange(ctx, subject, docsAPI, alice); err != nil {
		t.Fatal(err)
	}
	if got := sts.Calls(); got != 2 {
		t.Errorf("token used inside its safety margin: STS calls = %d", got)
	}
}

func TestFailureMapping(t *testing.T) {
	tests := []struct {
		code   string
		status int // the STS's
		kind   exchange.Kind
		http   int
	}{
		{"invalid_grant", 400, exchange.Unauthorized, 401},
		{"invalid_token", 401, exchange.Unauthorized, 401},
		{"invalid_target", 400, exchange.Forbidden, 403},
		{"unauthorized_client", 400, exchange.Forbidden, 403},
		{"invalid_scope", 400, exchange.Forbidden, 403},
		{"access_denied", 403, exchange.Forbidden, 403},
		{"interaction_required", 400, exchange.InteractionRequired, 403},
		{"consent_required", 400, exchange.InteractionRequired, 403},
		{"login_required", 400, exchange.InteractionRequired, 403},
		{"invalid_request", 400, exchange.Unavailable, 503},
		{"unsupported_grant_type", 400, exchange.Unavailable, 503},
		{"temporarily_unavailable", 400, exchange.Unavailable, 503},
		{"server_error", 500, exchange.Unavailable, 503},
		{"something_new", 400, exchange.Unavailable, 503},
	}
	failures := map[string]ststest.Failure{}
	for _, tc := range tests {
		failures["aud-"+tc.code] = ststest.Failure{Status: tc.status, Code: tc.code, Description: "because \"policy\" said so\n"}
	}
	c := newClock()
	sts := newSTS(t, c, ststest.Options{Failures: failures})
	e := newExchanger(t, c, sts, nil)
	subject := subjectToken(t, c, "alice", nil)
	for _, tc := range tests {
		t.Run(tc.code, func(t *testing.T) {
			_, err := e.Exchange(context.Background(), subject, exchange.Target{Audience: []string{"aud-" + tc.code}}, alice)
			xe := asError(t, err)
			if xe.Kind != tc.kind || xe.Kind.HTTPStatus() != tc.http || xe.Code != tc.code || xe.Status != tc.status {
				t.Errorf("error = kind %v (%d) code %q status %d, want %v (%d) %q %d", xe.Kind, xe.Kind.HTTPStatus(), xe.Code, xe.Status, tc.kind, tc.http, tc.code, tc.status)
			}
			if xe.Description != `because policy said so` {
				t.Errorf("Description = %q, want the STS's text with only RFC 6749 characters", xe.Description)
			}
			if (xe.Kind == exchange.Unavailable) != (xe.RetryAfter > 0) {
				t.Errorf("RetryAfter = %v for %v", xe.RetryAfter, xe.Kind)
			}
			if exchange.KindOf(err) != tc.kind {
				t.Errorf("KindOf = %v", exchange.KindOf(err))
			}
		})
	}
}

func TestUnavailable(t *testing.T) {
	huge := `{"access_token":"` + strings.Repeat("a", 2048) + `"}`
	tests := []struct {
		name       string
		fault      ststest.Fault
		respond    func(map[string]any)
		retryAfter time.Duration
		status     int
		cause      error
	}{
		{name: "503", fault: ststest.Fault{Status: 503, Body: "upstream connect error"}, retryAfter: 5 * time.Second, status: 503},
		{name: "502 with Retry-After", fault: ststest.Fault{Status: 502, Header: http.Header{"Retry-After": {"17"}}}, retryAfter: 17 * time.Second, status: 502},
		{name: "429 with Retry-After", fault: ststest.Fault{Status: 429, Header: http.Header{"Retry-After": {"3"}}}, retryAfter: 3 * time.Second, status: 429},
		{name: "404 without OAuth error", fault: ststest.Fault{Status: 404, Body: "not found"}, retryAfter: 5 * time.Second, status: 404},
		{name: "redirect not followed", fault: ststest.Fault{Status: 307, Header: http.Header{"Location": {"https://elsewhere.example/token"}}}, retryAfter: 5 * time.Second, status: 307},
		{name: "timeout", fault: ststest.Fault{Hang: true}, retryAfter: 5 * time.Second, cause: context.DeadlineExceeded},
		{name: "response too large", fault: ststest.Fault{Status: 200, Body: huge}, retryAfter: 5 * time.Second, status: 200},
		{name: "not JSON", fault: ststest.Fault{Status: 200, Body: "<html>"}, retryAfter: 5 * time.Second, status: 200},
		{name: "error with 200", fault: ststest.Fault{Status: 200, Body: `{"error":"invalid_grant"}`}, retryAfter: 5 * time.Second, status: 200},
		{name: "no access_token", respond: func(r map[string]any) { delete(r, "access_token") }, retryAfter: 5 * time.Second, status: 200},
		{name: "empty access_token", respond: func(r map[string]any) { r["access_token"] = "" }, retryAfter: 5 * time.Second, status: 200},
		{name: "token with a line break", respond: func(r map[string]any) { r["access_token"] = "abc\r\nx-evil: 1" }, retryAfter: 5 * time.Second, status: 200},
		{name: "no issued_token_type", respond: func(r map[string]any) { delete(r, "issued_token_type") }, retryAfter: 5 * time.Second, status: 200},
		{name: "id_token issued", respond: func(r map[string]any) { r["issued_token_type"] = exchange.TokenTypeIDToken }, retryAfter: 5 * time.Second, status: 200},
		{name: "token_type N_A for an access token", respond: func(r map[string]any) { r["token_type"] = "N_A" }, retryAfter: 5 * time.Second, status: 200},
		{name: "token_type DPoP", respond: func(r map[string]any) { r["token_type"] = "DPoP" }, retryAfter: 5 * time.Second, status: 200},
		{name: "negative expires_in", respond: func(r map[string]any) { r["expires_in"] = -5 }, retryAfter: 5 * time.Second, status: 200},
		{name: "fractional expires_in", respond: func(r map[string]any) { r["expires_in"] = 1.5 }, retryAfter: 5 * time.Second, status: 200},
		{name: "already expired", respond: func(r map[string]any) { r["expires_in"] = 0 }, retryAfter: 5 * time.Second, status: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, ststest.Options{Respond: tc.respond})
			sts.SetFault(tc.fault)
			e := newExchanger(t, c, sts, func(cfg *exchange.Config) {
				cfg.Timeout = 200 * time.Millisecond
				cfg.MaxResponseBytes = 1024
			})
			_, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, alice)
			xe := asError(t, err)
			if xe.Kind != exchange.Unavailable || xe.RetryAfter != tc.retryAfter || xe.Status != tc.status {
				t.Errorf("error = %v: kind %v, RetryAfter %v, status %d; want Unavailable, %v, %d", xe, xe.Kind, xe.RetryAfter, xe.Status, tc.retryAfter, tc.status)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Errorf("error %v does not wrap %v", err, tc.cause)
			}
			if sts.Calls() != 1 {
				t.Errorf("STS calls = %d, want 1", sts.Calls())
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/token"
	dead.Close()
	e, err := exchange.New(exchange.Config{TokenEndpoint: url}, exchange.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Exchange(context.Background(), "subject", docsAPI, alice)
	if xe := asError(t, err); xe.Kind != exchange.Unavailable || xe.RetryAfter <= 0 || errors.Unwrap(err) == nil {
		t.Errorf("error = %+v", xe)
	}
}

func TestBreaker(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) {
		cfg.BreakerFailures = 3
		cfg.BreakerCooldown = 10 * time.Second
	})
	ctx := context.Background()
	subject := subjectToken(t, c, "alice", nil)
	exchangeFor := func(session string) error {
		_, err := e.Exchange(ctx, subject, docsAPI, exchange.Owner{Subject: "alice", Session: session})
		return err
	}

	sts.SetFault(ststest.Fault{Status: http.StatusBadGateway})
	for i := range 3 {
		if err := exchangeFor(fmt.Sprint("fail-", i)); exchange.KindOf(err) != exchange.Unavailable {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if !e.Stats().BreakerOpen {
		t.Fatal("breaker closed after 3 failures")
	}
	// Open: no call reaches the STS, whatever the key.
	for i := range 5 {
		err := exchangeFor(fmt.Sprint("open-", i))
		if xe := asError(t, err); xe.Kind != exchange.Unavailable || xe.RetryAfter != 10*time.Second {
			t.Fatalf("open breaker: %+v", xe)
		}
	}
	if got := sts.Calls(); got != 3 {
		t.Fatalf("STS calls with the breaker open = %d, want 3", got)
	}
	if got := e.Stats().Rejected; got != 5 {
		t.Errorf("Stats.Rejected = %d, want 5", got)
	}

	// After the cooldown one probe goes through; it fails: open again.
	c.Advance(10 * time.Second)
	if err := exchangeFor("probe-1"); exchange.KindOf(err) != exchange.Unavailable || sts.Calls() != 4 {
		t.Fatalf("probe: calls = %d, err = %v", sts.Calls(), err)
	}
	if err := exchangeFor("probe-1b"); sts.Calls() != 4 || exchange.KindOf(err) != exchange.Unavailable {
		t.Fatalf("reopened breaker let a call through: calls = %d", sts.Calls())
	}

	// The next probe succeeds and closes it.
	c.Advance(10 * time.Second)
	sts.SetFault(ststest.Fault{})
	if err := exchangeFor("probe-2"); err != nil {
		t.Fatal(err)
	}
	if e.Stats().BreakerOpen {
		t.Error("breaker open after a successful probe")
	}
	if err := exchangeFor("after"); err != nil || sts.Calls() != 6 {
		t.Errorf("closed breaker: calls = %d, err = %v", sts.Calls(), err)
	}
}

func TestBreakerIgnoresDenials(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{Failures: map[string]ststest.Failure{"forbidden": {Code: "invalid_target"}}})
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.BreakerFailures = 2; cfg.NegativeTTL = -1 })
	subject := subjectToken(t, c, "alice", nil)
	for range 5 {
		_, err := e.Exchange(context.Background(), subject, exchange.Target{Audience: []string{"forbidden"}}, alice)
		if exchange.KindOf(err) != exchange.Forbidden {
			t.Fatalf("err = %v", err)
		}
	}
	if sts.Calls() != 5 || e.Stats().BreakerOpen {
		t.Errorf("calls = %d, breaker open = %v; denials must reach the STS (negative cache off) and not open the breaker", sts.Calls(), e.Stats().BreakerOpen)
	}
}

func TestNegativeCache(t *testing.T) {
	tests := []struct {
		code       string
		remembered bool
	}{
		{"invalid_grant", true},
		{"invalid_target", true},
		{"consent_required", false}, // the user retries right after consenting
		{"invalid_client", false},
	}
	for _, tc := range tests {
		t.Run(tc.code, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, ststest.Options{Failures: map[string]ststest.Failure{"docs-api": {Code: tc.code}}})
			e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.NegativeTTL = 5 * time.Second })
			subject := subjectToken(t, c, "alice", nil)
			for range 3 {
				if _, err := e.Exchange(context.Background(), subject, docsAPI, alice); err == nil {
					t.Fatal("no error")
				}
			}
			want := 3
			if tc.remembered {
				want = 1
			}
			if got := sts.Calls(); got != want {
				t.Errorf("STS calls = %d, want %d", got, want)
			}
			c.Advance(5 * time.Second)
			if _, err := e.Exchange(context.Background(), subject, docsAPI, alice); err == nil || sts.Calls() != want+1 {
				t.Errorf("after NegativeTTL: calls = %d, err = %v", sts.Calls(), err)
			}
		})
	}
}

func TestWaiterContext(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, nil)
	subject := subjectToken(t, c, "alice", nil)
	release := sts.Pause()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Exchange(ctx, subject, docsAPI, alice)
	if exchange.KindOf(err) != exchange.Unavailable || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	// The call goes on for the others and fills the cache.
	release()
	if _, err := e.Exchange(context.Background(), subject, docsAPI, alice); err != nil {
		t.Fatal(err)
	}
	if got := sts.Calls(); got != 1 {
		t.Errorf("STS calls = %d, want 1", got)
	}
}

func TestDrop(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, nil)
	ctx := context.Background()
	aliceToken, bobToken := subjectToken(t, c, "alice", nil), subjectToken(t, c, "bob", nil)
	owners := []struct {
		token string
		owner exchange.Owner
	}{
		{aliceToken, exchange.Owner{Subject: "alice", Session: "a1"}},
		{aliceToken, exchange.Owner{Subject: "alice", Session: "a2"}},
		{aliceToken, exchange.Owner{Subject: "alice"}},
		{bobToken, exchange.Owner{Subject: "bob", Session: "b1"}},
		{bobToken, exchange.Owner{Subject: "bob", Session: "b2", TokenSession: "login-b"}},
	}
	fill := func() {
		for _, o := range owners {
			if _, err := e.Exchange(ctx, o.token, docsAPI, o.owner); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill()
	if n := e.DropOwnSession("bob", "a1"); n != 0 {
		t.Errorf("DropOwnSession(bob, a1) = %d: bob dropped alice's token", n)
	}
	if n := e.DropOwnSession("alice", "a1"); n != 1 {
		t.Errorf("DropOwnSession(alice, a1) = %d, want 1", n)
	}
	if n := e.DropOwnSession("alice", ""); n != 1 { // her token of no session
		t.Errorf(`DropOwnSession(alice, "") = %d, want 1`, n)
	}
	fill()
	if n := e.DropSession(""); n != 0 {
		t.Errorf(`DropSession("") = %d`, n)
	}
	if n := e.DropSession("a1"); n != 1 {
		t.Errorf("DropSession(a1) = %d, want 1", n)
	}
	calls := sts.Calls()
	fill()
	if got := sts.Calls() - calls; got != 1 {
		t.Errorf("refill after DropSession made %d calls, want 1", got)
	}
	// The subject token's session is dropped as an MCP session is, but
	// not by a DELETE, which names an MCP session only.
	if n := e.DropOwnSession("bob", "login-b"); n != 0 {
		t.Errorf("DropOwnSession(bob, login-b) = %d, want 0", n)
	}
	if n := e.DropSession("login-b"); n != 1 {
		t.Errorf("DropSession(login-b) = %d, want 1", n)
	}
	if n := e.DropSubject("alice"); n != 3 {
		t.Errorf("DropSubject(alice) = %d, want 3", n)
	}
	if n := e.DropSubject("alice"); n != 0 {
		t.Errorf("second DropSubject(alice) = %d", n)
	}
}

func TestDiscovery(t *testing.T) {
	tests := []struct {
		name     string
		oidcOnly bool
	}{
		{"RFC 8414 metadata", false},
		{"OpenID Connect metadata", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, ststest.Options{OIDCOnly: tc.oidcOnly})
			e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.TokenEndpoint, cfg.Issuer = "", sts.Issuer })
			for _, session := range []string{"s1", "s2"} {
				if _, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, exchange.Owner{Session: session}); err != nil {
					t.Fatal(err)
				}
			}
			if got := sts.Calls(); got != 2 {
				t.Errorf("token endpoint calls = %d, want 2", got)
			}
		})
	}
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	// Metadata at this issuer that claims to be another's, pointing at a
	// working token endpoint: it must not be used (RFC 8414 section 3.3).
	impostor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"token_endpoint":%q}`, sts.Issuer, sts.TokenURL)
	}))
	defer impostor.Close()
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.TokenEndpoint, cfg.Issuer = "", impostor.URL })
	_, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, alice)
	if exchange.KindOf(err) != exchange.Unavailable || sts.Calls() != 0 {
		t.Errorf("err = %v, token calls = %d", err, sts.Calls())
	}
}

func TestTokenDoesNotPrintItsValue(t *testing.T) {
	tok := exchange.Token{Value: "secret-token", Authorization: "Bearer secret-token", IssuedTokenType: exchange.TokenTypeAccessToken}
	for _, s := range []string{fmt.Sprint(tok), fmt.Sprintf("%v %+v %s", tok, tok, tok), tok.LogValue().String()} {
		if strings.Contains(s, "secret-token") {
			t.Errorf("printed token: %s", s)
		}
	}
}

func TestErrorTextsHoldNoToken(t *testing.T) {
	c := newClock()
	subject := subjectToken(t, c, "alice", nil)
	sts := newSTS(t, c, ststest.Options{Failures: map[string]ststest.Failure{"docs-api": {Code: "invalid_grant", Description: "token " + subject[:20] + " is bad"}}})
	e := newExchanger(t, c, sts, nil)
	_, err := e.Exchange(context.Background(), subject, docsAPI, alice)
	if err == nil || strings.Contains(err.Error(), subject[:20]) {
		t.Errorf("error text %q", err)
	}
}

// TestLogsHoldNoToken: an STS that echoes the subject token in its
// error_description (whole, or cut) must not put it in the service's
// logs, nor in the Error's Description a caller may log or show.
func TestLogsHoldNoToken(t *testing.T) {
	const opaque = "at_Qm9ndXNUb2tlbkZvclRlc3RpbmdPbmx5MTIzNDU2Nzg5"
	tests := []struct{ name, echo string }{
		{"whole", opaque},
		{"cut", opaque[:30]},
		{"quoted", "'" + opaque + "'"},
		{"as a parameter", "subject_token=" + opaque + "."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			sts := newSTS(t, c, ststest.Options{VerifySubject: func(string) (jwt.MapClaims, error) {
				return nil, fmt.Errorf("token %s is not active", tc.echo)
			}})
			var logs strings.Builder
			var mu sync.Mutex
			e, err := exchange.New(exchange.Config{
				TokenEndpoint: sts.TokenURL,
				Auth:          exchange.ClientAuth{Method: exchange.AuthClientSecretBasic, ClientID: ststest.DefaultClient.ID, ClientSecret: ststest.DefaultClient.Secret},
			}, exchange.Options{HTTPClient: sts.Client(), Now: c.Now, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Close)
			_, err = e.Exchange(context.Background(), opaque, docsAPI, alice)
			if exchange.KindOf(err) != exchange.Unauthorized {
				t.Fatalf("err = %v, want the STS's refusal", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(logs.String(), "is not active") {
				t.Fatalf("the refusal was not logged: %s", logs.String())
			}
			if strings.Contains(logs.String(), opaque[:20]) {
				t.Errorf("the log holds the subject token: %s", logs.String())
			}
			if d := asError(t, err).Description; strings.Contains(d, opaque[:20]) {
				t.Errorf("the Description holds the subject token: %s", d)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestClaimsOfExchangedToken(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, nil)
	tok, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, alice)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := sts.Verify(tok.Value)
	if err != nil {
		t.Fatal(err)
	}
	if _, has := claims["act"]; has {
		t.Errorf("act without an actor token: %v", claims["act"])
	}
	if claims["aud"] != "docs-api" || claims["scope"] != "docs.read" {
		t.Errorf("claims = %v", claims)
	}
}

func TestClose(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{Lifetime: 120 * time.Second})
	e := newExchanger(t, c, sts, nil)
	ctx := context.Background()
	subject := subjectToken(t, c, "alice", nil)
	first, err := e.Exchange(ctx, subject, docsAPI, alice)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	// Cached tokens are still served (here in the refresh window, from 45s
	// to 90s), but nothing new reaches the STS.
	c.Advance(70 * time.Second)
	if tok, err := e.Exchange(ctx, subject, docsAPI, alice); err != nil || tok.Value != first.Value {
		t.Fatalf("cached after Close: %v", err)
	}
	e.WaitBackground()
	if _, err := e.Exchange(ctx, subject, docsAPI, exchange.Owner{Subject: "alice", Session: "new"}); exchange.KindOf(err) != exchange.Unavailable {
		t.Errorf("miss after Close: %v", err)
	}
	if got := sts.Calls(); got != 1 {
		t.Errorf("STS calls = %d, want 1", got)
	}
}

// TestSlowSTS: an STS that answers, but later than the budget, misses every
// waiting request. Each request is answered Unavailable (with Retry-After)
// when its budget ends; the late token is still cached for the retry; and
// slow calls count as failures, so the breaker opens and later requests are
// answered at once instead of waiting.
func TestSlowSTS(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) {
		cfg.Budget = 50 * time.Millisecond
		cfg.BreakerFailures = 3
		cfg.BreakerCooldown = 10 * time.Second
	})
	subject := subjectToken(t, c, "alice", nil)
	for i := range 3 {
		owner := exchange.Owner{Subject: "alice", Session: fmt.Sprint("slow-", i)}
		release := sts.Pause()
		_, err := e.Exchange(context.Background(), subject, docsAPI, owner)
		if xe := asError(t, err); xe.Kind != exchange.Unavailable || xe.RetryAfter <= 0 {
			t.Fatalf("call %d beyond the budget: %+v", i, xe)
		}
		c.Advance(3 * time.Second) // the STS takes 3 s, then succeeds
		release()
		// Retries join the call still in flight until it lands in the cache.
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := e.Exchange(context.Background(), subject, docsAPI, owner)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %d: the late token was not kept for the retry: %v", i, err)
			}
		}
	}
	if !e.Stats().BreakerOpen {
		t.Fatal("three calls slower than the budget did not open the breaker")
	}
	calls := sts.Calls()
	_, err := e.Exchange(context.Background(), subject, docsAPI, exchange.Owner{Subject: "alice", Session: "after"})
	if exchange.KindOf(err) != exchange.Unavailable || sts.Calls() != calls {
		t.Fatalf("open breaker: err = %v, STS calls %d -> %d", err, calls, sts.Calls())
	}
}

// TestWaitersBounded: beyond MaxWaiting, requests missing the cache are
// answered Unavailable at once instead of queueing on a hung STS.
func TestWaitersBounded(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.MaxWaiting = 2; cfg.Budget = 10 * time.Second })
	subject := subjectToken(t, c, "alice", nil)
	release := sts.Pause()
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 10)
	for i := range 10 {
		go func() {
			_, err := e.Exchange(ctx, subject, docsAPI, exchange.Owner{Subject: "alice", Session: fmt.Sprint("w-", i)})
			errs <- err
		}()
	}
	timeout := time.After(10 * time.Second)
	for range 8 {
		select {
		case err := <-errs:
			if exchange.KindOf(err) != exchange.Unavailable {
				t.Fatalf("err = %v", err)
			}
		case <-timeout:
			t.Fatal("requests beyond the bound waited for the hung STS")
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("a ninth request was answered while two should wait: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	for range 2 {
		<-errs
	}
}

// sharedHook is a shared tier that runs put as each token is offered.
type sharedHook struct {
	mu  sync.Mutex
	m   map[string][]byte
	put func(o exchange.Owner)
}

func (s *sharedHook) GetToken(_ context.Context, key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	return b, ok, nil
}

func (s *sharedHook) DeleteToken(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *sharedHook) PutToken(_ context.Context, key string, o exchange.Owner, token []byte, _ time.Duration) error {
	s.put(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = token
	return nil
}

// TestSharedBeforeLocal: a token is in the shared tier before any request
// of this replica can be handed it. Otherwise a request could use it, be
// refused upstream and drop it (locally and in the shared tier) before the
// token reached the shared tier, where it would then stay and be handed
// out again after the user re-authorized.
func TestSharedBeforeLocal(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	var e *exchange.Exchanger
	usable := -1
	shared := &sharedHook{m: map[string][]byte{}, put: func(o exchange.Owner) {
		// What a refused request would drop at this instant.
		usable = e.DropOwnSession(o.Subject, o.Session)
	}}
	e = sharedExchanger(t, c, sts, shared)
	if _, err := e.Exchange(context.Background(), subjectToken(t, c, "alice", nil), docsAPI, exchange.Owner{Subject: "alice", Session: "a1"}); err != nil {
		t.Fatal(err)
	}
	if usable != 0 {
		t.Fatalf("while the token was being shared, %d request(s) could already use it", usable)
	}
	if n := e.DropOwnSession("alice", "a1"); n != 1 {
		t.Fatalf("after the exchange the token is not cached locally (dropped %d)", n)
	}
}

// sharedExchanger is an exchanger of the default client at sts with
// shared as its shared tier.
func sharedExchanger(t *testing.T, c *clock, sts *ststest.Server, shared exchange.SharedTokens) *exchange.Exchanger {
	t.Helper()
	e, err := exchange.New(exchange.Config{
		TokenEndpoint: sts.TokenURL,
		Auth:          exchange.ClientAuth{Method: exchange.AuthClientSecretBasic, ClientID: ststest.DefaultClient.ID, ClientSecret: ststest.DefaultClient.Secret},
	}, exchange.Options{HTTPClient: sts.Client(), Now: c.Now, Shared: shared})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestSharedTierKeepsSTSsApart: two configured STSs share the replicas'
// shared tier. A token one of them issued must never be handed out for
// the other, even for the same subject token, target and session: the
// second may refuse the exchange (its own policy, its own client), issue
// a token of another type, or name another client. Before the fix the
// shared key left the STS out, so route B's exchanger took route A's
// token from the shared tier and never asked its own STS.
func TestSharedTierKeepsSTSsApart(t *testing.T) {
	c := newClock()
	lenient := newSTS(t, c, ststest.Options{})
	strict := newSTS(t, c, ststest.Options{Failures: map[string]ststest.Failure{"docs-api": {Code: "access_denied"}}})
	shared := &sharedHook{m: map[string][]byte{}, put: func(exchange.Owner) {}}
	a, b := sharedExchanger(t, c, lenient, shared), sharedExchanger(t, c, strict, shared)
	subject := subjectToken(t, c, "alice", nil)
	owner := exchange.Owner{Subject: "alice", Session: "s1"}
	if _, err := a.Exchange(context.Background(), subject, docsAPI, owner); err != nil {
		t.Fatal(err)
	}
	tok, err := b.Exchange(context.Background(), subject, docsAPI, owner)
	if err == nil {
		t.Fatalf("the strict STS's exchanger handed out the lenient STS's token (%v); its STS was asked %d times", tok, strict.Calls())
	}
	if exchange.KindOf(err) != exchange.Forbidden || strict.Calls() != 1 {
		t.Errorf("err = %v (kind %v), strict STS calls = %d; want its refusal", err, exchange.KindOf(err), strict.Calls())
	}
}

// TestSharedTierBoundPerUser: the tokens a user's newer ones replace in
// the cache (beyond CachePerSubject) are deleted from the shared tier too,
// so a flood of made-up sessions keeps no more of them there than here.
func TestSharedTierBoundPerUser(t *testing.T) {
	cases := []struct {
		name       string
		perSubject int
		flood      int
	}{
		{"within the bound", 4, 3},
		{"beyond the bound", 4, 20},
		{"a bound of one", 1, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock()
			sts := newSTS(t, clk, ststest.Options{})
			shared := &sharedHook{m: map[string][]byte{}, put: func(exchange.Owner) {}}
			e, err := exchange.New(exchange.Config{
				TokenEndpoint: sts.TokenURL, CachePerSubject: c.perSubject,
				Auth: exchange.ClientAuth{Method: exchange.AuthClientSecretBasic, ClientID: ststest.DefaultClient.ID, ClientSecret: ststest.DefaultClient.Secret},
			}, exchange.Options{HTTPClient: sts.Client(), Now: clk.Now, Shared: shared})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(e.Close)
			subject := subjectToken(t, clk, "bob", nil)
			for i := range c.flood {
				if _, err := e.Exchange(context.Background(), subject, docsAPI, exchange.Owner{Subject: "bob", Session: fmt.Sprint("s-", i)}); err != nil {
					t.Fatal(err)
				}
			}
			shared.mu.Lock()
			n := len(shared.m)
			shared.mu.Unlock()
			if want := min(c.flood, c.perSubject); n != want {
				t.Fatalf("the shared tier holds %d of bob's tokens, want %d", n, want)
			}
		})
	}
}
