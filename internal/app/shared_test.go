package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// replicas are two service instances sharing one Redis.
type replicas struct {
	a, b  *server
	redis *redistest.Server
	sts   *ststest.Server
}

func startReplicas(t *testing.T) *replicas {
	t.Helper()
	rd := redistest.Start(t)
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: "sts-secret"}}})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
issuers: [{name: idp, secret: %s}]
redis: {addrs: [%s], encryption_key_env: TOKEN_KEY, op_timeout: 100ms}
elicitations: {state_key_env: STATE_KEY}
exchanges:
  - {name: sts, token_endpoint: %s, client_auth: {method: client_secret_post, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [idp]
    exchange:
      sts: sts
      audience: [https://backend.example.com]
      methods: [tools/call]
      authorize_url: https://idp.example.com/authorize
      tools: [{names: ["calendar_*"], audience: [https://calendar.example.com], consent: true}]
`, reloadSecret, rd.Addr, sts.TokenURL)), 0o600)
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	vars := map[string]string{"TOKEN_KEY": key, "STS_SECRET": "sts-secret", "STATE_KEY": "replicas-share-this-state-key-0123456789"}
	return &replicas{
		a:     startServerWith(t, vars, ServeOptions{ConfigFile: cfg}),
		b:     startServerWith(t, vars, ServeOptions{ConfigFile: cfg}),
		redis: rd,
		sts:   sts,
	}
}

// call sends an MCP JSON-RPC POST as Envoy would, with the body.
func (s *server) call(t *testing.T, tok, session, method, params string) *authv3.CheckResponse {
	t.Helper()
	h := map[string]string{"authorization": "Bearer " + tok, "content-type": "application/json"}
	if session != "" {
		h["mcp-session-id"] = session
	}
	req := envoyRequest(h)
	req.Attributes.Request.Http.Body = `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := s.client.Check(ctx, req)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return resp
}

func httpStatus(r *authv3.CheckResponse) int {
	if r.GetStatus().GetCode() == 0 {
		return 200
	}
	return int(r.GetDeniedResponse().GetStatus().GetCode())
}

func upstreamHeader(r *authv3.CheckResponse, name string) string {
	for _, h := range r.GetOkResponse().GetHeaders() {
		if h.GetHeader().GetKey() == name {
			return h.GetHeader().GetValue()
		}
	}
	return ""
}

func TestReplicasShareState(t *testing.T) {
	r := startReplicas(t)
	mint := func(sub string) string {
		return testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": sub, "iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	alice, bob := mint("alice"), mint("bob")

	t.Run("a session bound through one replica is enforced by the other", func(t *testing.T) {
		if got := httpStatus(r.a.call(t, alice, "s-1", "tools/list", `{}`)); got != 200 {
			t.Fatalf("alice on A: %d", got)
		}
		resp := r.b.call(t, bob, "s-1", "tools/list", `{}`)
		if got := httpStatus(resp); got != 403 || !strings.Contains(resp.GetDeniedResponse().GetBody(), "session_conflict") {
			t.Fatalf("bob on B with alice's session: %d %s", got, resp.GetDeniedResponse().GetBody())
		}
		if got := httpStatus(r.b.call(t, alice, "s-1", "tools/list", `{}`)); got != 200 {
			t.Fatalf("alice on B: %d", got)
		}
	})

	t.Run("a session flood on one replica frees nothing on the other", func(t *testing.T) {
		mallory := mint("mallory")
		for i := range 300 { // beyond sessions.max_per_subject (256)
			if got := httpStatus(r.b.call(t, mallory, fmt.Sprint("flood-", i), "tools/list", `{}`)); got != 200 {
				t.Fatalf("mallory's own session %d on B: %d", i, got)
			}
		}
		for _, rep := range []*server{r.a, r.b} {
			if got := httpStatus(rep.call(t, mallory, "s-1", "tools/list", `{}`)); got != 403 {
				t.Fatalf("mallory in alice's session after the flood: %d", got)
			}
		}
		// Mallory's oldest sessions were pushed out by her own bound,
		// on both replicas' view: through A, bob can now claim one.
		if got := httpStatus(r.a.call(t, bob, "flood-0", "tools/list", `{}`)); got != 200 {
			t.Fatalf("mallory's oldest session, beyond her bound: %d", got)
		}
		if got := httpStatus(r.a.call(t, bob, "flood-299", "tools/list", `{}`)); got != 403 {
			t.Fatalf("mallory's newest session: %d, want hers still", got)
		}
	})

	t.Run("an exchanged token fetched by one replica is served by the other", func(t *testing.T) {
		before := r.sts.Calls()
		ra := r.a.call(t, alice, "s-1", "tools/call", `{"name":"read_file"}`)
		rb := r.b.call(t, alice, "s-1", "tools/call", `{"name":"read_file"}`)
		if httpStatus(ra) != 200 || httpStatus(rb) != 200 {
			t.Fatalf("statuses %d %d: %s", httpStatus(ra), httpStatus(rb), rb.GetDeniedResponse().GetBody())
		}
		if r.sts.Calls() != before+1 {
			t.Fatalf("STS calls %d, want one for both replicas", r.sts.Calls()-before)
		}
		if a, b := upstreamHeader(ra, "authorization"), upstreamHeader(rb, "authorization"); a == "" || a != b {
			t.Fatalf("replicas sent different tokens upstream")
		}
	})

	t.Run("invalidating a token's session on one replica drops its exchanged tokens on both", func(t *testing.T) {
		for _, c := range []struct{ name, mcpSession string }{
			{"in an MCP session", "s-login"},
			{"without an MCP session", ""},
		} {
			t.Run(c.name, func(t *testing.T) {
				login := "login-" + c.name
				tok := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "dave", "sid": login, "iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
				for _, rep := range []*server{r.a, r.b} { // B is served the token A got, and caches it
					if got := httpStatus(rep.call(t, tok, c.mcpSession, "tools/call", `{"name":"read_file"}`)); got != 200 {
						t.Fatalf("before: %d", got)
					}
				}
				if code, out := runCmd3(t, nil, "admin", "--addr", r.a.adminAddr, "invalidate-session", login); code != 0 {
					t.Fatalf("invalidate-session on A: %s", out)
				}
				// The STS refuses the session from now on: a token still
				// cached anywhere would be served without asking it.
				r.sts.SetFailure("https://backend.example.com", ststest.Failure{Code: "invalid_grant", Description: "session ended"})
				defer r.sts.SetFailure("https://backend.example.com", ststest.Failure{})
				for _, rep := range []*server{r.a, r.b} {
					deadline := time.Now().Add(time.Second)
					for httpStatus(rep.call(t, tok, c.mcpSession, "tools/call", `{"name":"read_file"}`)) == 200 {
						if time.Now().After(deadline) {
							t.Fatal("a replica still serves the exchanged token a second after the session was invalidated")
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
			})
		}
	})

	t.Run("an elicitation started on one replica completes on the other", func(t *testing.T) {
		resp := r.a.call(t, alice, "s-1", "tools/call", `{"name":"calendar_add"}`)
		var body struct {
			Result struct {
				Meta struct {
					AuthRequired struct {
						ElicitationID string `json:"elicitation_id"`
						URL           string `json:"url"`
					} `json:"auth_required"`
				} `json:"_meta"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(resp.GetDeniedResponse().GetBody()), &body); err != nil || body.Result.Meta.AuthRequired.ElicitationID == "" {
			t.Fatalf("no elicitation: %d %s", httpStatus(resp), resp.GetDeniedResponse().GetBody())
		}
		u, err := url.Parse(body.Result.Meta.AuthRequired.URL)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.PostForm("http://"+r.b.adminAddr+"/elicitations/"+body.Result.Meta.AuthRequired.ElicitationID+"/complete",
			url.Values{"state": {u.Query().Get("state")}})
		if err != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("completion on B: %v %v", res, err)
		}
		res.Body.Close()
		if got := httpStatus(r.a.call(t, alice, "s-1", "tools/call", `{"name":"calendar_add"}`)); got != 200 {
			t.Fatalf("retry on A after completion on B: %d", got)
		}
	})

	t.Run("a revocation through one replica's admin API reaches the other within a second", func(t *testing.T) {
		if got := httpStatus(r.b.call(t, bob, "", "tools/list", `{}`)); got != 200 {
			t.Fatalf("bob before: %d", got)
		}
		if code, out := runCmd3(t, nil, "admin", "--addr", r.a.adminAddr, "revoke-subject", "--issuer", "idp", "bob"); code != 0 {
			t.Fatalf("revoke on A: %s", out)
		}
		deadline := time.Now().Add(time.Second)
		for httpStatus(r.b.call(t, bob, "", "tools/list", `{}`)) != 401 {
			if time.Now().After(deadline) {
				t.Fatal("B still accepts bob's token a second after the revocation on A")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("redis down: answers stay fast and fail closed; recovery", func(t *testing.T) {
		r.redis.Kill()
		for i := range 5 {
			start := time.Now()
			sess := r.a.call(t, alice, fmt.Sprint("new-", i), "tools/list", `{}`)
			plain := r.a.call(t, alice, "", "tools/list", `{}`)
			if took := time.Since(start); took > time.Second {
				t.Fatalf("checks took %v with Redis down", took)
			}
			if got := httpStatus(sess); got != 503 {
				t.Fatalf("session binding with Redis down: %d, want 503 (fail closed)", got)
			}
			if got := httpStatus(plain); got != 200 {
				t.Fatalf("a request without a session must not depend on Redis: %d", got)
			}
		}
		// A revocation B cannot hear of (neither stored nor published) is
		// not reported done: the operator must learn to revoke again.
		carol := mint("carol")
		code, out := runCmd3(t, nil, "admin", "--addr", r.a.adminAddr, "revoke-subject", "--issuer", "idp", "carol")
		if code == 0 || !strings.Contains(out, "Unavailable") {
			t.Fatalf("revoke-subject with Redis down: exit %d, %s; want Unavailable", code, out)
		}
		if got := httpStatus(r.a.call(t, carol, "", "tools/list", `{}`)); got != 401 {
			t.Fatalf("carol on A, whose admin API revoked her: %d, want 401", got)
		}
		if err := r.redis.Restart(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for httpStatus(r.a.call(t, alice, "after-restart", "tools/list", `{}`)) != 200 {
			if time.Now().After(deadline) {
				t.Fatal("no recovery after Redis returned")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
