package lineage

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/extauthz/extauthz/internal/segment"
)

const (
	// DefaultMaxDepth is the deepest a request may be when the route does not
	// say: deeper chains are taken for a runaway delegation loop.
	DefaultMaxDepth = 8
	// MaxIDLength bounds a context id, in bytes.
	MaxIDLength = 256
	// MaxActors bounds the actor chain, from an act claim or a header.
	MaxActors = 32
	// maxDepthDigits bounds an inbound depth: anything longer is not a depth
	// but an attack on the parser.
	maxDepthDigits = 4
)

var (
	// ErrTooDeep is a request deeper than the route allows (answer 403).
	ErrTooDeep = errors.New("lineage too deep")
	// ErrMalformed is a lineage value that cannot be used: a depth that is
	// not a small decimal number, an id with control characters or too long
	// (answer 400).
	ErrMalformed = errors.New("malformed lineage")
)

// Inbound are the raw lineage header values a request came with; "" means
// absent.
type Inbound struct {
	Root, Parent, Depth, ActorChain string
	// Signed is the signed lineage token; it takes effect only once
	// SignedVerifier has verified it and the result is passed in
	// Options.Signed.
	Signed string
}

// Facts are what the service knows of the request itself, independent of
// inbound lineage headers. They name the request's own context: the root of
// a new chain, and the parent the next hop will see.
type Facts struct {
	ContextID      string   // A2A params.message.contextId from the body
	MCPSessionID   string   // the Mcp-Session-Id header
	TokenSessionID string   // the verified token's session claim
	ActChain       []string // ActChain of the verified token's claims
}

// Options are the per-request settings of Derive.
type Options struct {
	// Trusted says the inbound lineage headers come from a caller the route
	// trusts (Trust.Trusted); otherwise they are ignored.
	Trusted bool
	// Signed is a verified signed lineage token. It wins over the headers
	// and counts even when Trusted is false.
	Signed *Carried
	// MaxDepth is the deepest depth allowed; 0 means DefaultMaxDepth.
	MaxDepth int
	// NewID makes a context id when the request names none; nil means NewID.
	NewID func() string
	// NoMint makes no id when nothing names the conversation (no context,
	// session, trusted inbound lineage or signed token): the result is
	// empty and no lineage header is sent, as kagent does without a
	// session.
	NoMint bool
}

// Result is the lineage of a request as it goes upstream.
type Result struct {
	Root    string // empty only when NoMint found nothing naming the conversation
	Parent  string // "" at the root
	Depth   int
	Context string // the request's own context: the next hop's parent
	// ActorChain is outermost first. It may share its backing array with
	// Facts.ActChain or Carried.ActorChain: do not modify it.
	ActorChain []string
	// Trusted says inbound lineage (headers or a signed token) was used;
	// FromSigned that it came from a signed token.
	Trusted, FromSigned bool
	// Signed is the signed lineage token to send upstream, if the caller
	// minted one (Signer.Sign); "" strips the header.
	Signed string
	// headerActors says ActorChain is a trusted caller's header, its word
	// rather than an act claim or a verified token: Sign leaves it out, so
	// that no hop takes it for signed truth.
	headerActors bool
}

// Derive applies the lineage rules to one request.
//
//   - root: the inbound root; else the inbound parent (callers that send
//     only a parent are promoted); else the request's own context.
//   - parent: the inbound parent; absent at the root.
//   - depth: one more than the inbound depth; 1 when a root or parent came
//     in without a depth; 0 at the root; never less than the number of
//     actors.
//   - actor chain: the token's act chain when it has one (a header that
//     contradicts it loses); else the inbound one.
//   - own context: the A2A context id, else the MCP session id, else the
//     token's session, else a new id.
//
// Inbound values are used only when the caller is trusted or they came in a
// verified signed token; untrusted ones are never parsed, so they cannot
// cause an error. Errors are ErrTooDeep and ErrMalformed (errors.Is).
func Derive(in Inbound, f Facts, o Options) (Result, error) {
	var r Result
	ctxID, err := ownContext(f, o.NewID, o.NoMint)
	if err != nil {
		return Result{}, err
	}
	r.Context = ctxID

	switch {
	case o.Signed != nil:
		s := o.Signed
		// The signed token describes the hop that served our caller: its
		// context is our parent.
		r.Root, r.Parent, r.Depth = s.Root, s.Context, s.Depth+1
		r.ActorChain = s.ActorChain
		r.Trusted, r.FromSigned = true, true
	case o.Trusted:
		if r.Root, err = inboundID(in.Root, "root"); err != nil {
			return Result{}, err
		}
		if r.Parent, err = inboundID(in.Parent, "parent"); err != nil {
			return Result{}, err
		}
		d, present, err := ParseDepth(in.Depth)
		switch {
		case err != nil:
			return Result{}, err
		case present:
			r.Depth = d + 1
		case r.Root != "" || r.Parent != "":
			r.Depth = 1
		}
		if in.ActorChain != "" && len(f.ActChain) == 0 {
			if r.ActorChain, err = parseActorList(in.ActorChain); err != nil {
				return Result{}, err
			}
			r.headerActors = len(r.ActorChain) > 0
		}
		r.Trusted = true
	}
	if r.Root == "" {
		r.Root = r.Parent // a legacy caller sent only its own context
	}
	if r.Root == "" {
		r.Root = r.Context
	}
	if len(f.ActChain) > 0 {
		r.ActorChain = f.ActChain
	}
	r.Depth = max(r.Depth, len(r.ActorChain))

	maxDepth := o.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	if r.Depth > maxDepth {
		return Result{}, fmt.Errorf("%w: depth %d exceeds %d", ErrTooDeep, r.Depth, maxDepth)
	}
	if r.Root == "" {
		return Result{}, nil // NoMint, and nothing names the conversation
	}
	return r, nil
}

