package attack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/extauthz/extauthz/internal/app"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// Class 7, control plane and secrets: admin operations (revoke, invalidate,
// explain, complete an elicitation) need an authenticated caller and are
// logged with who made them; probes and metrics live on another listener
// and reveal nothing; no token, state or key reaches a log, a metric or an
// error body.

const (
	// adminToken is the admin bearer token of the suite's token file.
	adminToken = "admin-token-0123456789abcdef0123456789abcdef"
	// stateKey signs elicitation states; the suite knows it so it can mint
	// states the service must still refuse (expired, another user's).
	stateKey = "elicitation-state-key-0123456789abcdef"
	// stsSecret is the service's client secret at the STS.
	stsSecret = "sts-client-secret-0123456789"
)

// controlPlaneRoutes exchange tokens for the upstream and ask for the user's
// consent (an elicitation) before calendar_* tools.
func controlPlaneRoutes(stsURL string) string {
	return `exchanges:
  - {name: sts, token_endpoint: ` + stsURL + `, client_auth: {method: client_secret_post, client_id: extauthz, client_secret_env: STS_SECRET}}
elicitations: {state_key_env: ATTACK_STATE_KEY}
routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs, other]
    audiences: [` + audience + `]
    exchange:
      sts: sts
      audience: [https://backend.example.test]
      methods: [tools/call]
      authorize_url: https://idp.example.test/authorize?client_id=gw
      tools: [{names: ["calendar_*"], audience: [https://calendar.example.test], consent: true}]
`
}

// startControlPlane runs the suite with the admin API behind a token file
// (path returned) and logs at info, where admin calls are logged.
func startControlPlane(t *testing.T, more func(*app.ServeOptions)) (*suite, string) {
	t.Helper()
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: stsSecret}}})
	tokenFile := writeFile(t, "admin-token", adminToken+"\n")
	s := start(t, controlPlaneRoutes(sts.TokenURL), options{
		Vars: map[string]string{"STS_SECRET": stsSecret, "ATTACK_STATE_KEY": stateKey},
		Serve: func(o *app.ServeOptions) {
			o.LogLevel = "info"
			o.AdminTokenFile = tokenFile
			if more != nil {
				more(o)
			}
		},
	})
	return s, tokenFile
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// adminClient dials the admin gRPC API in cleartext (tc nil) or over TLS.
func adminClient(t *testing.T, addr string, tc *tls.Config) adminv1.AdminServiceClient {
	t.Helper()
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminv1.NewAdminServiceClient(conn)
}

// withAuth is a call context carrying the given Authorization values.
func withAuth(values ...string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	for _, v := range values {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", v)
	}
	return ctx, cancel
}

// elicitation is what a denial asking for consent tells the client.
type elicitation struct{ ID, URL, State string }

// elicit makes sub (of issuer iss) call calendar_add and returns the
// elicitation the service answers with.
func (s *suite) elicit(t *testing.T, iss, sub string) elicitation {
	t.Helper()
	v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, iss, sub)}, Body: toolCall(1, "calendar_add", "")})
	var body struct {
		Result struct {
			Meta struct {
				AuthRequired struct {
					URL string `json:"url"`
					ID  string `json:"elicitation_id"`
				} `json:"auth_required"`
			} `json:"_meta"`
		} `json:"result"`
	}
	if v.Allowed || json.Unmarshal([]byte(v.Body), &body) != nil || body.Result.Meta.AuthRequired.ID == "" {
		t.Fatalf("no elicitation for %s: allowed %v, %d %s", sub, v.Allowed, v.Status, v.Body)
	}
	u, err := url.Parse(body.Result.Meta.AuthRequired.URL)
	if err != nil {
		t.Fatal(err)
	}
	return elicitation{ID: body.Result.Meta.AuthRequired.ID, URL: u.String(), State: u.Query().Get("state")}
}

// consented reports whether sub's calendar_add now goes through.
func (s *suite) consented(t *testing.T, iss, sub string) bool {
	t.Helper()
	return s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, iss, sub)}, Body: toolCall(2, "calendar_add", "")}).Allowed
}

