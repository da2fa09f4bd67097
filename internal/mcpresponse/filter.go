package mcpresponse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Kinds of list entries, passed to a Predicate.
const (
	KindTool             = "tool"
	KindPrompt           = "prompt"
	KindResource         = "resource"
	KindResourceTemplate = "resourceTemplate"
)

// Predicate decides whether a list entry stays. kind is one of the Kind
// constants; name is what access rules match for that kind (a tool's or
// prompt's name, a resource's uri, a template's uriTemplate);
// annotations is the entry's "annotations" member as sent (nil when
// absent).
type Predicate func(kind, name string, annotations json.RawMessage) bool

// Errors returned by FilterList. The caller answers with a JSON-RPC error
// instead of the response (fail closed).
var (
	// ErrNotList: the method is not one whose result FilterList knows.
	ErrNotList = errors.New("mcpresponse: not a list method")
	// ErrUnreadable: the body is not one strict JSON document (syntax,
	// UTF-8, duplicate keys, depth, size).
	ErrUnreadable = errors.New("mcpresponse: response is not strict JSON")
	// ErrUnexpectedShape: strict JSON, but not a list result this package
	// reads exactly as a client would (missing or mistyped members, keys
	// that differ from ours only in case).
	ErrUnexpectedShape = errors.New("mcpresponse: response is not a list result")
)

// listShape says where a method's entries and their names are.
type listShape struct {
	kind    string
	array   string // member of result holding the entries
	nameKey string // member of an entry the rules match
}

var listShapes = map[string]listShape{
	"tools/list":               {KindTool, "tools", "name"},
	"prompts/list":             {KindPrompt, "prompts", "name"},
	"resources/list":           {KindResource, "resources", "uri"},
	"resources/templates/list": {KindResourceTemplate, "resourceTemplates", "uriTemplate"},
}

// IsListMethod reports whether FilterList filters the results of method.
func IsListMethod(method string) bool {
	_, ok := listShapes[method]
	return ok
}

// FilterList removes from a JSON-RPC response to method (one of the list
// methods) every entry keep refuses, and returns the new body with the
// number removed. Everything else is kept byte for byte: the id, other
// members of the result (nextCursor, _meta), other members of each kept
// entry, and the whitespace between entries (the separator of the first
// two entries is reused where entries were removed). When nothing is
// removed the body is returned unchanged (same slice).
//
// A JSON-RPC error response, and a message that is not a response (a
// request or notification sent on the same stream), come back unchanged:
// they list nothing. Anything else that is not exactly a list result is
// an error.
func FilterList(method string, body []byte, keep Predicate) ([]byte, int, error) {
	shape, ok := listShapes[method]
	if !ok {
		return nil, 0, fmt.Errorf("%w: %q", ErrNotList, method)
	}
	// One strict pass records the members of the response (depth 1), of
	// its result (2), the entries (3) and their members (4); the visits
	// come after their values (inner first), so they are sorted out by
	// position afterwards.
	w := walk{shape: shape, result: valueSpan{-1, -1}}
	if err := jsonrpc.WalkStrict(body, 4, w.visit); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if body[skipWS(body, 0)] != '{' {
		return nil, 0, fmt.Errorf("%w: not an object", ErrUnexpectedShape)
	}
	if w.err != nil {
		return nil, 0, w.err
	}
	result := w.result
	switch {
	case result.start < 0 && w.other:
		return body, 0, nil // an error response, a request or a notification
	case result.start < 0:
		return nil, 0, fmt.Errorf("%w: no result", ErrUnexpectedShape)
	case body[result.start] != '{':
		return nil, 0, fmt.Errorf("%w: result is not an object", ErrUnexpectedShape)
	}
	list := valueSpan{-1, -1}
	for _, m := range w.inner {
		if !result.holds(m.span) {
			continue
		}
		if m.ambiguous {
			return nil, 0, fmt.Errorf("%w: a key of result is ambiguous with %q", ErrUnexpectedShape, shape.array)
		}
		list = m.span
	}
	if list.start < 0 || body[list.start] != '[' {
		return nil, 0, fmt.Errorf("%w: result.%s is not an array", ErrUnexpectedShape, shape.array)
	}

	// Entries of the list, in order, and their name and annotations:
	// members come in document order, so one merge pass pairs them.
	var entries []valueSpan
	for _, e := range w.elements {
		if list.holds(e) {
			entries = append(entries, e)
		}
	}
	keepAt := make([]bool, len(entries))
	removed := 0
	m := 0
	for n, e := range entries {
		if body[e.start] != '{' {
			return nil, 0, fmt.Errorf("%w: an entry of result.%s is not an object", ErrUnexpectedShape, shape.array)
		}
		name, annotations := valueSpan{-1, -1}, valueSpan{-1, -1}
		for ; m < len(w.members) && w.members[m].span.start < e.end; m++ {
			mem := w.members[m]
			if !e.holds(mem.span) {
				continue // a member of an object outside the list
			}
			switch {
			case mem.ambiguous:
				return nil, 0, fmt.Errorf("%w: a key of an entry is ambiguous with %q or \"annotations\"", ErrUnexpectedShape, shape.nameKey)
			case mem.isName:
				name = mem.span
			default:
				annotations = mem.span
			}
		}
		nameValue, ok := stringValue(body, name)
		if !ok {
			return nil, 0, fmt.Errorf("%w: an entry's %s is not a string", ErrUnexpectedShape, shape.nameKey)
		}
		var raw json.RawMessage
		if annotations.start >= 0 {
			raw = body[annotations.start:annotations.end]
		}
		keepAt[n] = keep(shape.kind, nameValue, raw)
		if !keepAt[n] {
			removed++
		}
	}
	if removed == 0 {
		return body, 0, nil
	}
	return rebuild(body, entries, keepAt), removed, nil
}

