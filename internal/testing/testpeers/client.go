package testpeers

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BearerTransport sets "Authorization: Bearer <Token()>" and the Header
// entries on every request it carries, the way an MCP or A2A client holding a
// token does. It never changes the caller's request.
type BearerTransport struct {
	// Token returns the token to send; nil, or an empty token, sends no
	// Authorization header.
	Token func() string
	// Header holds extra headers; each replaces whatever the SDK set under
	// that name. A test uses it to forge x-user-id and the lineage headers.
	Header http.Header
	// Base carries the request; http.DefaultTransport when nil.
	Base http.RoundTripper
}

// RoundTrip implements [http.RoundTripper].
func (t *BearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	var token string
	if t.Token != nil {
		token = t.Token()
	}
	if token == "" && len(t.Header) == 0 {
		return base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for name, values := range t.Header {
		r.Header.Del(name)
		for _, v := range values {
			r.Header.Add(name, v)
		}
	}
	return base.RoundTrip(r)
}

// StaticToken returns a Token func for [BearerTransport] that always
// returns token.
func StaticToken(token string) func() string {
	return func() string { return token }
}

// NewHTTPClient returns a client that sends token (when not empty) and the
// extra headers on every request through base (http.DefaultTransport when
// nil).
func NewHTTPClient(token string, extra http.Header, base http.RoundTripper) *http.Client {
	return &http.Client{Transport: &BearerTransport{Token: StaticToken(token), Header: extra, Base: base}}
}

// MCPClientOptions configures [NewMCPClient].
type MCPClientOptions struct {
	// ProtocolVersion is the version the client asks for. Empty lets the SDK
	// choose: its latest version (sessionless, server/discover first), with a
	// fallback to the initialize handshake. "2025-06-18" or "2025-11-25" runs
	// the session flow: initialize, Mcp-Session-Id, DELETE on close.
	ProtocolVersion string
	// DisableStandaloneSSE stops the client from opening the GET stream the
	// session flow opens after initialize.
	DisableStandaloneSSE bool
	// Sampling, when set, makes the client answer every sampling request
	// with it as what its model wrote.
	Sampling string
}

// MCP protocol versions the SDK client speaks that tests pin.
const (
	MCPVersion20250618 = "2025-06-18"
	MCPVersion20251125 = "2025-11-25"
)

// NewMCPClient connects the go-sdk client to the streamable HTTP endpoint at
// url through httpClient and returns the initialized session. The caller
// closes it. opts may be nil.
func NewMCPClient(ctx context.Context, url string, httpClient *http.Client, opts *MCPClientOptions) (*mcp.ClientSession, error) {
	if httpClient == nil {
		return nil, errors.New("testpeers: nil http client")
	}
	var o MCPClientOptions
	if opts != nil {
		o = *opts
	}
	var clientOpts *mcp.ClientOptions
	if o.Sampling != "" {
		clientOpts = answeringSampling(o.Sampling)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "testpeers-client", Version: "v1.0.0"}, clientOpts)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           httpClient,
		DisableStandaloneSSE: o.DisableStandaloneSSE,
		// A test asserts on the first answer; reconnecting would hide it.
		MaxRetries: -1,
	}
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: o.ProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("testpeers: mcp connect %s: %w", url, err)
	}
	return cs, nil
}

// WhoAmI calls the whoami tool and decodes its reply.
func WhoAmI(ctx context.Context, cs *mcp.ClientSession) (Observation, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolWhoAmI})
	if err != nil {
		return Observation{}, fmt.Errorf("testpeers: call whoami: %w", err)
	}
	if res.IsError || len(res.Content) != 1 {
		return Observation{}, fmt.Errorf("testpeers: whoami failed: %d content items, isError %t", len(res.Content), res.IsError)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return Observation{}, fmt.Errorf("testpeers: whoami replied with %T", res.Content[0])
	}
	return ParseObservation(text.Text)
}

// NewA2AClient fetches the agent card under baseURL and returns an a2a-go
// client speaking JSON-RPC to the URL the card announces, both through
// httpClient. opts are added to the client factory (interceptors, config).
func NewA2AClient(ctx context.Context, baseURL string, httpClient *http.Client, opts ...a2aclient.FactoryOption) (*a2aclient.Client, error) {
	if httpClient == nil {
		return nil, errors.New("testpeers: nil http client")
	}
	card, err := agentcard.NewResolver(httpClient).Resolve(ctx, baseURL)
	if err != nil {
		return nil, fmt.Errorf("testpeers: agent card %s: %w", baseURL, err)
	}
	opts = append([]a2aclient.FactoryOption{a2aclient.WithJSONRPCTransport(httpClient)}, opts...)
	client, err := a2aclient.NewFromCard(ctx, card, opts...)
	if err != nil {
		return nil, fmt.Errorf("testpeers: a2a client %s: %w", baseURL, err)
	}
	return client, nil
}

// AskWhoAmI sends a text message in contextID (a new context when empty)
// and decodes the agent's reply; it also returns the task, if the agent
// made one, for follow-up calls like tasks/get.
func AskWhoAmI(ctx context.Context, client *a2aclient.Client, contextID string) (Observation, *a2a.Task, error) {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "who am I?"})
	msg.ContextID = contextID
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		return Observation{}, nil, fmt.Errorf("testpeers: message/send: %w", err)
	}
	task, _ := res.(*a2a.Task)
	text, err := ReplyText(res)
	if err != nil {
		return Observation{}, task, fmt.Errorf("testpeers: message/send: %w", err)
	}
	seen, err := ParseObservation(text)
	return seen, task, err
}