// complete posts a completion with the form and the Authorization header
// (none when empty); it returns the status and body.
func (s *suite) complete(t *testing.T, id string, form url.Values, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+s.adminAddr+"/elicitations/"+url.PathEscape(id)+"/complete", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mintState signs a state as the documented format says, independently of
// the service's code: "<id>.<expiry>.<base64url HMAC-SHA256>" over the
// length-prefixed label, id, issuer name, subject and expiry.
func mintState(key, id, issuer, subject string, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	h := hmac.New(sha256.New, []byte(key))
	for _, v := range []string{"extauthz elicitation state v1", id, issuer, subject, exp} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	return id + "." + exp + "." + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func TestControlPlane(t *testing.T) {
	s, tokenFile := startControlPlane(t, nil)
	admin := adminClient(t, s.adminAddr, nil)
	bearerAdmin := "Bearer " + adminToken
	// Every token and secret the suite uses; none may ever show.
	secrets := []string{adminToken, stateKey, stsSecret, secret}

	wantUnauthenticated := func(t *testing.T, err error, presented string) {
		t.Helper()
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("code %v (%v), want Unauthenticated", status.Code(err), err)
		}
		if presented != "" && strings.Contains(err.Error(), presented) {
			t.Fatalf("the error echoes the presented credential: %v", err)
		}
	}

	refusedCalls := []struct {
		name, tok string
		auth      []string
	}{
		{name: "no credential"},
		{name: "wrong token of the right length", tok: strings.Repeat("x", len(adminToken)), auth: []string{"Bearer " + strings.Repeat("x", len(adminToken))}},
		{name: "token of the wrong length: a prefix", tok: adminToken[:len(adminToken)-1], auth: []string{"Bearer " + adminToken[:len(adminToken)-1]}},
		{name: "token of the wrong length: an extension", tok: adminToken + "0", auth: []string{"Bearer " + adminToken + "0"}},
		{name: "the token under another scheme", tok: adminToken, auth: []string{"Basic " + adminToken}},
		{name: "the token without a scheme", tok: adminToken, auth: []string{adminToken}},
		{name: "the token twice", tok: adminToken, auth: []string{bearerAdmin, bearerAdmin}},
		{name: "a user's access token", auth: []string{"Bearer " + token(t, issuerHS, "mallory", "admin")}},
	}
	for _, tc := range refusedCalls {
		t.Run("revocation refused: "+tc.name, func(t *testing.T) {
			ctx, cancel := withAuth(tc.auth...)
			defer cancel()
			_, err := admin.RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: "hs", Subject: "alice"})
			wantUnauthenticated(t, err, tc.tok)
			for _, call := range []func() error{
				func() error { _, err := admin.Stats(ctx, &adminv1.StatsRequest{}); return err },
				func() error {
					_, err := admin.InvalidateSession(ctx, &adminv1.InvalidateSessionRequest{SessionId: "victim-session"})
					return err
				},
				func() error { _, err := admin.Explain(ctx, &adminv1.ExplainRequest{}); return err },
				func() error {
					_, err := admin.RevokeAPIKey(ctx, &adminv1.RevokeAPIKeyRequest{Issuer: "keys", KeyId: "victim-key"})
					return err
				},
			} {
				wantUnauthenticated(t, call(), tc.tok)
			}
		})
	}

	t.Run("a refused revocation leaves the victim's access", func(t *testing.T) {
		ctx, cancel := withAuth()
		defer cancel()
		_, err := admin.RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: "hs", Subject: "alice"})
		wantUnauthenticated(t, err, "")
		v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "alice")}, Body: toolCall(1, "whoami", "")})
		if !v.Allowed {
			t.Fatalf("alice denied after a refused revocation: %d %s", v.Status, v.Body)
		}
	})

	t.Run("the token opens the admin API", func(t *testing.T) {
		ctx, cancel := withAuth(bearerAdmin)
		defer cancel()
		if _, err := admin.InvalidateSession(ctx, &adminv1.InvalidateSessionRequest{SessionId: "sess-audit"}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Stats(ctx, &adminv1.StatsRequest{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("completion without an admin credential: 401", func(t *testing.T) {
		e := s.elicit(t, issuerHS, "alice")
		for _, auth := range []string{"", "Bearer " + strings.Repeat("y", len(adminToken)), "Basic " + adminToken} {
			code, body := s.complete(t, e.ID, url.Values{"state": {e.State}}, auth)
			if code != http.StatusUnauthorized || strings.Contains(body, adminToken) {
				t.Fatalf("Authorization %.6q: %d %s", auth, code, body)
			}
		}
		if s.consented(t, issuerHS, "alice") {
			t.Fatal("an unauthenticated completion granted consent")
		}
	})

	completions := []struct {
		name  string
		form  func(alice, mallory elicitation) url.Values
		want  int
		about string // a word the body must contain
	}{
		{"the elicitation id alone", func(a, _ elicitation) url.Values { return nil }, 403, "required"},
		{"the id as the state", func(a, _ elicitation) url.Values { return url.Values{"state": {a.ID}} }, 403, "not issued"},
		{"a forged signature", func(a, _ elicitation) url.Values {
			return url.Values{"state": {a.ID + "." + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 32))}}
		}, 403, "not issued"},
		{"the state with a later expiry", func(a, _ elicitation) url.Values {
			parts := strings.SplitN(a.State, ".", 3)
			return url.Values{"state": {parts[0] + "." + strconv.FormatInt(time.Now().Add(24*time.Hour).Unix(), 10) + "." + parts[2]}}
		}, 403, "not issued"},
		{"an expired state, correctly signed", func(a, _ elicitation) url.Values {
			return url.Values{"state": {mintState(stateKey, a.ID, "hs", "hs:alice", time.Now().Add(-time.Second))}}
		}, 403, "expired"},
		{"another user's state", func(_, m elicitation) url.Values { return url.Values{"state": {m.State}} }, 403, "not issued"},
		{"another user's signature under this id", func(a, m elicitation) url.Values {
			return url.Values{"state": {a.ID + m.State[len(m.ID):]}}
		}, 403, "not issued"},
		{"a state for the same subject from another issuer", func(a, _ elicitation) url.Values {
			return url.Values{"state": {mintState(stateKey, a.ID, "other", "other:alice", time.Now().Add(time.Hour))}}
		}, 403, "not issued"},
		{"a state signed with another key", func(a, _ elicitation) url.Values {
			return url.Values{"state": {mintState("another-key-0123456789abcdef0123456789", a.ID, "hs", "hs:alice", time.Now().Add(time.Hour))}}
		}, 403, "not issued"},
		{"two states", func(a, m elicitation) url.Values { return url.Values{"state": {m.State, a.State}} }, 400, "more than one"},
	}
	for _, tc := range completions {
		t.Run("completion refused: "+tc.name, func(t *testing.T) {
			alice, mallory := s.elicit(t, issuerHS, "alice"), s.elicit(t, issuerHS, "mallory")
			code, body := s.complete(t, alice.ID, tc.form(alice, mallory), bearerAdmin)
			if code != tc.want || !strings.Contains(body, tc.about) {
				t.Fatalf("%d %q, want %d mentioning %q", code, body, tc.want, tc.about)
			}
			if s.consented(t, issuerHS, "alice") {
				t.Fatal("alice's consent was granted by a refused completion")
			}
		})
	}

	t.Run("the state in the query string alone is not enough without the admin credential", func(t *testing.T) {
		e := s.elicit(t, issuerHS, "alice")
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.adminAddr+"/elicitations/"+e.ID+"/complete?state="+url.QueryEscape(e.State), nil)
		if code, _ := do(t, req); code != http.StatusUnauthorized {
			t.Fatalf("%d, want 401", code)
		}
	})

	t.Run("the right state completes, once, for its user only", func(t *testing.T) {
		e := s.elicit(t, issuerHS, "carol")
		if code, body := s.complete(t, e.ID, url.Values{"state": {e.State}}, bearerAdmin); code != http.StatusNoContent {
			t.Fatalf("%d %s", code, body)
		}
		if !s.consented(t, issuerHS, "carol") {
			t.Fatal("carol's retry was not let through")
		}
		if code, _ := s.complete(t, e.ID, url.Values{"state": {e.State}}, bearerAdmin); code != http.StatusNotFound {
			t.Fatalf("replayed completion: %d, want 404", code)
		}
	})

	t.Run("probes and metrics answer without a credential and reveal no secret", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			code, body := httpGet(t, "http://"+s.opsAddr+p)
			if code != 200 {
				t.Fatalf("%s: %d", p, code)
			}
			for _, sec := range secrets {
				if strings.Contains(body, sec) {
					t.Fatalf("%s reveals a secret", p)
				}
			}
		}
	})

	t.Run("the ops listener serves no admin route", func(t *testing.T) {
		e := s.elicit(t, issuerHS, "dave")
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.opsAddr+"/elicitations/"+e.ID+"/complete", strings.NewReader(url.Values{"state": {e.State}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", bearerAdmin)
		if code, _ := do(t, req); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
			t.Fatalf("completion on the ops listener: %d", code)
		}
		ctx, cancel := withAuth(bearerAdmin)
		defer cancel()
		if _, err := adminClient(t, s.opsAddr, nil).Stats(ctx, &adminv1.StatsRequest{}); err == nil {
			t.Fatal("the admin gRPC API answers on the ops listener")
		}
		if code, _ := httpGet(t, "http://"+s.opsAddr+"/debug/pprof/"); code != http.StatusNotFound {
			t.Fatalf("pprof on the ops listener: %d", code)
		}
	})

	t.Run("the admin listener serves no probe or metric", func(t *testing.T) {
		if code, _ := httpGet(t, "http://"+s.adminAddr+"/metrics"); code == 200 {
			t.Fatal("/metrics answers on the admin listener")
		}
	})

	t.Run("unauthenticated calls are counted by reason", func(t *testing.T) {
		_, body := httpGet(t, "http://"+s.opsAddr+"/metrics")
		for _, reason := range []string{"no_credential", "bad_token"} {
			if !strings.Contains(body, `extauthz_admin_unauthenticated_total{reason="`+reason+`"}`) {
				t.Errorf("no count of %s refusals", reason)
			}
		}
	})

	t.Run("a rotated token file: the old token is refused, the new one works", func(t *testing.T) {
		newToken := "rotated-admin-token-abcdefghijklmnopqrstuvwxyz"
		secrets = append(secrets, newToken)
		if err := os.WriteFile(tokenFile, []byte(newToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		future := time.Now().Add(2 * time.Second) // a new mtime even on a coarse clock
		if err := os.Chtimes(tokenFile, future, future); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600)
			os.Chtimes(tokenFile, future.Add(time.Second), future.Add(time.Second))
		})
		old, cancel := withAuth(bearerAdmin)
		defer cancel()
		_, err := admin.Stats(old, &adminv1.StatsRequest{})
		wantUnauthenticated(t, err, adminToken)
		ctx, cancel2 := withAuth("Bearer " + newToken)
		defer cancel2()
		if _, err := admin.Stats(ctx, &adminv1.StatsRequest{}); err != nil {
			t.Fatalf("the new token: %v", err)
		}
	})

	t.Run("a token file too short to be safe lets nobody in", func(t *testing.T) {
		short := "short-token"
		secrets = append(secrets, short)
		later := time.Now().Add(5 * time.Second)
		os.WriteFile(tokenFile, []byte(short+"\n"), 0o600)
		os.Chtimes(tokenFile, later, later)
		t.Cleanup(func() {
			os.WriteFile(tokenFile, []byte(adminToken+"\n"), 0o600)
			os.Chtimes(tokenFile, later.Add(time.Second), later.Add(time.Second))
		})
		ctx, cancel := withAuth("Bearer " + short)
		defer cancel()
		_, err := admin.Stats(ctx, &adminv1.StatsRequest{})
		wantUnauthenticated(t, err, short)
	})

	t.Run("admin calls are logged with who made them, the method and the target", func(t *testing.T) {
		var found, refused bool
		for _, line := range strings.Split(s.logs.String(), "\n") {
			var l map[string]any
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			if l["msg"] == "admin call" && l["caller"] == "token#1" && l["method"] == "InvalidateSession" && strings.Contains(l["target"].(string), `session_id="sess-audit"`) {
				found = true
			}
			if l["msg"] == "admin: call refused" && l["reason"] == "bad_token" {
				refused = true
			}
		}
		if !found || !refused {
			t.Fatalf("audit line %v, refusal line %v in:\n%s", found, refused, s.logs.String())
		}
		if !strings.Contains(s.logs.String(), `"method":"POST /elicitations/{id}/complete"`) {
			t.Fatal("no audit line for completions")
		}
	})

	t.Run("no token, state or secret ever reaches the logs or the metrics", func(t *testing.T) {
		logs := s.logs.String()
		_, metrics := httpGet(t, "http://"+s.opsAddr+"/metrics")
		used := append([]string{}, secrets...)
		used = append(used, strings.Repeat("x", len(adminToken)), adminToken[:len(adminToken)-1], token(t, issuerHS, "mallory", "admin"))
		for _, sec := range used {
			if strings.Contains(logs, sec) || strings.Contains(metrics, sec) {
				t.Errorf("a secret (%d bytes) shows in the logs or metrics", len(sec))
			}
		}
		// States are capabilities too: an elicitation's state is never logged.
		e := s.elicit(t, issuerHS, "erin")
		s.complete(t, e.ID, url.Values{"state": {e.State}}, bearerAdmin)
		if sig := e.State[strings.LastIndexByte(e.State, '.')+1:]; strings.Contains(s.logs.String(), sig) {
			t.Error("a state's signature shows in the logs")
		}
	})
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

