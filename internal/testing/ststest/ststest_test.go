package ststest_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

func basic(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(id)+":"+url.QueryEscape(secret)))
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func post(t *testing.T, s *ststest.Server, method, target, contentType, auth, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("answer is not JSON: %q", raw)
	}
	return a
}

func TestTokenEndpointErrors(t *testing.T) {
	key := testtoken.Ed(t, "idp")
	now := time.Now()
	subject := key.Sign(t, jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Hour).Unix()})
	expired := key.Sign(t, jwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Minute).Unix()})
	noSub := key.Sign(t, jwt.MapClaims{"exp": now.Add(time.Hour).Unix()})
	s := ststest.New(t, ststest.Options{
		Clients: []ststest.Client{
			ststest.DefaultClient,
			{ID: "poster", Method: "client_secret_post", Secret: "p"},
		},
		Audiences: []string{"docs", "https://docs.example/mcp", "consent"},
		Scopes:    []string{"read", "write"},
		Failures:  map[string]ststest.Failure{"consent": {Code: "consent_required", Description: "ask the user"}},
	})
	ok := basic(ststest.DefaultClient.ID, ststest.DefaultClient.Secret)
	form := func(kv ...string) string {
		v := url.Values{
			"grant_type":         {ststest.GrantType},
			"subject_token":      {subject},
			"subject_token_type": {ststest.TokenTypeAccess},
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				v.Del(kv[i])
			} else {
				v.Add(kv[i], kv[i+1])
			}
		}
		return v.Encode()
	}
	const formType = "application/x-www-form-urlencoded"
	tests := []struct {
		name        string
		method      string
		query       string
		contentType string
		auth        string
		body        string
		status      int
		code        string
	}{
		{"GET", http.MethodGet, "", "", ok, "", 400, "invalid_request"},
		{"JSON body", http.MethodPost, "", "application/json", ok, `{}`, 400, "invalid_request"},
		{"parameters in the query", http.MethodPost, "?subject_token=x", formType, ok, form(), 400, "invalid_request"},
		{"repeated scope", http.MethodPost, "", formType, ok, form("scope", "read", "scope", "write"), 400, "invalid_request"},
		{"no client", http.MethodPost, "", formType, "", form(), 401, "invalid_client"},
		{"wrong secret", http.MethodPost, "", formType, basic("extauthz", "nope"), form(), 401, "invalid_client"},
		{"unknown client", http.MethodPost, "", formType, basic("stranger", "x"), form(), 401, "invalid_client"},
		{"two methods", http.MethodPost, "", formType, ok, form("client_id", "poster", "client_secret", "p"), 400, "invalid_request"},
		{"post client", http.MethodPost, "", formType, "", form("client_id", "poster", "client_secret", "p", "audience", "docs"), 200, ""},
		{"post client using basic", http.MethodPost, "", formType, basic("poster", "p"), form(), 401, "invalid_client"},
		{"client_id not the basic one", http.MethodPost, "", formType, ok, form("client_id", "poster"), 400, "invalid_request"},
		{"wrong grant type", http.MethodPost, "", formType, ok, form("grant_type", "", "grant_type", "client_credentials"), 400, "unsupported_grant_type"},
		{"no subject token", http.MethodPost, "", formType, ok, form("subject_token", ""), 400, "invalid_request"},
		{"unknown subject token type", http.MethodPost, "", formType, ok, form("subject_token_type", "", "subject_token_type", "urn:x"), 400, "invalid_request"},
		{"actor token without type", http.MethodPost, "", formType, ok, form("actor_token", subject), 400, "invalid_request"},
		{"actor type without token", http.MethodPost, "", formType, ok, form("actor_token_type", ststest.TokenTypeJWT), 400, "invalid_request"},
		{"refresh token requested", http.MethodPost, "", formType, ok, form("requested_token_type", "urn:ietf:params:oauth:token-type:refresh_token"), 400, "invalid_request"},
		{"relative resource", http.MethodPost, "", formType, ok, form("resource", "/mcp"), 400, "invalid_target"},
		{"unknown audience", http.MethodPost, "", formType, ok, form("audience", "billing"), 400, "invalid_target"},
		{"unknown scope", http.MethodPost, "", formType, ok, form("audience", "docs", "scope", "read admin"), 400, "invalid_scope"},
		{"programmed failure", http.MethodPost, "", formType, ok, form("audience", "docs", "audience", "consent"), 400, "consent_required"},
		{"expired subject", http.MethodPost, "", formType, ok, form("subject_token", "", "subject_token", expired), 400, "invalid_grant"},
		{"subject without sub", http.MethodPost, "", formType, ok, form("subject_token", "", "subject_token", noSub), 400, "invalid_grant"},
		{"opaque subject", http.MethodPost, "", formType, ok, form("subject_token", "", "subject_token", "opaque"), 400, "invalid_grant"},
		{"ok", http.MethodPost, "", formType, ok, form("audience", "docs", "resource", "https://docs.example/mcp", "scope", "read"), 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, s, tc.method, s.TokenURL+tc.query, tc.contentType, tc.auth, tc.body)
			if a.status != tc.status {
				t.Errorf("status = %d (%v), want %d", a.status, a.body, tc.status)
			}
			if tc.code != "" && a.body["error"] != tc.code {
				t.Errorf("error = %v, want %s", a.body, tc.code)
			}
			if a.header.Get("Cache-Control") != "no-store" || a.header.Get("Content-Type") != "application/json" {
				t.Errorf("headers = %v", a.header)
			}
			if tc.code == "invalid_client" && tc.auth != "" && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Basic") {
				t.Errorf("invalid_client after Basic without a challenge: %v", a.header)
			}
		})
	}
	if got := s.Calls(); got != len(tests) {
		t.Errorf("Calls = %d, want %d", got, len(tests))
	}
}

