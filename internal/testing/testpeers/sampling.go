//lint:file-ignore SA1019 MCP 2026-07-28 deprecates sampling (SEP-2577), which servers and clients still use: the peers exercise it

package testpeers

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sampling through the client: the server's summarize tool and the
// client's answer to it.

// summarize is ToolSummarize: an input request for the summary until a
// call carries the answer.
func (p *mcpPeer) summarize(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	var text string
	switch answer := req.Params.InputResponses["summary"].(type) {
	case *mcp.CreateMessageResult:
		text = textOf(answer.Content)
	case *mcp.CreateMessageWithToolsResult:
		for _, c := range answer.Content {
			text += textOf(c)
		}
	default:
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"summary": &mcp.CreateMessageParams{
			Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "Summarize."}}},
			MaxTokens: 50,
		}}}, nil, nil
	}
	if p.onCall != nil {
		p.onCall(ToolCall{Tool: ToolSummarize, Seen: p.seen(req.Extra), Sampled: text})
	}
	return textResult("sampled: " + text), nil, nil
}

// textOf is the text of a text content, "" for any other.
func textOf(c mcp.Content) string {
	if t, ok := c.(*mcp.TextContent); ok {
		return t.Text
	}
	return ""
}

// answeringSampling are the options of a client answering every sampling
// request with text as what its model wrote.
func answeringSampling(text string) *mcp.ClientOptions {
	return &mcp.ClientOptions{CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{Role: "assistant", Model: "testpeers-model", Content: &mcp.TextContent{Text: text}}, nil
	}}
}