// TestAdminExposureRefusedAtStart: without authentication the admin API
// may only listen on loopback; anything else is a start-up error that says
// what to do.
func TestAdminExposureRefusedAtStart(t *testing.T) {
	short := writeFile(t, "short", "too-short\n")
	tests := []struct {
		name string
		o    app.ServeOptions
		want string
	}{
		{"all interfaces without authentication", app.ServeOptions{AdminAddr: "0.0.0.0:0"}, "not a loopback address"},
		{"IPv6 any without authentication", app.ServeOptions{AdminAddr: "[::]:0"}, "not a loopback address"},
		{"empty host without authentication", app.ServeOptions{AdminAddr: ":0"}, "not a loopback address"},
		{"a host name without authentication", app.ServeOptions{AdminAddr: "admin.example.test:0"}, "not a loopback address"},
		{"TLS alone is not authentication", app.ServeOptions{AdminAddr: "0.0.0.0:0", AdminTLSCert: "c.pem", AdminTLSKey: "k.pem"}, "no authentication"},
		{"a token file shorter than the minimum", app.ServeOptions{AdminAddr: "127.0.0.1:0", AdminTokenFile: short}, "at least 32 bytes"},
		{"a missing token file", app.ServeOptions{AdminAddr: "127.0.0.1:0", AdminTokenFile: filepath.Join(t.TempDir(), "nope")}, "admin token file"},
		{"a client CA without allowed clients", app.ServeOptions{AdminAddr: "127.0.0.1:0", AdminClientCA: "ca.pem"}, "--admin-allowed-clients"},
		{"allowed clients without a client CA", app.ServeOptions{AdminAddr: "127.0.0.1:0", AdminAllowedClients: "spiffe://x/y"}, "--admin-client-ca"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.GRPCAddr, o.OpsAddr, o.LogLevel, o.LogFormat = "127.0.0.1:0", "127.0.0.1:0", "error", "json"
			o.Started = func(app.Addrs) { t.Error("the service started") }
			env := app.Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
				if k == "JWT_SECRET" {
					return secret
				}
				return ""
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := app.Serve(ctx, o, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Serve = %v, want an error mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "too-short") {
				t.Fatal("the error shows the token file's content")
			}
		})
	}
}