func TestIssuedToken(t *testing.T) {
	key := testtoken.Ed(t, "idp")
	now := time.Now()
	s := ststest.New(t, ststest.Options{Lifetime: 90 * time.Second})
	subject := key.Sign(t, jwt.MapClaims{"sub": "alice", "session_id": "sess-1", "exp": now.Add(time.Hour).Unix(),
		"act": map[string]any{"sub": "agent-a", "act": map[string]any{"sub": "agent-0"}}})
	actor := key.Sign(t, jwt.MapClaims{"iss": "https://k8s", "sub": "gateway", "exp": now.Add(time.Hour).Unix()})
	form := url.Values{
		"grant_type":           {ststest.GrantType},
		"subject_token":        {subject},
		"subject_token_type":   {ststest.TokenTypeAccess},
		"actor_token":          {actor},
		"actor_token_type":     {ststest.TokenTypeJWT},
		"requested_token_type": {ststest.TokenTypeJWT},
		"audience":             {"docs", "search"},
		"scope":                {"read"},
	}
	a := post(t, s, http.MethodPost, s.TokenURL, "application/x-www-form-urlencoded", basic("extauthz", "extauthz-secret"), form.Encode())
	if a.status != 200 {
		t.Fatalf("status %d: %v", a.status, a.body)
	}
	want := map[string]any{"issued_token_type": ststest.TokenTypeJWT, "token_type": "Bearer", "expires_in": 90.0, "scope": "read"}
	for k, v := range want {
		if a.body[k] != v {
			t.Errorf("%s = %v, want %v", k, a.body[k], v)
		}
	}
	claims, err := s.Verify(a.body["access_token"].(string))
	if err != nil {
		t.Fatal(err)
	}
	// The actor is the current act; the subject's own chain nests inside.
	wantAct := map[string]any{"sub": "gateway", "iss": "https://k8s",
		"act": map[string]any{"sub": "agent-a", "act": map[string]any{"sub": "agent-0"}}}
	if !reflect.DeepEqual(claims["act"], wantAct) {
		t.Errorf("act = %v, want %v", claims["act"], wantAct)
	}
	if claims["sub"] != "alice" || claims["client_id"] != "extauthz" || claims["session_id"] != "sess-1" || claims["scope"] != "read" {
		t.Errorf("claims = %v", claims)
	}
	if aud, _ := claims.GetAudience(); !reflect.DeepEqual([]string(aud), []string{"docs", "search"}) {
		t.Errorf("aud = %v", aud)
	}
}

