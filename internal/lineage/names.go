package lineage

import (
	"errors"
	"fmt"
)

// Names are the header names lineage travels in, lower-case. An empty name
// turns that header off: it is neither read nor set.
//
// User and Session are listed so that one block names every header the
// service owns, but the identity headers are set from the verified token by
// the caller of this package; AppendHeaders never touches them.
type Names struct {
	User       string // the verified user (sub)
	Session    string // the verified session (session_id claim)
	Root       string // the conversation at the top of the chain
	Parent     string // the immediate caller's context
	Depth      string // agent hops before this one
	ActorChain string // act chain subjects, outermost first, comma-separated
	Signed     string // the signed lineage token
}

// DefaultNames are the header names the service uses unless configured
// otherwise.
func DefaultNames() Names {
	return Names{
		User:       "x-user-id",
		Session:    "x-session-id",
		Root:       "x-root-context-id",
		Parent:     "x-parent-context-id",
		Depth:      "x-lineage-depth",
		ActorChain: "x-actor-chain",
		Signed:     "x-lineage-token",
	}
}

// KagentNames are DefaultNames with kagent's lineage headers, so that kagent
// agents behind the proxy read and send the lineage they already know.
func KagentNames() Names {
	n := DefaultNames()
	n.Root = "x-kagent-root-context-id"
	n.Parent = "x-kagent-parent-context-id"
	return n
}

// Validate reports names that are not lower-case HTTP header names, a
// missing Root or Parent, and one name used twice.
func (n Names) Validate() error {
	var errs []error
	seen := make(map[string]string, 7)
	for _, f := range n.fields() {
		if f.value == "" {
			if f.field == "root" || f.field == "parent" {
				errs = append(errs, fmt.Errorf("lineage header name for %s is required", f.field))
			}
			continue
		}
		if !validHeaderName(f.value) {
			errs = append(errs, fmt.Errorf("lineage header name for %s %q is not a lower-case header name", f.field, f.value))
			continue
		}
		if other, dup := seen[f.value]; dup {
			errs = append(errs, fmt.Errorf("lineage header name %q is used for both %s and %s", f.value, other, f.field))
			continue
		}
		seen[f.value] = f.field
	}
	return errors.Join(errs...)
}

// Owned lists every configured header name: the headers a client must never
// be able to forge, to be stripped from requests whose lineage is not used.
func (n Names) Owned() []string {
	owned := make([]string, 0, 7)
	for _, f := range n.fields() {
		if f.value != "" {
			owned = append(owned, f.value)
		}
	}
	return owned
}

// Inbound reads the raw lineage headers from a map of lower-case header
// names to values.
func (n Names) Inbound(headers map[string]string) Inbound {
	var in Inbound
	if n.Root != "" {
		in.Root = headers[n.Root]
	}
	if n.Parent != "" {
		in.Parent = headers[n.Parent]
	}
	if n.Depth != "" {
		in.Depth = headers[n.Depth]
	}
	if n.ActorChain != "" {
		in.ActorChain = headers[n.ActorChain]
	}
	if n.Signed != "" {
		in.Signed = headers[n.Signed]
	}
	return in
}

type namedField struct{ field, value string }

func (n Names) fields() [7]namedField {
	return [7]namedField{
		{"user", n.User},
		{"session", n.Session},
		{"root", n.Root},
		{"parent", n.Parent},
		{"depth", n.Depth},
		{"actor chain", n.ActorChain},
		{"signed", n.Signed},
	}
}

// validHeaderName reports whether s is an RFC 9110 token in lower case.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-', c == '_', c == '.', c == '!', c == '#', c == '$', c == '%', c == '&',
			c == '\'', c == '*', c == '+', c == '^', c == '`', c == '|', c == '~':
		default:
			return false
		}
	}
	return true
}
