package policy

import (
	"errors"
	"reflect"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Input is everything a rule can read about one request. A caller fills
// what it knows; the zero value of a field reads as "" (strings), 0, false
// or an empty list. Input is the activation the expressions run against:
// it hands CEL pointers into itself, so evaluating a rule does not build a
// map of variables per request. An Input must not be modified while an
// evaluation using it runs.
type Input struct {
	// JWT holds the token's claims as decoded JSON (string, float64, bool,
	// []any, map[string]any). On a cached grant it holds only the claims
	// some rule reads (Program.Claims).
	JWT      map[string]any
	Identity Identity
	Request  Request
	MCP      MCP
	A2A      A2A
	Lineage  Lineage
	// Now is the time of the check, read as the timestamp now.
	Now time.Time
}

// Identity is the verified caller (CEL type extauthz.Identity).
type Identity struct {
	Issuer   string   // the configured issuer's name
	Subject  string   // the user: issuer namespace and user claim
	Session  string   // the token's session, "" if none
	ClientID string   // azp or client_id
	Scopes   []string // OAuth scopes granted
	Actors   []string // the RFC 8693 act chain, outermost first
}

// Request is the HTTP request as the service saw it (extauthz.Request).
type Request struct {
	Method string
	Host   string
	Path   string // canonical
	// Headers are keyed by lower-case name; repeated headers joined by ",".
	Headers map[string]string
	Source  Source
}

// Source is the peer the request came from (extauthz.Source).
type Source struct {
	Principal string // the peer's mTLS identity (SPIFFE ID), "" if none
	Address   string // the peer's IP address
}

// MCP is the MCP call, when the request is one (extauthz.MCP).
type MCP struct {
	Method          string
	Name            string // params.name (tools/call, prompts/get)
	URI             string // params.uri (resources/*)
	ProtocolVersion string
	Session         string // Mcp-Session-Id
	// Arguments is the raw JSON of params.arguments, "" when the call has
	// none. It must come from a body that jsonrpc.Parse accepted (valid
	// JSON, no duplicate keys): it is read lazily, member by member.
	Arguments string
	// BodyComplete says the whole body was read, so that Arguments is what
	// the call carries. Without it an expression that reads mcp.arguments
	// fails (ErrNoArguments): a partial body cannot prove anything.
	BodyComplete bool
	// Annotations are the tool's annotations (readOnlyHint,
	// destructiveHint, ...) as its server listed them, when known.
	Annotations map[string]any

	args jsonObject // Arguments as a CEL map, set up by Eval
}

// A2A is the A2A call, when the request is one (extauthz.A2A).
type A2A struct {
	Method    string // in the A2A v1.0 spelling (SendMessage, GetTask, ...)
	ContextID string
	TaskID    string
	Skill     string // the skill the message names, "" if none
	Tenant    string // the tenant the call names (v1.0 params.tenant), "" if none
}

// Lineage is the request's conversation lineage (extauthz.Lineage).
type Lineage struct {
	Root, Parent string
	Depth        int
	Actors       []string
	Trusted      bool // inbound lineage came from a trusted caller or a signed token
}

// ResolveName implements interpreter.Activation. The values are pointers
// into in (no allocation); the registered field getters read them.
func (in *Input) ResolveName(name string) (any, bool) {
	switch name {
	case "jwt":
		if in.JWT == nil {
			return emptyMap, true
		}
		return in.JWT, true
	case "identity":
		return &in.Identity, true
	case "request":
		return &in.Request, true
	case "mcp":
		return &in.MCP, true
	case "a2a":
		return &in.A2A, true
	case "lineage":
		return &in.Lineage, true
	case "now":
		return types.Timestamp{Time: in.Now}, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (in *Input) Parent() interpreter.Activation { return nil }

var emptyMap = map[string]any{}

// Argument returns one top-level member of the call's arguments decoded as
// encoding/json would (string, float64, bool, nil, []any, map[string]any);
// false when the arguments are not available (BodyComplete unset), are not
// an object, or lack the member.
func (in *Input) Argument(name string) (any, bool) {
	if !in.MCP.BodyComplete || in.MCP.Arguments == "" {
		return nil, false
	}
	var o jsonObject
	o.reset(in.MCP.Arguments)
	v, ok := o.Find(types.String(name))
	if !ok || types.IsError(v) {
		return nil, false
	}
	if v == types.NullValue {
		return nil, true
	}
	native, err := v.ConvertToNative(anyType)
	if err != nil {
		return nil, false
	}
	return native, true
}

var anyType = reflect.TypeFor[any]()

// ArgumentsAmbiguous reports whether the call's arguments hold one of
// names under another key as well, equal to it only under case folding
// ("amount" and "AMOUNT"), or whether the value of one of names holds, at
// any depth, an object with two such keys ({"path": …, "PATH": …} inside
// a list or an object): Argument leaves such a member out, and a tool
// binding arguments to a struct with Go's encoding/json may read the other
// key's value, so a decision on it must not be made.
func (in *Input) ArgumentsAmbiguous(names []string) bool {
	if !in.MCP.BodyComplete || in.MCP.Arguments == "" {
		return false
	}
	var o jsonObject
	o.reset(in.MCP.Arguments)
	for _, name := range names {
		switch v, _ := o.Find(types.String(name)); v := v.(type) {
		case *types.Err:
			if errors.Is(v, errKeyCase) {
				return true
			}
		case *jsonObject:
			if foldedKeys(v.raw) {
				return true
			}
		}
	}
	return false
}