func TestPrivateKeyJWTReplay(t *testing.T) {
	ck := testtoken.EC(t, "client")
	sk := testtoken.Ed(t, "idp")
	s := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "gw", Method: "private_key_jwt", Key: ck.Private.Public()}}})
	assertion := ck.Sign(t, jwt.MapClaims{"iss": "gw", "sub": "gw", "aud": s.TokenURL, "jti": "once", "exp": time.Now().Add(time.Minute).Unix()})
	form := url.Values{
		"grant_type":            {ststest.GrantType},
		"subject_token":         {sk.Sign(t, jwt.MapClaims{"sub": "alice"})},
		"subject_token_type":    {ststest.TokenTypeAccess},
		"client_assertion_type": {ststest.ClientAssertionType},
		"client_assertion":      {assertion},
	}.Encode()
	for i, want := range []int{200, 401} {
		if a := post(t, s, http.MethodPost, s.TokenURL, "application/x-www-form-urlencoded", "", form); a.status != want {
			t.Errorf("use %d: status %d (%v), want %d", i+1, a.status, a.body, want)
		}
	}
}

func TestDiscoveryDocuments(t *testing.T) {
	s := ststest.New(t, ststest.Options{})
	resp, err := s.Client().Get(s.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	if md["issuer"] != s.Issuer || md["token_endpoint"] != s.TokenURL || md["jwks_uri"] != s.JWKSURL {
		t.Errorf("metadata = %v", md)
	}
	resp, err = s.Client().Get(s.JWKSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
		} `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) != 1 || set.Keys[0].Kid != s.Key.KID {
		t.Errorf("jwks = %+v, %v", set, err)
	}
}

func TestFaultAndFailure(t *testing.T) {
	sk := testtoken.Ed(t, "idp")
	s := ststest.New(t, ststest.Options{})
	form := url.Values{
		"grant_type":         {ststest.GrantType},
		"subject_token":      {sk.Sign(t, jwt.MapClaims{"sub": "alice"})},
		"subject_token_type": {ststest.TokenTypeAccess},
		"audience":           {"docs"},
	}.Encode()
	auth := basic("extauthz", "extauthz-secret")
	call := func() answer {
		return post(t, s, http.MethodPost, s.TokenURL, "application/x-www-form-urlencoded", auth, form)
	}
	s.SetFault(ststest.Fault{Status: 503, Header: http.Header{"Content-Type": {"application/json"}}, Body: `{"error":"temporarily_unavailable"}`})
	if a := call(); a.status != 503 || a.body["error"] != "temporarily_unavailable" {
		t.Errorf("fault: %d %v", a.status, a.body)
	}
	s.SetFault(ststest.Fault{})
	s.SetFailure("docs", ststest.Failure{Status: 403, Code: "access_denied"})
	if a := call(); a.status != 403 || a.body["error"] != "access_denied" {
		t.Errorf("failure: %d %v", a.status, a.body)
	}
	s.SetFailure("docs", ststest.Failure{})
	if a := call(); a.status != 200 {
		t.Errorf("cleared: %d %v", a.status, a.body)
	}
	if n := len(s.Requests()); n != 2 || s.Calls() != 3 {
		t.Errorf("Requests = %d (faults are not parsed), Calls = %d", n, s.Calls())
	}
}
