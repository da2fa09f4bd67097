package testpeers

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP tool and resource names the server offers.
const (
	ToolWhoAmI     = "whoami"
	ToolEcho       = "echo"
	ToolDeleteFile = "delete_file"
	// ToolSummarize (offered with MCPOptions.Summarize) asks the client's
	// model for a summary (the SDK's multi round-trip requests: an input
	// request for sampling/createMessage, which the SDK sends as a server
	// request to a client of an older version) and answers "sampled: <what
	// the model wrote>". Its call is reported once it carries the answer,
	// with ToolCall.Sampled set.
	ToolSummarize = "summarize"
	// ResourceWhoAmI reads like the whoami tool.
	ResourceWhoAmI = "peer://whoami"
	// ResourceFiles is a template of file resources: any file: URI with a
	// path reads as its own URI (nothing is read from disk).
	ResourceFiles = "file:///{+path}"
	// ReadResource is the ToolCall.Tool reported to OnToolCall for a read of
	// a ResourceFiles resource, with the URI in the arguments.
	ReadResource = "resources/read"
)

// MCPOptions configures [NewMCPServer].
type MCPOptions struct {
	// Name is the server name reported to clients and in observations;
	// "testpeers-mcp" when empty.
	Name string
	// Stateless serves every request on its own, with no Mcp-Session-Id;
	// otherwise the server assigns a session on initialize and ends it on
	// DELETE.
	Stateless bool
	// JSONResponse answers calls with application/json instead of
	// text/event-stream.
	JSONResponse bool
	// Logger receives the SDK's log; nil discards it.
	Logger *slog.Logger
	// OnToolCall, when set, is called with every tool call before it is
	// answered, so a test can tell whether a call reached the server at all,
	// and with every read of a ResourceFiles resource as a call of the tool
	// ReadResource with arguments {"uri": ...}.
	// It may be called concurrently.
	OnToolCall func(ToolCall)
	// PageSize is how many entries one page of a list holds (the SDK's
	// default when zero), so that a test can page through tools/list.
	PageSize int
	// OnSubscribe, when set, makes the server take resource subscriptions
	// (resources/subscribe, and subscriptions/listen's
	// resourceSubscriptions from 2026-07-28), and is called with the URI
	// of each one the SDK accepts. It may be called concurrently.
	OnSubscribe func(uri string)
	// Summarize offers ToolSummarize beside the other tools.
	Summarize bool
}

// ToolCall is one tools/call the MCP server received.
type ToolCall struct {
	Tool      string
	Arguments json.RawMessage
	Seen      Observation
	// Sampled is what the client's model wrote, as a summarize call
	// carries it.
	Sampled string
}

// EchoArgs are the arguments of the echo tool.
type EchoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

// DeleteFileArgs are the arguments of the delete_file tool.
type DeleteFileArgs struct {
	Path string `json:"path" jsonschema:"the file to delete"`
}

// NewMCPServer returns an MCP server speaking streamable HTTP on every path,
// with three tools and one resource:
//
//   - whoami: replies with the request's [Observation] as JSON text content;
//   - echo {text}: replies with text;
//   - delete_file {path}: replies "deleted <path>" and deletes nothing; it is
//     there to be denied by authorization rules;
//   - resource peer://whoami: the [Observation] as application/json.
//
// The go-sdk hands each handler the HTTP request headers (request Extra), so
// no middleware is needed. DNS-rebinding protection is off, because in an
// end-to-end test the server sits behind a proxy that keeps the client's Host.
func NewMCPServer(opts MCPOptions) http.Handler {
	name := opts.Name
	if name == "" {
		name = "testpeers-mcp"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &mcpPeer{name: name, onCall: opts.OnToolCall}

	serverOpts := &mcp.ServerOptions{
		Logger: logger,
		// No logging capability: the peer never sends log notifications.
		Capabilities: &mcp.ServerCapabilities{},
		PageSize:     opts.PageSize,
	}
	if opts.OnSubscribe != nil {
		serverOpts.SubscribeHandler = func(_ context.Context, req *mcp.SubscribeRequest) error {
			opts.OnSubscribe(req.Params.URI)
			return nil
		}
		serverOpts.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "v1.0.0"}, serverOpts)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolWhoAmI,
		Description: "Reports the identity and lineage headers this request arrived with.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, p.whoami)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolEcho,
		Description: "Replies with the given text.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, p.echo)
	mcp.AddTool(server, &mcp.Tool{
		Name:        ToolDeleteFile,
		Description: "Pretends to delete a file.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(true)},
	}, p.deleteFile)
	if opts.Summarize {
		mcp.AddTool(server, &mcp.Tool{
			Name:        ToolSummarize,
			Description: "Summarizes with the client's model.",
		}, p.summarize)
	}
	server.AddResource(&mcp.Resource{
		URI:      ResourceWhoAmI,
		Name:     "whoami",
		MIMEType: "application/json",
	}, p.readWhoAmI)
	server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: ResourceFiles,
		Name:        "files",
		MIMEType:    "text/plain",
	}, p.readFile)

	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:                  opts.Stateless,
		JSONResponse:               opts.JSONResponse,
		Logger:                     logger,
		DisableLocalhostProtection: true,
	})
}

type mcpPeer struct {
	name   string
	onCall func(ToolCall)
}

func (p *mcpPeer) seen(extra *mcp.RequestExtra) Observation {
	var h http.Header
	if extra != nil {
		h = extra.Header
	}
	return observe(p.name, h)
}

func (p *mcpPeer) called(req *mcp.CallToolRequest, seen Observation) {
	if p.onCall == nil {
		return
	}
	var call ToolCall
	if req.Params != nil {
		call.Tool = req.Params.Name
		call.Arguments = append(json.RawMessage(nil), req.Params.Arguments...)
	}
	call.Seen = seen
	p.onCall(call)
}

func (p *mcpPeer) whoami(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	seen := p.seen(req.Extra)
	p.called(req, seen)
	return textResult(seen.marshal()), nil, nil
}

func (p *mcpPeer) echo(_ context.Context, req *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
	p.called(req, p.seen(req.Extra))
	return textResult(in.Text), nil, nil
}

func (p *mcpPeer) deleteFile(_ context.Context, req *mcp.CallToolRequest, in DeleteFileArgs) (*mcp.CallToolResult, any, error) {
	p.called(req, p.seen(req.Extra))
	return textResult("deleted " + in.Path), nil, nil
}

func (p *mcpPeer) readWhoAmI(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI:      ResourceWhoAmI,
		MIMEType: "application/json",
		Text:     p.seen(req.Extra).marshal(),
	}}}, nil
}

func (p *mcpPeer) readFile(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	if p.onCall != nil {
		args, _ := json.Marshal(map[string]string{"uri": uri})
		p.onCall(ToolCall{Tool: ReadResource, Arguments: args, Seen: p.seen(req.Extra)})
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "contents of " + uri}}}, nil
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
