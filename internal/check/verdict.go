package check

import (
	"encoding/json"
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/lineage"
)

// Outcome is what the pipeline decided. Every outcome maps to exactly one
// HTTP status and one machine-readable reason in the outcomes table below.
type Outcome uint8

const (
	Allowed               Outcome = iota // authenticated and authorized
	Public                               // a public path: no token needed
	MissingToken                         // no credential at all
	InvalidToken                         // malformed, expired, badly signed, wrong iss/aud, unusable claims
	InsufficientScope                    // valid token, missing scope
	NoRoute                              // no route matches and there is no default
	Malformed                            // the request itself is unusable
	Unavailable                          // a dependency is down (keys never loaded): retry later
	Forbidden                            // a rule refuses the call
	SessionConflict                      // the MCP session belongs to another user
	ResourceMetadata                     // answered directly: the protected resource metadata document
	TooDeep                              // the delegation chain is deeper than the route allows
	DryRun                               // a dry-run route let a request pass that would have been denied
	Overloaded                           // too many checks in progress: answered at once, fail closed
	AuthorizationRequired                // answered directly: the user must authorize the upstream first (elicitation)
	RateLimited                          // a rate limit of the route or rule refuses the request
	PolicyError                          // a rule's expression could not be evaluated: denied
	UnknownSession                       // a response-path route never saw this MCP session created (MCP: 404, initialize again)
)

// outcomes is the one table mapping outcomes to what the client sees.
var outcomes = [...]struct {
	status int
	reason string // metric label, log field and body "error"
}{
	Allowed:               {200, "allowed"},
	Public:                {200, "public"},
	MissingToken:          {401, "missing_token"},
	InvalidToken:          {401, "invalid_token"},
	InsufficientScope:     {403, "insufficient_scope"},
	NoRoute:               {403, "no_route"},
	Malformed:             {400, "invalid_request"},
	Unavailable:           {503, "temporarily_unavailable"},
	Forbidden:             {403, "forbidden"},
	SessionConflict:       {403, "session_conflict"},
	ResourceMetadata:      {200, "resource_metadata"},
	TooDeep:               {403, "delegation_too_deep"},
	DryRun:                {200, "dry_run"},
	Overloaded:            {503, "overloaded"},
	AuthorizationRequired: {200, "authorization_required"},
	RateLimited:           {429, "rate_limited"},
	PolicyError:           {403, "policy_error"},
	UnknownSession:        {404, "unknown_session"},
}

// Status is the HTTP status Envoy must answer with (200 when allowed).
func (o Outcome) Status() int { return outcomes[o].status }

// String is the outcome's machine-readable reason.
func (o Outcome) String() string { return outcomes[o].reason }

// Allow reports whether the request may pass.
func (o Outcome) Allow() bool { return o == Allowed || o == Public || o == DryRun }

// Header is one header name (lower-case) and value; the same type as the
// lineage package's, so that lineage appends to a verdict's headers.
type Header = lineage.Header

// Verdict is the pipeline's answer, free of any front end's types. The slices
// may be shared with the cache: callers must not modify them.
type Verdict struct {
	Outcome     Outcome
	Route       string
	Description string // why, safe to show the client
	Grant       *Grant // who the caller is; nil unless the token was verified
	CacheHit    bool   // the grant or denial came from the verdict cache
	// memos are the memo slots of the pipeline that returned the verdict,
	// where Rendered keeps a front end's rendering of Grant.
	memos *memoRing
	Call  Call // the JSON-RPC call, when the request is one
	// Lineage is the request's place in its conversation (allowed requests
	// on routes with lineage).
	Lineage lineage.Result
	// Rule is the rule that decided a JSON-RPC call ("" when none matched);
	// RateLimit the limit that refused it; ExchangeAudience the audience of
	// the token exchanged for the upstream. For the audit record.
	Rule             string
	RateLimit        string
	ExchangeAudience string

	// Allowed: headers to set on the upstream request (always overwriting)
	// and owned headers to strip from it.
	Set    []Header
	Remove []string
	// HeadersID names Set and Remove: two verdicts of one grant with the
	// same non-zero HeadersID carry the same headers (the same slices,
	// which nobody writes to), so a front end may reuse the answer it built
	// for the first. 0 names nothing: build afresh.
	HeadersID uint64

	// Denied: headers for the client response and a short JSON body.
	ResponseHeaders []Header
	Body            []byte

	status int // overrides the outcome's status (configured overload status)
}