// TestDevelopmentSecretRefusedOffLoopback: the built-in default (no
// --config) without JWT_SECRET accepts tokens signed with a secret printed
// in the source, so anyone could mint one for any user. serve refuses to
// start with it on a check listener other callers can reach, and the error
// says what to set.
func TestDevelopmentSecretRefusedOffLoopback(t *testing.T) {
	tests := []struct {
		name       string
		grpc, http string
		want       string
	}{
		{"gRPC on all interfaces", "0.0.0.0:0", "", "--grpc-addr 0.0.0.0:0 is not a loopback address"},
		{"gRPC on IPv6 any", "[::]:0", "", "--grpc-addr [::]:0 is not a loopback address"},
		{"gRPC with an empty host", ":0", "", "--grpc-addr :0 is not a loopback address"},
		{"forward-auth front end exposed", "127.0.0.1:0", "0.0.0.0:0", "--http-addr 0.0.0.0:0 is not a loopback address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := app.ServeOptions{GRPCAddr: tc.grpc, HTTPAddr: tc.http, AdminAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", LogLevel: "error", LogFormat: "json",
				Started: func(app.Addrs) { t.Error("the service started") }}
			env := app.Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := app.Serve(ctx, o, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Set JWT_SECRET") || !strings.Contains(err.Error(), "--config") {
				t.Fatalf("Serve = %v, want a refusal naming the listener and saying to set JWT_SECRET or --config", err)
			}
			if strings.Contains(err.Error(), config.DevSecret) {
				t.Fatal("the error shows the development secret")
			}
		})
	}
}

