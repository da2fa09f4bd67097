// Command a2aagent is the A2A agent of the compose example, built with the
// A2A Go SDK: JSON-RPC on /a2a and its public card at
// /.well-known/agent-card.json, behind Envoy and extauthz. It has no
// authentication code: whoever reaches it was let through by extauthz.
//
// Every message/send is answered at once with a message holding the whoami
// report of the request: the identity and lineage headers it arrived with and
// the claims of the token that reached the agent. The report is logged too.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"os"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"

	"github.com/extauthz/extauthz/examples/compose/internal/whoami"
)

func main() {
	addr := flag.String("addr", ":9000", "listen address")
	publicURL := flag.String("public-url", "http://localhost:8080/a2a", "JSON-RPC URL announced on the agent card (the proxy's, not this process's)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))

	whoami.Serve(*addr, newHandler(*publicURL, log), log, "A2A agent", "card_url", *publicURL)
}

func newHandler(publicURL string, log *slog.Logger) http.Handler {
	card := &a2a.AgentCard{
		Name:               "example-agent",
		Description:        "Answers every message with the identity and lineage headers it arrived with.",
		URL:                publicURL,
		ProtocolVersion:    "0.3.0",
		Version:            "1.0.0",
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"application/json"},
		SecuritySchemes: a2a.NamedSecuritySchemes{
			"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", BearerFormat: "JWT"},
		},
		Security: []a2a.SecurityRequirements{{"bearer": a2a.SecuritySchemeScopes{}}},
		Skills: []a2a.AgentSkill{{
			ID:          "whoami",
			Name:        "whoami",
			Description: "Reports the identity and lineage headers the request arrived with.",
			Tags:        []string{"example"},
		}},
	}
	handler := a2asrv.NewHandler(&agent{log: log}, a2asrv.WithLogger(log))

	mux := http.NewServeMux()
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.Handle("/.well-known/agent.json", a2asrv.NewStaticAgentCardHandler(card)) // pre-0.3 clients
	mux.Handle("/a2a", withRequestHeaders(a2asrv.NewJSONRPCHandler(handler)))
	return mux
}

// withRequestHeaders hands the HTTP request headers to the agent: the
// JSON-RPC transport passes only a context on, and the SDK reads request
// metadata from its call context.
func withRequestHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := a2asrv.WithCallContext(r.Context(), a2asrv.NewRequestMeta(r.Header))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type agent struct{ log *slog.Logger }

// Execute answers with the whoami report of the request.
func (a *agent) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	h := http.Header{}
	if call, ok := a2asrv.CallContextFrom(ctx); ok {
		for name, values := range call.RequestMeta().List() {
			for _, v := range values {
				h.Add(name, v)
			}
		}
	}
	report := whoami.FromHeader("a2a-agent", h)
	a.log.Info("message", "context_id", reqCtx.ContextID, "headers", report.Headers, "token", report.Token)

	body, err := json.Marshal(report)
	if err != nil {
		return err
	}
	reply := a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: string(body)})
	reply.ContextID = reqCtx.ContextID
	return q.Write(ctx, reply)
}

// Cancel has nothing to stop: every answer is immediate.
func (a *agent) Cancel(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	ev := a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateCanceled, nil)
	ev.Final = true
	return q.Write(ctx, ev)
}