// valueSpan is where a value sits in a document: [start, end); start < 0
// when absent.
type valueSpan struct{ start, end int }

func (v valueSpan) holds(inner valueSpan) bool {
	return v.start >= 0 && v.start < inner.start && inner.end < v.end
}

// member is a visited member the filter may need.
type member struct {
	span      valueSpan
	isName    bool // the entry's name key (else annotations)
	ambiguous bool // the key equals one of ours only under case folding
}

// walk collects, during jsonrpc.WalkStrict, the values FilterList needs.
type walk struct {
	shape    listShape
	result   valueSpan
	other    bool        // the message has error or method: not a result
	inner    []member    // depth 2 members named like the list array
	elements []valueSpan // depth 3 array elements
	members  []member    // depth 4 members named like name or annotations
	err      error
}

func (w *walk) visit(depth int, key []byte, start, end int) {
	span := valueSpan{start, end}
	switch depth {
	case 1:
		switch is, ambiguous := keyIs(key, "result"); {
		case ambiguous:
			w.err = fmt.Errorf("%w: key %q is ambiguous with \"result\"", ErrUnexpectedShape, key)
		case is:
			w.result = span
		case string(key) == "error" || string(key) == "method":
			w.other = true
		}
	case 2:
		if is, ambiguous := keyIs(key, w.shape.array); is || ambiguous {
			w.inner = append(w.inner, member{span: span, ambiguous: ambiguous})
		}
	case 3:
		if key == nil {
			w.elements = append(w.elements, span)
		}
	case 4:
		isName, ambiguousName := keyIs(key, w.shape.nameKey)
		isAnnotations, ambiguousAnnotations := keyIs(key, "annotations")
		if isName || isAnnotations || ambiguousName || ambiguousAnnotations {
			w.members = append(w.members, member{span: span, isName: isName, ambiguous: ambiguousName || ambiguousAnnotations})
		}
	}
}

// rebuild writes body with the refused entries left out: what lies
// between '[' and the first entry, the kept entries joined by the original
// first separator, and what lies between the last entry and ']'.
func rebuild(body []byte, entries []valueSpan, keepAt []bool) []byte {
	sep := []byte(",")
	if len(entries) > 1 {
		sep = body[entries[0].end:entries[1].start]
	}
	out := make([]byte, 0, len(body))
	out = append(out, body[:entries[0].start]...)
	first := true
	for n, e := range entries {
		if !keepAt[n] {
			continue
		}
		if !first {
			out = append(out, sep...)
		}
		out = append(out, body[e.start:e.end]...)
		first = false
	}
	return append(out, body[entries[len(entries)-1].end:]...)
}

// keyIs reports whether key is want, and whether it equals want only
// under case folding: some client decoders (Go's encoding/json) would read
// such a key as that member, others would not, so it is refused.
func keyIs(key []byte, want string) (is, ambiguous bool) {
	if string(key) == want {
		return true, false
	}
	// Folding maps at most one byte to three (K, U+212A, is k), never
	// fewer: only keys of these lengths can fold onto want.
	return false, len(key) >= len(want) && len(key) <= 3*len(want) && bytes.EqualFold(key, []byte(want))
}

// stringValue decodes the JSON string at v; false when absent or not a
// string.
func stringValue(d []byte, v valueSpan) (string, bool) {
	if v.start < 0 || d[v.start] != '"' {
		return "", false
	}
	raw := d[v.start+1 : v.end-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw), true
	}
	var s string
	if err := json.Unmarshal(d[v.start:v.end], &s); err != nil {
		return "", false
	}
	return s, true
}

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}
