package testpeers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
)

func startA2A(t testing.TB, opts A2AOptions) *httptest.Server {
	srv := httptest.NewServer(NewA2AAgent(opts))
	t.Cleanup(srv.Close)
	return srv
}

func newA2AClient(t testing.TB, url string, hc *http.Client) *a2aclient.Client {
	c, err := NewA2AClient(testContext(t), url, hc)
	if err != nil {
		t.Fatalf("NewA2AClient: %v", err)
	}
	t.Cleanup(func() { c.Destroy() })
	return c
}

func TestA2AWhoAmI(t *testing.T) {
	srv := startA2A(t, A2AOptions{Name: "agent-a"})
	header := http.Header{"X-User-Id": {"alice"}, "X-Kagent-Root-Context-Id": {"root-0"}}
	client := newA2AClient(t, srv.URL, NewHTTPClient("tok-alice", header, nil))
	ctx := testContext(t)

	seen, task, err := AskWhoAmI(ctx, client, "ctx-1")
	if err != nil {
		t.Fatal(err)
	}
	want := Observation{
		Peer:                "agent-a",
		ContextID:           "ctx-1",
		Headers:             header,
		Authorization:       true,
		AuthorizationSHA256: Fingerprint("Bearer tok-alice"),
	}
	assertObservation(t, seen, want)

	if task == nil {
		t.Fatal("message/send made no task")
	}
	got, err := client.GetTask(ctx, &a2a.TaskQueryParams{ID: task.ID})
	if err != nil {
		t.Fatalf("tasks/get: %v", err)
	}
	if got.Status.State != a2a.TaskStateCompleted || got.ContextID != "ctx-1" {
		t.Errorf("tasks/get = state %s, context %q", got.Status.State, got.ContextID)
	}
	text, err := ReplyText(got)
	if err != nil || !strings.Contains(text, `"peer":"agent-a"`) {
		t.Errorf("tasks/get reply %q (%v)", text, err)
	}
}

func TestA2AAgentCard(t *testing.T) {
	tests := []struct {
		name      string
		publicURL string
		wantURL   func(srv *httptest.Server) string
	}{
		{name: "URL from the request host", wantURL: func(srv *httptest.Server) string { return srv.URL + "/" }},
		{name: "public URL", publicURL: "https://agent.example/a2a", wantURL: func(*httptest.Server) string { return "https://agent.example/a2a" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startA2A(t, A2AOptions{PublicURL: tt.publicURL})
			req, _ := http.NewRequestWithContext(testContext(t), http.MethodGet, srv.URL+"/.well-known/agent-card.json", nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var card a2a.AgentCard
			if err := json.NewDecoder(resp.Body).Decode(&card); err != nil {
				t.Fatal(err)
			}
			if card.URL != tt.wantURL(srv) || card.PreferredTransport != a2a.TransportProtocolJSONRPC || card.Name != "testpeers-a2a" {
				t.Errorf("card url %q transport %q name %q", card.URL, card.PreferredTransport, card.Name)
			}
		})
	}
}

func TestA2ATwoHops(t *testing.T) {
	tests := []struct {
		name     string
		inbound  http.Header
		forward  func(http.Header, string) http.Header
		wantRoot string // "" means the first agent's own context id
		wantUser string
	}{
		{
			name:     "chain root uses its own context id",
			inbound:  http.Header{"X-User-Id": {"alice"}},
			wantUser: "alice",
		},
		{
			name:     "mid-chain forwards the root",
			inbound:  http.Header{"X-Kagent-Root-Context-Id": {"root-0"}, "X-Kagent-Parent-Context-Id": {"p-0"}},
			wantRoot: "root-0",
		},
		{
			name:     "legacy caller's parent becomes the root",
			inbound:  http.Header{"X-Kagent-Parent-Context-Id": {"p-legacy"}, "X-User-Id": {"bob"}},
			wantRoot: "p-legacy",
			wantUser: "bob",
		},
		{
			name:    "custom forwarding",
			inbound: http.Header{"X-User-Id": {"alice"}},
			forward: func(in http.Header, contextID string) http.Header {
				return http.Header{"X-Kagent-Root-Context-Id": {"custom-" + contextID}, "X-User-Id": {"custom"}}
			},
			wantUser: "custom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			second := startA2A(t, A2AOptions{Name: "agent-b"})
			first := startA2A(t, A2AOptions{Name: "agent-a", Next: &NextHop{
				URL:        second.URL,
				HTTPClient: NewHTTPClient("tok-for-b", nil, nil),
				Forward:    tt.forward,
			}})
			client := newA2AClient(t, first.URL, NewHTTPClient("tok-alice", tt.inbound, nil))

			seen, _, err := AskWhoAmI(testContext(t), client, "ctx-a")
			if err != nil {
				t.Fatal(err)
			}
			assertObservation(t, Observation{Peer: seen.Peer, ContextID: seen.ContextID, Headers: seen.Headers,
				Authorization: seen.Authorization, AuthorizationSHA256: seen.AuthorizationSHA256},
				Observation{Peer: "agent-a", ContextID: "ctx-a", Headers: tt.inbound,
					Authorization: true, AuthorizationSHA256: Fingerprint("Bearer tok-alice")})

			hop := seen.Next
			if hop == nil {
				t.Fatal("no observation from the second hop")
			}
			if hop.Peer != "agent-b" || hop.ContextID == "" || hop.ContextID == "ctx-a" {
				t.Errorf("second hop peer %q context %q: want agent-b in a context of its own", hop.Peer, hop.ContextID)
			}
			if hop.AuthorizationSHA256 != Fingerprint("Bearer tok-for-b") {
				t.Errorf("second hop got a token other than its own (passthrough?)")
			}
			if got := hop.Headers.Get("X-User-Id"); got != tt.wantUser {
				t.Errorf("second hop X-User-Id = %q, want %q", got, tt.wantUser)
			}
			wantRoot := tt.wantRoot
			if wantRoot == "" {
				wantRoot = "ctx-a"
			}
			if tt.forward != nil {
				wantRoot = "custom-ctx-a"
			} else if got := hop.Headers.Get(HeaderKagentParentContextID); got != "ctx-a" {
				t.Errorf("second hop parent = %q, want the first agent's context ctx-a", got)
			}
			if got := hop.Headers.Get(HeaderKagentRootContextID); got != wantRoot {
				t.Errorf("second hop root = %q, want %q", got, wantRoot)
			}
		})
	}
}

