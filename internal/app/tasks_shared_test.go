package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testtoken"
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
