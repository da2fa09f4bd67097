package check

import (
	"bytes"
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/extauthz/extauthz/internal/audit"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// DecisionIDHeader carries the decision id: to the client on every denial,
// so that a complaint maps to its audit record, and upstream when the
// request had no x-request-id of its own (with one, the decision id is
// that x-request-id, which the upstream already sees).
const DecisionIDHeader = "x-extauthz-decision-id"

// maxAuditArguments bounds the arguments object an audit record copies to
// find the call's argument names in (off the check path); larger arguments
// are recorded without them.
const maxAuditArguments = 64 << 10

// audit hands the decision to the audit log (Options.Audit) and gives the
// verdict its decision id header. It copies values into a record and
// queues it: no encoding, no I/O. The one allocation is the copy of a tool
// or prompt call's arguments object, whose names the writer reads later
// (the request's buffer is not ours after the check), made only for a
// record the writer's sampling keeps.
func (pl *Pipeline) audit(ctx context.Context, req *Request, v *Verdict, start time.Time) {
	id := req.RequestID
	if id == "" {
		id = req.Headers.Get("x-request-id")
	}
	generated := id == ""
	if generated {
		id = uuid.NewString()
	}
	allowed := v.Outcome.Allow()
	switch {
	case !allowed:
		v.ResponseHeaders = append(v.ResponseHeaders[:len(v.ResponseHeaders):len(v.ResponseHeaders)], Header{Name: DecisionIDHeader, Value: id})
	case generated && v.Outcome != ResourceMetadata:
		v.Set = append(v.Set[:len(v.Set):len(v.Set)], Header{Name: DecisionIDHeader, Value: id})
		v.Remove = without(v.Remove, DecisionIDHeader)
		v.HeadersID = 0 // this request's own headers
	}
	if !pl.auditW.Sample(allowed) {
		return
	}
	r := audit.Record{
		Time: start, DecisionID: id, Route: v.Route, Allowed: allowed, Outcome: v.Outcome.String(),
		Status: v.Status(), SourcePrincipal: req.SourcePrincipal, SourceAddress: req.SourceAddress,
		Protocol: protocolName(v.Call.Protocol), Method: v.Call.Method, Target: v.Call.Name,
		Rule: v.Rule, RateLimit: v.RateLimit, ExchangeAudience: v.ExchangeAudience,
		CacheHit: v.CacheHit, Latency: pl.now().Sub(start),
	}
	if !allowed {
		r.Reason = v.Description
	}
	if g := v.Grant; g != nil {
		r.Issuer, r.Subject, r.Session, r.ClientID = g.Issuer, g.Subject, g.Session, g.ClientID
	}
	r.Target, r.TargetKind = auditTarget(r.Method, r.Target)
	if l := &v.Lineage; l.Root != "" {
		r.Lineage = audit.Lineage{Root: l.Root, Parent: l.Parent, Depth: l.Depth, ActorChain: l.ActorChain, Trusted: l.Trusted}
	}
	if r.TargetKind == "tool" || r.TargetKind == "prompt" {
		r.ArgumentsJSON = auditArguments(req, &v.Call)
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.TraceID = sc.TraceID().String()
	}
	pl.auditW.Enqueue(&r)
}

// auditArguments is a copy of the call's params.arguments object, nil when
// the call has none, was not read from a complete body, or its arguments
// are larger than maxAuditArguments.
func auditArguments(req *Request, c *Call) []byte {
	start, end := c.argsStart, c.argsEnd
	if !c.Body || req.BodyPartial || end <= start || end > len(req.Body) || end-start > maxAuditArguments {
		return nil
	}
	return bytes.Clone(req.Body[start:end])
}

// protocolName is the record's protocol: mcp, a2a, or "" for a request
// that is not a JSON-RPC call of either.
func protocolName(p jsonrpc.Protocol) string {
	if p == jsonrpc.ProtocolMCP || p == jsonrpc.ProtocolA2A {
		return p.String()
	}
	return ""
}

// auditTarget is what a record names as the call's target, and its kind.
// A resource URI goes without its query: a presigned URL carries its
// credential there, and query strings never reach a log.
func auditTarget(method, name string) (string, string) {
	if name == "" {
		return "", ""
	}
	kind := targetKind(method)
	if kind == "resource" {
		name, _, _ = strings.Cut(name, "?")
	}
	return name, kind
}

// targetKind says what a call's name is: a tool, a prompt or a resource
// (any method named by a resource URI, a skill's or a directory's too).
func targetKind(method string) string {
	switch {
	case method == "tools/call":
		return "tool"
	case method == "prompts/get":
		return "prompt"
	case jsonrpc.IsURIMethod(method):
		return "resource"
	}
	return ""
}
