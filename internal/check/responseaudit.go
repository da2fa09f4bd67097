package check

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/extauthz/extauthz/internal/audit"
)

// ResponseAction is one thing the response path did with an upstream's
// answer, as the audit log records it (phase "response").
type ResponseAction struct {
	// Outcome names the action: filtered, filter_failure, reauthorized,
	// session_bound, session_refused, task_bound, context_bound, request_dropped.
	Outcome string
	// Delivered is true when the upstream's answer reached the client
	// (filtered or as sent), false when it was replaced.
	Delivered bool
	// Status is the HTTP status the client gets.
	Status int
	// Dropped is how many list entries were removed (filtered), or how
	// many of the server's requests were kept from the client
	// (request_dropped).
	Dropped int
	// Reason says why an answer was replaced; it is a fixed text, never
	// content of the answer.
	Reason string
}

// AuditResponse records what the response path did with the answer to
// req through the audit writer the checks use (Options.Audit). x is the
// allowed request the answer belongs to, nil when there is none (an answer
// replaced because its request was not allowed). The decision id is the
// check's: the request's x-request-id, which Envoy sends to both filters.
// Like a check's record it is only queued: no encoding, no I/O.
func (pl *Pipeline) AuditResponse(ctx context.Context, req *Request, x *Exchange, a ResponseAction) {
	if pl.auditW == nil || !pl.auditW.Wants(a.Delivered) {
		return
	}
	id := req.RequestID
	if id == "" {
		id = req.Headers.Get("x-request-id")
	}
	if id == "" {
		id = uuid.NewString()
	}
	r := audit.Record{
		Time: pl.now(), DecisionID: id, Phase: audit.PhaseResponse, Allowed: a.Delivered, Outcome: a.Outcome,
		Status: a.Status, Reason: a.Reason, Dropped: a.Dropped,
		SourcePrincipal: req.SourcePrincipal, SourceAddress: req.SourceAddress,
	}
	if x != nil {
		g, c := x.grant, &x.Call
		r.Route = x.route.Name
		r.Issuer, r.Subject, r.Session, r.ClientID = g.Issuer, g.Subject, g.Session, g.ClientID
		r.Protocol, r.Method = protocolName(c.Protocol), c.Method
		r.Target, r.TargetKind = auditTarget(c.Method, c.Name)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.TraceID = sc.TraceID().String()
	}
	pl.auditW.Submit(&r)
}