func TestA2ANextHopDown(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	first := startA2A(t, A2AOptions{Next: &NextHop{URL: downURL, HTTPClient: &http.Client{}}})
	client := newA2AClient(t, first.URL, NewHTTPClient("tok", nil, nil))
	_, task, err := AskWhoAmI(testContext(t), client, "ctx-down")
	if err == nil || !strings.Contains(err.Error(), "next hop") {
		t.Fatalf("err = %v, want a failed task naming the next hop", err)
	}
	if task == nil || task.Status.State != a2a.TaskStateFailed {
		t.Errorf("task = %+v, want failed", task)
	}
}

func TestKagentForward(t *testing.T) {
	tests := []struct {
		name      string
		inbound   http.Header
		contextID string
		want      http.Header
	}{
		{
			name:      "root",
			inbound:   http.Header{},
			contextID: "c1",
			want:      http.Header{HeaderKagentParentContextID: {"c1"}, HeaderKagentRootContextID: {"c1"}},
		},
		{
			name:      "mid-chain",
			inbound:   http.Header{HeaderKagentRootContextID: {"r"}, HeaderKagentParentContextID: {"p"}, "X-User-Id": {"u"}},
			contextID: "c2",
			want:      http.Header{HeaderKagentParentContextID: {"c2"}, HeaderKagentRootContextID: {"r"}, "X-User-Id": {"u"}},
		},
		{
			name:      "legacy promotion",
			inbound:   http.Header{HeaderKagentParentContextID: {"p"}},
			contextID: "c3",
			want:      http.Header{HeaderKagentParentContextID: {"c3"}, HeaderKagentRootContextID: {"p"}},
		},
		{
			name:      "no context id, no lineage",
			inbound:   http.Header{HeaderKagentRootContextID: {"r"}, "X-User-Id": {"u"}},
			contextID: "",
			want:      http.Header{"X-User-Id": {"u"}},
		},
		{
			name:      "unrelated headers are not forwarded",
			inbound:   http.Header{"Authorization": {"Bearer secret"}, "X-Session-Id": {"s"}},
			contextID: "c4",
			want:      http.Header{HeaderKagentParentContextID: {"c4"}, HeaderKagentRootContextID: {"c4"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertHeaders(t, KagentForward(tt.inbound, tt.contextID), tt.want)
		})
	}
}

func TestReplyText(t *testing.T) {
	text := func(s string) a2a.ContentParts { return a2a.ContentParts{a2a.TextPart{Text: s}} }
	tests := []struct {
		name    string
		res     a2a.SendMessageResult
		want    string
		wantErr bool
	}{
		{name: "message", res: &a2a.Message{Parts: append(text("a"), a2a.DataPart{}, a2a.TextPart{Text: "b"})}, want: "ab"},
		{name: "task artifacts", res: &a2a.Task{Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
			Artifacts: []*a2a.Artifact{{Parts: text("x")}, {Parts: text("y")}}}, want: "xy"},
		{name: "task status message", res: &a2a.Task{Status: a2a.TaskStatus{State: a2a.TaskStateCompleted,
			Message: &a2a.Message{Parts: text("s")}}}, want: "s"},
		{name: "failed task", res: &a2a.Task{Status: a2a.TaskStatus{State: a2a.TaskStateFailed}}, wantErr: true},
		{name: "nothing", res: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReplyText(tt.res)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ReplyText = %q, %v; want %q, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func BenchmarkA2AMessageSend(b *testing.B) {
	srv := startA2A(b, A2AOptions{})
	client := newA2AClient(b, srv.URL, NewHTTPClient("tok", http.Header{"X-User-Id": {"alice"}}, nil))
	ctx := testContext(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := AskWhoAmI(ctx, client, "ctx-bench"); err != nil {
			b.Fatal(err)
		}
	}
}

func assertObservation(t *testing.T, got, want Observation) {
	t.Helper()
	if got.Peer != want.Peer || got.ContextID != want.ContextID || got.Authorization != want.Authorization ||
		got.AuthorizationSHA256 != want.AuthorizationSHA256 {
		t.Errorf("observation = %+v, want %+v", got, want)
	}
	assertHeaders(t, got.Headers, want.Headers)
}
