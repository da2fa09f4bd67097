package testpeers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	a2alog "github.com/a2aproject/a2a-go/log"
)

// A2AOptions configures [NewA2AAgent].
type A2AOptions struct {
	// Name is the agent name on its card and in observations;
	// "testpeers-a2a" when empty.
	Name string
	// PublicURL is the JSON-RPC endpoint announced on the agent card. When
	// empty it is derived from each card request ("http://<Host>/"), so a
	// client that fetched the card through a proxy keeps talking through it.
	PublicURL string
	// Next, when set, makes the agent call a second agent on every
	// message/send and report both observations (a two-hop chain).
	Next *NextHop
	// Logger receives the SDK's log; nil discards it.
	Logger *slog.Logger
}

// NextHop is the agent an agent calls on while serving a message.
type NextHop struct {
	// URL is the base URL of the next agent; its card is fetched from
	// URL + "/.well-known/agent-card.json".
	URL string
	// HTTPClient carries the call, with its own credentials (a
	// [BearerTransport] holding a token issued for the next agent): the
	// inbound Authorization header is never passed on. Required.
	HTTPClient *http.Client
	// Forward returns the headers to send to the next agent, given the
	// inbound request headers and the context id the agent is serving;
	// [KagentForward] when nil.
	Forward func(inbound http.Header, contextID string) http.Header
}

// NewA2AAgent returns an A2A agent: the JSON-RPC transport on "/" and its
// public card at /.well-known/agent-card.json. Every message/send creates a
// task that completes at once with one text artifact: the [Observation] of
// the request as JSON. With opts.Next the agent first sends the same text to
// the next agent, with the headers opts.Next.Forward returns, and puts what
// that agent saw in Observation.Next.
func NewA2AAgent(opts A2AOptions) http.Handler {
	name := opts.Name
	if name == "" {
		name = "testpeers-a2a"
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	exec := &agentExecutor{name: name, next: opts.Next}
	handler := a2asrv.NewHandler(exec, a2asrv.WithLogger(logger))

	card := a2a.AgentCard{
		Name:               name,
		Description:        "Replies with the identity and lineage headers it saw.",
		ProtocolVersion:    "0.3.0",
		Version:            "1.0.0",
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"application/json"},
		Capabilities:       a2a.AgentCapabilities{},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT"},
		},
		Security: []a2a.SecurityRequirements{{"bearer": a2a.SecuritySchemeScopes{}}},
		Skills: []a2a.AgentSkill{{
			ID:          "whoami",
			Name:        "whoami",
			Description: "Reports the identity and lineage headers the request arrived with.",
			Tags:        []string{"test"},
		}},
	}
	cardHandler := a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(ctx context.Context) (*a2a.AgentCard, error) {
		c := card
		c.URL = opts.PublicURL
		if c.URL == "" {
			c.URL = inboundFrom(ctx).baseURL
		}
		return &c, nil
	}))

	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, cardHandler)
	mux.Handle("/", a2asrv.NewJSONRPCHandler(handler))
	return withInbound(mux, logger)
}

// KagentForward returns the headers kagent stamps on an outbound A2A call
// made while serving contextID: the parent is contextID; the root is the
// inbound root, else the inbound parent (an older caller that sent only the
// parent), else contextID (this agent is the root); X-User-Id is forwarded
// when it arrived. With no contextID there is no lineage, as in kagent.
func KagentForward(inbound http.Header, contextID string) http.Header {
	out := http.Header{}
	if user := inbound.Get(HeaderUserID); user != "" {
		out.Set(HeaderUserID, user)
	}
	if contextID == "" {
		return out
	}
	root := inbound.Get(HeaderKagentRootContextID)
	if root == "" {
		root = inbound.Get(HeaderKagentParentContextID)
	}
	if root == "" {
		root = contextID
	}
	out.Set(HeaderKagentParentContextID, contextID)
	out.Set(HeaderKagentRootContextID, root)
	return out
}

// inbound is what the agent keeps of the HTTP request for the SDK handlers,
// which only see a context.
type inbound struct {
	header  http.Header
	baseURL string
}

type inboundKey struct{}

