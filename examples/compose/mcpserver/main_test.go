package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

func connect(t *testing.T, header http.Header) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(newHandler("/mcp", slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: headerTransport{header}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestWhoAmIReportsHeaders(t *testing.T) {
	header := http.Header{"X-User-Id": {"alice"}, "X-Session-Id": {"s-1"}, "X-Lineage-Depth": {"0"}}
	cs := connect(t, header)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("whoami = %+v", res)
	}
	var got whoami.Report
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"x-user-id": "alice", "x-session-id": "s-1", "x-lineage-depth": "0"}
	if got.Service != "mcp-server" || len(got.Headers) != len(want) {
		t.Fatalf("report = %+v, want headers %v", got, want)
	}
	for k, v := range want {
		if got.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, got.Headers[k], v)
		}
	}
}

func TestToolsListed(t *testing.T) {
	cs := connect(t, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range res.Tools {
		names[tool.Name] = true
	}
	if !names["whoami"] || !names["reset_workspace"] || len(names) != 2 {
		t.Errorf("tools = %v, want whoami and reset_workspace", names)
	}
}
