package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestReplicasShareTaskOwnership: a task bound through one replica is
// refused to another user on the other, and a task flood there frees
// nothing (the session store's guarantees, through Redis).
func TestReplicasShareTaskOwnership(t *testing.T) {
	r := startReplicas(t)
	mint := func(sub string) string {
		return testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": sub, "iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	alice, bob, mallory := mint("alice"), mint("bob"), mint("mallory")
	if got := httpStatus(r.a.call(t, alice, "", "tasks/get", `{"taskId":"t-1"}`)); got != 200 {
		t.Fatalf("alice on A: %d", got)
	}
	resp := r.b.call(t, bob, "", "tasks/result", `{"taskId":"t-1"}`)
	if got := httpStatus(resp); got != 403 || !strings.Contains(resp.GetDeniedResponse().GetBody(), "task belongs to another user") {
		t.Fatalf("bob on B with alice's task: %d %s", got, resp.GetDeniedResponse().GetBody())
	}
	for i := range 300 { // beyond sessions.max_per_subject (256)
		if got := httpStatus(r.b.call(t, mallory, "", "tasks/get", fmt.Sprintf(`{"taskId":"flood-%d"}`, i))); got != 200 {
			t.Fatalf("mallory's own task %d on B: %d", i, got)
		}
	}
	for _, rep := range []*server{r.a, r.b} {
		if got := httpStatus(rep.call(t, mallory, "", "tasks/cancel", `{"taskId":"t-1"}`)); got != 403 {
			t.Fatalf("mallory cancels alice's task after the flood: %d", got)
		}
		if got := httpStatus(rep.call(t, alice, "", "tasks/result", `{"taskId":"t-1"}`)); got != 200 {
			t.Fatalf("alice after the flood: %d", got)
		}
	}
}

// TestReplicasShareDelegation: with Redis, a delegate joins on one replica
// the session its user bound on the other, and an unrelated principal is
// refused on both.
func TestReplicasShareDelegation(t *testing.T) {
	rd := redistest.Start(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
issuers: [{name: idp, secret: %s}]
redis: {addrs: [%s], op_timeout: 100ms}
routes: [{name: mcp, default: true, protocol: mcp, issuers: [idp]}]
sessions: {delegates: [{name: research, client_ids: [research-agent]}]}
`, reloadSecret, rd.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b := startServerWith(t, nil, ServeOptions{ConfigFile: cfg}), startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	mint := func(claims map[string]any) string {
		c := map[string]any{"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range claims {
			c[k] = v
		}
		return testtoken.HMAC(t, "HS256", reloadSecret, c)
	}
	alice := mint(map[string]any{"sub": "alice"})
	delegate := mint(map[string]any{"sub": "research-agent", "azp": "research-agent", "act": map[string]any{"sub": "alice"}})
	rogue := mint(map[string]any{"sub": "rogue", "azp": "rogue", "act": map[string]any{"sub": "alice"}})
	if got := httpStatus(a.call(t, alice, "s-shared", "tools/list", `{}`)); got != 200 {
		t.Fatalf("alice on A: %d", got)
	}
	resp := b.call(t, delegate, "s-shared", "tools/list", `{}`)
	if got := httpStatus(resp); got != 200 || upstreamHeader(resp, "x-session-id") != "s-shared" {
		t.Fatalf("alice's delegate on B: %d, session %q", got, upstreamHeader(resp, "x-session-id"))
	}
	for _, rep := range []*server{a, b} {
		if got := httpStatus(rep.call(t, rogue, "s-shared", "tools/list", `{}`)); got != 403 {
			t.Fatalf("an unrelated principal: %d", got)
		}
	}
	if got := httpStatus(b.call(t, alice, "s-shared", "tools/list", `{}`)); got != 200 {
		t.Fatalf("the session is still alice's: %d", got)
	}
}