// withInbound keeps the request headers and base URL in the context, and
// the logger, which the SDK's transport layer takes from the context too.
func withInbound(next http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		in := inbound{header: r.Header, baseURL: scheme + "://" + r.Host + "/"}
		ctx := a2alog.WithLogger(context.WithValue(r.Context(), inboundKey{}, in), logger)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func inboundFrom(ctx context.Context) inbound {
	in, _ := ctx.Value(inboundKey{}).(inbound)
	return in
}

type agentExecutor struct {
	name string
	next *NextHop
}

// Execute answers a message. The SDK runs it with a context that keeps the
// request's values (it only drops the cancellation), so the inbound headers
// are still there.
func (e *agentExecutor) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	if reqCtx.StoredTask == nil {
		if err := q.Write(ctx, a2a.NewSubmittedTask(reqCtx, reqCtx.Message)); err != nil {
			return err
		}
	}
	in := inboundFrom(ctx)
	seen := observe(e.name, in.header)
	seen.ContextID = reqCtx.ContextID

	if e.next != nil {
		hop, err := e.callNext(ctx, in.header, reqCtx)
		if err != nil {
			failed := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateFailed,
				a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, a2a.TextPart{Text: err.Error()}))
			failed.Final = true
			return q.Write(ctx, failed)
		}
		seen.Next = &hop
	}

	if err := q.Write(ctx, a2a.NewArtifactEvent(reqCtx, a2a.TextPart{Text: seen.marshal()})); err != nil {
		return err
	}
	done := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCompleted, nil)
	done.Final = true
	return q.Write(ctx, done)
}

// Cancel cancels: the agent never has work in flight worth stopping.
func (e *agentExecutor) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}

// nextHopTimeout bounds one call to the next agent, card fetch included.
const nextHopTimeout = 30 * time.Second

// callNext sends the inbound text on to the next agent under a fresh context
// id of its own (as a kagent remote-agent tool does) and returns what that
// agent saw.
func (e *agentExecutor) callNext(ctx context.Context, header http.Header, reqCtx *a2asrv.RequestContext) (Observation, error) {
	forward := e.next.Forward
	if forward == nil {
		forward = KagentForward
	}
	if header == nil {
		header = http.Header{}
	}
	out := forward(header, reqCtx.ContextID)

	// The SDK runs the agent without the request's cancellation; bound the
	// call so that a next hop that never answers cannot hold the task open.
	ctx, cancel := context.WithTimeout(ctx, nextHopTimeout)
	defer cancel()

	client, err := NewA2AClient(ctx, e.next.URL, e.next.HTTPClient, a2aclient.WithInterceptors(headerInterceptor{header: out}))
	if err != nil {
		return Observation{}, fmt.Errorf("next hop: %w", err)
	}
	defer client.Destroy()

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: messageText(reqCtx.Message)})
	msg.ContextID = a2a.NewContextID()
	res, err := client.SendMessage(ctx, &a2a.MessageSendParams{Message: msg})
	if err != nil {
		return Observation{}, fmt.Errorf("next hop: %w", err)
	}
	text, err := ReplyText(res)
	if err != nil {
		return Observation{}, fmt.Errorf("next hop: %w", err)
	}
	return ParseObservation(text)
}

// headerInterceptor adds fixed headers to every call of an A2A client; the
// JSON-RPC transport sends call metadata as HTTP headers.
type headerInterceptor struct {
	a2aclient.PassthroughInterceptor
	header http.Header
}

func (h headerInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, error) {
	for k, vs := range h.header {
		req.Meta[k] = append([]string(nil), vs...)
	}
	return ctx, nil
}

// ReplyText returns the text an agent replied with: the text parts of a
// message, or of a task's artifacts (else of its status message).
func ReplyText(res a2a.SendMessageResult) (string, error) {
	switch r := res.(type) {
	case *a2a.Message:
		return messageText(r), nil
	case *a2a.Task:
		if r.Status.State != a2a.TaskStateCompleted {
			detail := ""
			if r.Status.Message != nil {
				detail = ": " + messageText(r.Status.Message)
			}
			return "", fmt.Errorf("task %s is %s%s", r.ID, r.Status.State, detail)
		}
		var b strings.Builder
		for _, art := range r.Artifacts {
			b.WriteString(partsText(art.Parts))
		}
		if b.Len() == 0 && r.Status.Message != nil {
			return messageText(r.Status.Message), nil
		}
		return b.String(), nil
	default:
		return "", errors.New("no reply")
	}
}

func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	return partsText(m.Parts)
}

func partsText(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		switch t := p.(type) {
		case a2a.TextPart:
			b.WriteString(t.Text)
		case *a2a.TextPart:
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