// ownContext picks the request's own context id.
func ownContext(f Facts, newID func() string, noMint bool) (string, error) {
	var id, what string
	switch {
	case f.ContextID != "":
		id, what = f.ContextID, "A2A context id"
	case f.MCPSessionID != "":
		id, what = f.MCPSessionID, "MCP session id"
	case f.TokenSessionID != "":
		id, what = f.TokenSessionID, "token session id"
	case noMint:
		return "", nil
	default:
		if newID == nil {
			newID = NewID
		}
		id, what = newID(), "new context id"
	}
	if !ValidID(id) {
		return "", fmt.Errorf("%w: %s", ErrMalformed, what)
	}
	return id, nil
}

// inboundID trims and checks one inbound id header value.
func inboundID(v, what string) (string, error) {
	v = trimOWS(v)
	if v == "" {
		return "", nil
	}
	if !ValidID(v) {
		return "", fmt.Errorf("%w: %s id", ErrMalformed, what)
	}
	return v, nil
}

// ValidID reports whether s can be a context id: 1 to MaxIDLength bytes of
// UTF-8 without control characters, commas (a repeated header arrives
// comma-joined) or surrounding spaces, Unicode's included: a workload that
// trims an id it reads (Python's strip, JavaScript's trim) would take
// "ctx-1\u00a0" for "ctx-1", one conversation where the service sees two.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDLength || segment.Padded(s) {
		return false
	}
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == ',' {
			return false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if !ascii {
		for _, r := range s {
			// Reject invalid UTF-8 and the C1 controls.
			if r == utf8.RuneError || (0x80 <= r && r < 0xa0) {
				return false
			}
		}
	}
	return true
}

// ParseDepth parses an inbound depth header: a decimal number of at most
// four digits, optionally surrounded by spaces. present is false for "".
func ParseDepth(v string) (depth int, present bool, err error) {
	v = trimOWS(v)
	if v == "" {
		return 0, false, nil
	}
	if len(v) > maxDepthDigits {
		return 0, true, fmt.Errorf("%w: depth", ErrMalformed)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, true, fmt.Errorf("%w: depth", ErrMalformed)
		}
		depth = depth*10 + int(c-'0')
	}
	return depth, true, nil
}

// parseActorList splits a comma-separated actor chain header. Empty
// elements are skipped, as HTTP list syntax allows.
func parseActorList(v string) ([]string, error) {
	n := strings.Count(v, ",") + 1
	if n > MaxActors*2 {
		return nil, fmt.Errorf("%w: actor chain too long", ErrMalformed)
	}
	var chain []string
	for part := range strings.SplitSeq(v, ",") {
		part = trimOWS(part)
		if part == "" {
			continue
		}
		if !ValidID(part) {
			return nil, fmt.Errorf("%w: actor", ErrMalformed)
		}
		if len(chain) == MaxActors {
			return nil, fmt.Errorf("%w: actor chain too long", ErrMalformed)
		}
		if chain == nil {
			chain = make([]string, 0, min(n, MaxActors))
		}
		chain = append(chain, part)
	}
	return chain, nil
}

// trimOWS removes HTTP optional white space around a header value.
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// NewID returns a random version 4 UUID, the kind of context id agent
// frameworks mint themselves.
func NewID() string { return uuid.NewString() }
