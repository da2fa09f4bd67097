// Package audit writes one structured record per decision: who called what,
// for whom, in which conversation, and what was decided. The check path
// only copies a Record value into a bounded queue; a goroutine of its own
// encodes records and hands them to the sink (stdout, a rotated file, or
// OTLP logs). A slow or failing sink therefore never slows or fails a
// check: when the queue is full the record is dropped and counted, and the
// drops are logged once per interval.
//
// A record never holds a token, secret, cookie or argument value: the
// arguments of a tool call are reduced to their names, except the argument
// paths the operator opted in, whose values are truncated.
package audit

import (
	"time"
)

// SchemaVersion is the version of the record layout, written in every
// record's "schema" field. It changes only when a field changes meaning or
// is removed; new optional fields keep the version.
const SchemaVersion = 1

// Record is one decision. The JSON layout is documented in docs/audit.md
// and as a JSON Schema in docs/audit.schema.json. Empty fields are omitted.
//
// Slices (ActorChain, Arguments' source) are shared with the caller, not
// copied: the caller hands over memory nobody modifies afterwards.
type Record struct {
	Schema     int       `json:"schema"`
	Time       time.Time `json:"time"`
	DecisionID string    `json:"decision_id"`
	Route      string    `json:"route,omitempty"`
	// Allowed is true when the request was let through (allowed or public).
	Allowed bool   `json:"allowed"`
	Outcome string `json:"outcome"`          // allowed, public, or the denial kind
	Reason  string `json:"reason,omitempty"` // the description shown to the client
	Status  int    `json:"status"`

	Issuer          string `json:"issuer,omitempty"`
	Subject         string `json:"subject,omitempty"`
	Session         string `json:"session,omitempty"`
	ClientID        string `json:"client_id,omitempty"`
	SourcePrincipal string `json:"source_principal,omitempty"`
	SourceAddress   string `json:"source_address,omitempty"`

	Protocol string `json:"protocol,omitempty"` // mcp, a2a; empty for plain HTTP
	Method   string `json:"method,omitempty"`   // the JSON-RPC method
	// Target is the tool or prompt name or the resource URI the call names.
	Target     string `json:"target,omitempty"`
	TargetKind string `json:"target_kind,omitempty"` // tool, prompt, resource
	// Arguments are the call's argument names, with a truncated value only
	// for the paths the operator opted in. The writer fills them from
	// ArgumentsJSON, off the check path.
	Arguments []Argument `json:"arguments,omitempty"`
	// ArgumentsJSON is the call's arguments object as it arrived. It is
	// never written: the writer reduces it to Arguments.
	ArgumentsJSON []byte `json:"-"`

	Lineage          Lineage `json:"lineage,omitzero"`
	ExchangeAudience string  `json:"exchange_audience,omitempty"`
	Rule             string  `json:"rule,omitempty"` // the rule that decided
	CacheHit         bool    `json:"cache_hit"`
	// Latency is the time the check took, written in nanoseconds.
	Latency time.Duration `json:"latency_ns"`
	TraceID string        `json:"trace_id,omitempty"`
	// RateLimit names the limit that refused the request, if one did.
	RateLimit string `json:"rate_limit,omitempty"`

	// Phase is "response" for what the response path did with an allowed
	// request's answer (docs/extproc.md); empty for a check's decision.
	// Such a record's Outcome names the action (PhaseResponse).
	Phase string `json:"phase,omitempty"`
	// Dropped is how many entries the response path removed from a list.
	Dropped int `json:"dropped,omitempty"`
}

// PhaseResponse marks the records of the response path.
const PhaseResponse = "response"

// Lineage is the request's place in its conversation.
type Lineage struct {
	Root       string   `json:"root,omitempty"`
	Parent     string   `json:"parent,omitempty"`
	Depth      int      `json:"depth"`
	ActorChain []string `json:"actor_chain,omitempty"`
	Trusted    bool     `json:"trusted"`
}

// Argument is one argument of a call: its name (a dotted path for opted-in
// nested values) and, only when the operator opted the path in, its JSON
// value truncated to MaxValueLen bytes.
type Argument struct {
	Name      string `json:"name"`
	Value     string `json:"value,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}
