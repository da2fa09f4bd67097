package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/extauthz/extauthz/examples/compose/internal/whoami"
)

// headerTransport adds fixed headers, as Envoy does after extauthz allowed.
type headerTransport struct{ header http.Header }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestMessageReportsHeaders(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// The card announces the JSON-RPC URL of this test server.
	mux.Handle("/", newHandler(srv.URL+"/a2a", slog.New(slog.DiscardHandler)))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := &http.Client{Transport: headerTransport{http.Header{"X-User-Id": {"alice"}, "X-Parent-Context-Id": {"ctx-0"}}}}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if card.URL != srv.URL+"/a2a" || len(card.SecuritySchemes) != 1 {
		t.Fatalf("card = %+v", card)
	}
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Destroy()

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "who am I?"})
	msg.ContextID = "ctx-1"
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	reply, ok := res.(*a2a.Message)
	if !ok || len(reply.Parts) != 1 {
		t.Fatalf("message/send = %#v, want one message", res)
	}
	if reply.ContextID != "ctx-1" {
		t.Errorf("reply context = %q, want ctx-1", reply.ContextID)
	}
	var got whoami.Report
	if err := json.Unmarshal([]byte(reply.Parts[0].(a2a.TextPart).Text), &got); err != nil {
		t.Fatal(err)
	}
	if got.Service != "a2a-agent" || got.Headers["x-user-id"] != "alice" || got.Headers["x-parent-context-id"] != "ctx-0" {
		t.Errorf("report = %+v", got)
	}
}

func TestLegacyCardPath(t *testing.T) {
	srv := httptest.NewServer(newHandler("http://proxy.example/a2a", slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/.well-known/agent.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var card a2a.AgentCard
	if err := json.NewDecoder(resp.Body).Decode(&card); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET agent.json: %d, %v", resp.StatusCode, err)
	}
	if card.URL != "http://proxy.example/a2a" {
		t.Errorf("card URL = %q", card.URL)
	}
}
