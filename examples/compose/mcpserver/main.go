// Command mcpserver is the MCP server of the compose example, built with the
// MCP Go SDK and served over streamable HTTP behind Envoy and extauthz. It has
// no authentication code: whoever reaches it was let through by extauthz.
//
// Tools:
//   - whoami answers with the identity and lineage headers the call arrived
//     with and the claims of the token that reached the server (an exchanged
//     one, issued for this server), and logs them;
//   - reset_workspace is there to be refused: extauthz's rules deny it before
//     it runs, so seeing it in this server's log means the rules are off.
//
// It runs stateless with JSON responses, so that every call is one plain
// POST (curl needs no initialize handshake); any MCP client works too.
package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/extauthz/extauthz/examples/compose/internal/whoami"
)

func main() {
	addr := flag.String("addr", ":8000", "listen address")
	path := flag.String("path", "/mcp", "MCP endpoint path")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))

	whoami.Serve(*addr, newHandler(*path, log), log, "MCP server", "path", *path)
}

func newHandler(path string, log *slog.Logger) http.Handler {
	server := mcp.NewServer(&mcp.Implementation{Name: "example-mcp", Version: "v1.0.0"}, &mcp.ServerOptions{Logger: log})
	mcp.AddTool(server, &mcp.Tool{
		Name:        "whoami",
		Description: "Reports the identity and lineage headers this call arrived with, and the token that reached the server.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, whoami.Report, error) {
		var h http.Header
		if req.Extra != nil {
			h = req.Extra.Header
		}
		r := whoami.FromHeader("mcp-server", h)
		log.Info("whoami", "headers", r.Headers, "token", r.Token)
		return nil, r, nil
	})
	mcp.AddTool(server, &mcp.Tool{
		Name:        "reset_workspace",
		Description: "Deletes the caller's workspace (pretend). extauthz's rules refuse it.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)},
	}, func(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		log.Warn("reset_workspace ran: the extauthz rules did not refuse it")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "workspace reset (pretend)"}}}, nil, nil
	})

	mux := http.NewServeMux()
	mux.Handle(path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       log,
		// Envoy passes the client's Host (localhost:8080) on; the server is
		// reachable only through Envoy on the compose network.
		DisableLocalhostProtection: true,
	}))
	return mux
}