// pki is a CA that issues certificates for the mTLS cases.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &pki{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key (PEM) for cn with the given URI SAN
// (none when empty), usable by a server on 127.0.0.1 and by a client.
func (p *pki) issue(t *testing.T, cn, uri string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if uri != "" {
		u, _ := url.Parse(uri)
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func (p *pki) clientTLS(t *testing.T, serverCA *pki, cn, uri string) *tls.Config {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.cert)
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cn != "" {
		c, k := p.issue(t, cn, uri)
		kp, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc
}

// TestControlPlaneMTLS: with mTLS, only a verified client certificate whose
// identity is allowed gets in; with a token file too, both are needed.
func TestControlPlaneMTLS(t *testing.T) {
	serverCA, clientCA, rogueCA := newPKI(t, "server CA"), newPKI(t, "client CA"), newPKI(t, "rogue CA")
	sc, sk := serverCA.issue(t, "extauthz-admin", "")
	const allowed = "spiffe://cluster.test/ns/ops/sa/admin"
	mtls := func(o *app.ServeOptions) {
		o.AdminTLSCert = writeFile(t, "server.pem", string(sc))
		o.AdminTLSKey = writeFile(t, "server-key.pem", string(sk))
		o.AdminClientCA = writeFile(t, "client-ca.pem", string(clientCA.pem))
		o.AdminAllowedClients = allowed + ", ops-console"
	}
	s, _ := startControlPlane(t, mtls)

	tests := []struct {
		name     string
		tc       *tls.Config
		auth     []string
		wantCode codes.Code
	}{
		{"no client certificate", clientCA.clientTLS(t, serverCA, "", ""), []string{"Bearer " + adminToken}, codes.Unauthenticated},
		{"a certificate whose identity is not allowed", clientCA.clientTLS(t, serverCA, "intruder", "spiffe://cluster.test/ns/dev/sa/intruder"), []string{"Bearer " + adminToken}, codes.Unauthenticated},
		// Go's client offers no certificate the server's CAs did not sign.
		{"an allowed identity from another CA", rogueCA.clientTLS(t, serverCA, "ops-console", allowed), []string{"Bearer " + adminToken}, codes.Unauthenticated},
		{"an allowed SPIFFE ID without the token", clientCA.clientTLS(t, serverCA, "someone", allowed), nil, codes.Unauthenticated},
		{"an allowed SPIFFE ID with a wrong token", clientCA.clientTLS(t, serverCA, "someone", allowed), []string{"Bearer " + strings.Repeat("z", len(adminToken))}, codes.Unauthenticated},
		{"an allowed SPIFFE ID with the token", clientCA.clientTLS(t, serverCA, "someone", allowed), []string{"Bearer " + adminToken}, codes.OK},
		{"an allowed common name with the token", clientCA.clientTLS(t, serverCA, "ops-console", ""), []string{"Bearer " + adminToken}, codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := withAuth(tc.auth...)
			defer cancel()
			_, err := adminClient(t, s.adminAddr, tc.tc).Stats(ctx, &adminv1.StatsRequest{})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("code %v (%v), want %v", status.Code(err), err, tc.wantCode)
			}
		})
	}

	t.Run("cleartext to the TLS listener", func(t *testing.T) {
		ctx, cancel := withAuth("Bearer " + adminToken)
		defer cancel()
		if _, err := adminClient(t, s.adminAddr, nil).Stats(ctx, &adminv1.StatsRequest{}); err == nil {
			t.Fatal("a cleartext call went through")
		}
	})

	t.Run("the audit names the certificate identity and the token line", func(t *testing.T) {
		if !strings.Contains(s.logs.String(), `"caller":"`+allowed+`+token#1"`) {
			t.Fatalf("no audit line naming the client:\n%s", s.logs.String())
		}
		if !strings.Contains(s.logs.String(), `"reason":"client_not_allowed"`) || !strings.Contains(s.logs.String(), `"reason":"no_client_cert"`) {
			t.Fatal("refusals not logged with their reason")
		}
		if strings.Contains(s.logs.String(), adminToken) {
			t.Fatal("the token shows in the logs")
		}
	})

	t.Run("the CLI speaks mTLS with a token file", func(t *testing.T) {
		c, k := clientCA.issue(t, "cli", allowed)
		caFile := writeFile(t, "server-ca.pem", string(serverCA.pem))
		certFile, keyFile := writeFile(t, "cli.pem", string(c)), writeFile(t, "cli-key.pem", string(k))
		tokFile := writeFile(t, "tok", adminToken+"\n")
		var out, errOut strings.Builder
		env := app.Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
		base := []string{"admin", "--addr", s.adminAddr, "--tls-ca", caFile, "--tls-cert", certFile, "--tls-key", keyFile}
		if code := app.Main(context.Background(), append(base, "--token-file", tokFile, "stats"), env); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		errOut.Reset()
		if code := app.Main(context.Background(), append(base, "stats"), env); code == 0 || !strings.Contains(errOut.String(), "Unauthenticated") {
			t.Fatalf("without the token: exit %d: %s", code, errOut.String())
		}
	})
}
