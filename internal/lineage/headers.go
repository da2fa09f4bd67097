package lineage

import (
	"strconv"
	"strings"
)

// Header is one upstream header, lower-case name and value.
type Header struct{ Name, Value string }

// Headers returns the lineage headers to set on the upstream request and the
// owned lineage headers to strip from it. See AppendHeaders.
func (r *Result) Headers(n Names) (set []Header, remove []string) {
	return r.AppendHeaders(make([]Header, 0, 5), make([]string, 0, 3), n)
}

// AppendHeaders appends to set the lineage headers for the upstream request
// and to remove the owned lineage headers that must not reach it: the parent
// at the root, an empty actor chain, a signed token when none was minted.
// Every configured lineage name ends up in exactly one of the two, so nothing
// a client sent survives unchecked. The identity names (User, Session) are
// left to the caller.
func (r *Result) AppendHeaders(set []Header, remove []string, n Names) ([]Header, []string) {
	set, remove = appendHeader(set, remove, n.Root, r.Root)
	set, remove = appendHeader(set, remove, n.Parent, r.Parent)
	switch {
	case n.Depth == "":
	case r.Root == "": // nothing names the conversation (Options.NoMint)
		remove = append(remove, n.Depth)
	default:
		set = append(set, Header{n.Depth, strconv.Itoa(r.Depth)})
	}
	if n.ActorChain != "" {
		var chain string
		switch len(r.ActorChain) {
		case 0:
		case 1:
			chain = r.ActorChain[0]
		default:
			chain = strings.Join(r.ActorChain, ",")
		}
		set, remove = appendHeader(set, remove, n.ActorChain, chain)
	}
	set, remove = appendHeader(set, remove, n.Signed, r.Signed)
	return set, remove
}

// appendHeader sets name to value, or removes it when value is empty.
// A name that is not configured is left alone.
func appendHeader(set []Header, remove []string, name, value string) ([]Header, []string) {
	switch {
	case name == "":
	case value == "":
		remove = append(remove, name)
	default:
		set = append(set, Header{name, value})
	}
	return set, remove
}
