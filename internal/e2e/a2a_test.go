package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// TestNginxA2AMessageSeesIdentity: with a valid token the SDK client's
// message reaches the agent with the identity and lineage headers.
func TestNginxA2AMessageSeesIdentity(t *testing.T) {
	e := start(t, envOptions{})
	ctx := testContext(t)
	client, err := testpeers.NewA2AClient(ctx, e.url(agentBHost, "/"), e.client(t, token(t, jwt.MapClaims{"session_id": "sess-a2a"}), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	seen, _, err := testpeers.AskWhoAmI(ctx, client, "ctx-client")
	if err != nil {
		t.Fatal(err)
	}
	if seen.Peer != "agent-b" || seen.ContextID != "ctx-client" {
		t.Fatalf("answered by %s in %s", seen.Peer, seen.ContextID)
	}
	// nginx sends no body to the check, so the root is the token's session
	// rather than the message's contextId.
	wantHeaders(t, "agent B", seen, map[string]string{
		"X-User-Id":           "alice",
		"X-Session-Id":        "sess-a2a",
		"X-Root-Context-Id":   "sess-a2a",
		"X-Lineage-Depth":     "0",
		"X-Parent-Context-Id": "",
	})
}

// TestNginxA2AExpiredToken: the public agent card loads, the message gets
// 401 with the challenge.
func TestNginxA2AExpiredToken(t *testing.T) {
	e := start(t, envOptions{})
	expired := token(t, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})
	var log responseLog
	ctx := testContext(t)
	client, err := testpeers.NewA2AClient(ctx, e.url(agentBHost, "/"), e.client(t, expired, nil, &log))
	if err != nil {
		t.Fatalf("the public agent card did not load: %v", err)
	}
	defer client.Destroy()
	if _, _, err := testpeers.AskWhoAmI(ctx, client, ""); err == nil {
		t.Fatal("message/send succeeded with an expired token")
	}
	var card, denied int
	for _, r := range log.responses() {
		switch {
		case r.method == http.MethodGet && strings.HasPrefix(r.path, "/.well-known/"):
			card++
			if r.status != http.StatusOK {
				t.Errorf("agent card: status %d", r.status)
			}
		case r.status == http.StatusUnauthorized:
			denied++
			metadata := e.url(agentBHost, "/.well-known/oauth-protected-resource")
			if !strings.Contains(r.challenge, `error="invalid_token"`) || !strings.Contains(r.challenge, `resource_metadata="`+metadata+`"`) {
				t.Errorf("%s %s: challenge %q", r.method, r.path, r.challenge)
			}
		default:
			t.Errorf("%s %s: unexpected status %d", r.method, r.path, r.status)
		}
	}
	if card == 0 || denied == 0 {
		t.Errorf("card fetched %d times, %d denials: %+v", card, denied, log.responses())
	}
}

// TestNginxA2AForgedIdentity: identity and lineage headers the client
// forges never reach the agent as sent.
func TestNginxA2AForgedIdentity(t *testing.T) {
	e := start(t, envOptions{})
	forged := http.Header{"X-User-Id": {"mallory"}, "X-Session-Id": {"evil-session"}, "X-Lineage-Token": {"forged.token.value"}}
	ctx := testContext(t)
	client, err := testpeers.NewA2AClient(ctx, e.url(agentBHost, "/"), e.client(t, token(t, nil), forged, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	seen, _, err := testpeers.AskWhoAmI(ctx, client, "")
	if err != nil {
		t.Fatal(err)
	}
	wantHeaders(t, "agent B", seen, map[string]string{"X-User-Id": "alice", "X-Session-Id": ""})
}

// TestNginxA2ATwoHops: client -> nginx -> agent A -> nginx -> agent B. Agent
// A calls B with a delegated token and passes the lineage it received, with
// its own context as the parent; the lineage arrives right at B.
func TestNginxA2ATwoHops(t *testing.T) {
	hopToken := token(t, jwt.MapClaims{"session_id": "sess-chain", "act": map[string]any{"sub": "agent-a"}})
	e := start(t, envOptions{hopToken: hopToken, forward: forwardLineage})
	ctx := testContext(t)
	forged := http.Header{"X-User-Id": {"mallory"}}
	client, err := testpeers.NewA2AClient(ctx, e.url(agentAHost, "/"), e.client(t, token(t, jwt.MapClaims{"session_id": "sess-chain"}), forged, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()
	seen, _, err := testpeers.AskWhoAmI(ctx, client, "ctx-user")
	if err != nil {
		t.Fatal(err)
	}
	if seen.Peer != "agent-a" || seen.Next == nil || seen.Next.Peer != "agent-b" {
		t.Fatalf("chain not followed: %+v", seen)
	}
	wantHeaders(t, "agent A", seen, map[string]string{
		"X-User-Id":           "alice",
		"X-Session-Id":        "sess-chain",
		"X-Root-Context-Id":   "sess-chain",
		"X-Lineage-Depth":     "0",
		"X-Parent-Context-Id": "",
		"X-Actor-Chain":       "",
	})
	wantHeaders(t, "agent B", *seen.Next, map[string]string{
		"X-User-Id":           "alice",
		"X-Session-Id":        "sess-chain",
		"X-Root-Context-Id":   "sess-chain",
		"X-Parent-Context-Id": seen.ContextID,
		"X-Lineage-Depth":     "1",
		"X-Actor-Chain":       "agent-a",
	})
	if seen.ContextID != "ctx-user" {
		t.Errorf("agent A served context %q", seen.ContextID)
	}
}

// forwardLineage is what an agent does with the service's lineage headers
// on an outbound call: the root and depth as received, its own context as
// the parent. The forged user id goes along too, as kagent forwards it.
func forwardLineage(inbound http.Header, contextID string) http.Header {
	out := http.Header{}
	for _, name := range []string{"X-User-Id", "X-Root-Context-Id", "X-Lineage-Depth"} {
		if v := inbound.Get(name); v != "" {
			out.Set(name, v)
		}
	}
	out.Set("X-Parent-Context-Id", contextID)
	return out
}