// Status is the HTTP status of the verdict.
func (v *Verdict) Status() int {
	if v.status != 0 {
		return v.status
	}
	return v.Outcome.Status()
}

// errorBody is the JSON a denial carries.
type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
	Scope       string `json:"scope,omitempty"`
	Status      int    `json:"status"`
}

func jsonBody(o Outcome, desc, scope string) []byte {
	b, _ := json.Marshal(errorBody{Error: o.String(), Description: desc, Scope: scope, Status: o.Status()})
	return b
}

// OverloadVerdict is the answer to a check refused for lack of capacity,
// with the configured status (503 unless set otherwise).
func OverloadVerdict(status int) Verdict {
	return Verdict{
		Outcome: Overloaded, Description: "too many checks in progress", Body: jsonBody(Overloaded, "too many checks in progress", ""), status: status,
		ResponseHeaders: []Header{{Name: "retry-after", Value: "1"}, {Name: "content-type", Value: "application/json"}},
	}
}

// rpcErrorBody is the JSON-RPC error response for a denial, so that MCP and
// A2A clients can match it to their request by id.
func rpcErrorBody(id []byte, d denial) []byte {
	code, msg := d.rpcCode, d.desc
	if code == 0 {
		// Authentication and authorization denials have no JSON-RPC code of
		// their own: the implementation-defined server error, with the OAuth
		// error in data.
		code = -32000
		msg = rpcMessages[d.outcome]
	}
	data := struct {
		Status      int    `json:"status"`
		Error       string `json:"error"`
		Description string `json:"error_description,omitempty"`
		Scope       string `json:"scope,omitempty"`
	}{d.outcome.Status(), d.outcome.String(), d.desc, d.scope}
	return jsonrpc.ErrorBody(id, code, msg, data)
}

var rpcMessages = [...]string{
	MissingToken:          "Unauthorized: a bearer token is required",
	InvalidToken:          "Unauthorized: the bearer token is not valid",
	InsufficientScope:     "Forbidden: insufficient scope",
	NoRoute:               "Forbidden",
	Malformed:             "Invalid Request",
	Unavailable:           "Service temporarily unavailable",
	Forbidden:             "Forbidden",
	SessionConflict:       "Forbidden: session belongs to another user",
	ResourceMetadata:      "",
	TooDeep:               "Forbidden: delegation chain too deep",
	DryRun:                "",
	Overloaded:            "Service overloaded",
	AuthorizationRequired: "",
	RateLimited:           "Too many requests: rate limit exceeded",
	PolicyError:           "Forbidden: the policy could not be evaluated",
	UnknownSession:        "Not Found: unknown session",
}

// challenge builds an RFC 6750 / RFC 9728 WWW-Authenticate value of
// scheme, Bearer or DPoP (RFC 9449 section 7.1, which adds the proof
// algorithms accepted).
func challenge(scheme, errCode, desc, scope, resourceMetadata string) string {
	var b strings.Builder
	b.WriteString(scheme)
	sep := " "
	param := func(k, v string) {
		if v == "" {
			return
		}
		b.WriteString(sep)
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(quote(v))
		b.WriteByte('"')
		sep = ", "
	}
	param("error", errCode)
	param("error_description", desc)
	param("scope", scope)
	param("resource_metadata", resourceMetadata)
	if scheme == "DPoP" {
		param("algs", dpopAlgs)
	}
	return b.String()
}

// quote makes s safe inside a quoted-string: no quotes, backslashes or
// control bytes survive.
func quote(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
