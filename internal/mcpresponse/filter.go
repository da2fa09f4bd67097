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
	if err := jsonrpc.ValidateStrict(body); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	i := skipWS(body, 0)
	if body[i] != '{' {
		return nil, 0, fmt.Errorf("%w: not an object", ErrUnexpectedShape)
	}
	top, err := members(body, i, "result", "error", "method")
	if err != nil {
		return nil, 0, err
	}
	result := top[0]
	if result.start < 0 {
		if top[1].start >= 0 || top[2].start >= 0 {
			return body, 0, nil
		}
		return nil, 0, fmt.Errorf("%w: no result", ErrUnexpectedShape)
	}
	if body[result.start] != '{' {
		return nil, 0, fmt.Errorf("%w: result is not an object", ErrUnexpectedShape)
	}
	inResult, err := members(body, result.start, shape.array)
	if err != nil {
		return nil, 0, err
	}
	list := inResult[0]
	if list.start < 0 || body[list.start] != '[' {
		return nil, 0, fmt.Errorf("%w: result.%s is not an array", ErrUnexpectedShape, shape.array)
	}

	entries := elements(body, list)
	keepAt := make([]bool, len(entries))
	removed := 0
	for n, e := range entries {
		if body[e.start] != '{' {
			return nil, 0, fmt.Errorf("%w: an entry of result.%s is not an object", ErrUnexpectedShape, shape.array)
		}
		m, err := members(body, e.start, shape.nameKey, "annotations")
		if err != nil {
			return nil, 0, err
		}
		name, ok := stringValue(body, m[0])
		if !ok {
			return nil, 0, fmt.Errorf("%w: an entry's %s is not a string", ErrUnexpectedShape, shape.nameKey)
		}
		var annotations json.RawMessage
		if m[1].start >= 0 {
			annotations = body[m[1].start:m[1].end]
		}
		keepAt[n] = keep(shape.kind, name, annotations)
		if !keepAt[n] {
			removed++
		}
	}
	if removed == 0 {
		return body, 0, nil
	}

	// Rebuild the array: what lies between '[' and the first entry, the
	// kept entries joined by the original first separator, and what lies
	// between the last entry and ']'.
	sep := []byte(",")
	if len(entries) > 1 {
		sep = body[entries[0].end:entries[1].start]
	}
	out := make([]byte, 0, len(body))
	out = append(out, body[:list.start+1]...)
	if len(entries) > 0 {
		out = append(out, body[list.start+1:entries[0].start]...)
	}
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
	if len(entries) > 0 {
		out = append(out, body[entries[len(entries)-1].end:list.end-1]...)
	}
	out = append(out, body[list.end-1:]...)
	return out, removed, nil
}

// valueSpan is where a value sits in a document: [start, end); start < 0
// when absent.
type valueSpan struct{ start, end int }

// members reads the object at d[i] (already validated) and returns the
// value spans of the wanted keys, compared after unescaping. A key that
// equals a wanted one only under case folding is an error: some client
// decoders (Go's encoding/json) would read it as that member.
func members(d []byte, i int, want ...string) ([]valueSpan, error) {
	found := make([]valueSpan, len(want))
	for n := range found {
		found[n].start = -1
	}
	i = skipWS(d, i+1) // '{'
	if d[i] == '}' {
		return found, nil
	}
	for {
		keyEnd, escaped := skipString(d, i)
		key := d[i+1 : keyEnd-1]
		if escaped {
			var k string
			if err := json.Unmarshal(d[i:keyEnd], &k); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
			}
			key = []byte(k)
		}
		i = skipWS(d, keyEnd)
		i = skipWS(d, i+1) // ':'
		end := skipValue(d, i)
		for n, w := range want {
			if string(key) == w {
				found[n] = valueSpan{i, end}
			} else if bytes.EqualFold(key, []byte(w)) {
				return nil, fmt.Errorf("%w: key %q is ambiguous with %q", ErrUnexpectedShape, key, w)
			}
		}
		i = skipWS(d, end)
		if d[i] == '}' {
			return found, nil
		}
		i = skipWS(d, i+1) // ','
	}
}

// elements returns the spans of the values of the array at a.
func elements(d []byte, a valueSpan) []valueSpan {
	var out []valueSpan
	i := skipWS(d, a.start+1)
	if d[i] == ']' {
		return out
	}
	for {
		end := skipValue(d, i)
		out = append(out, valueSpan{i, end})
		i = skipWS(d, end)
		if d[i] == ']' {
			return out
		}
		i = skipWS(d, i+1)
	}
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

// The skip functions walk a document ValidateStrict accepted, so they do
// not check syntax again.

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string at d[i] and whether it
// holds escapes.
func skipString(d []byte, i int) (int, bool) {
	escaped := false
	i++
	for {
		j := bytes.IndexAny(d[i:], `"\`)
		i += j
		if d[i] == '"' {
			return i + 1, escaped
		}
		escaped = true
		i += 2 // the escape and the byte it escapes; \uXXXX's digits are plain
	}
}

// skipValue returns the index after the value at d[i].
func skipValue(d []byte, i int) int {
	switch d[i] {
	case '"':
		end, _ := skipString(d, i)
		return end
	case '{', '[':
		depth := 0
		for {
			switch d[i] {
			case '"':
				i, _ = skipString(d, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // number, true, false, null
		for i < len(d) && !isDelim(d[i]) {
			i++
		}
		return i
	}
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}
