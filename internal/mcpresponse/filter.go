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
	f := listFilter{d: body, shape: shape, keep: keep, list: valueSpan{-1, -1}}
	sawResult, sawOther := false, false
	_, err := object(body, i, func(key []byte, v int) (int, error) {
		if is, err := keyIs(key, "result"); err != nil || is {
			sawResult = true
			if err != nil {
				return 0, err
			}
			return f.result(v)
		}
		if string(key) == "error" || string(key) == "method" {
			sawOther = true
		}
		return skipValue(body, v), nil
	})
	switch {
	case err != nil:
		return nil, 0, err
	case !sawResult && sawOther:
		return body, 0, nil // an error response, a request or a notification
	case !sawResult:
		return nil, 0, fmt.Errorf("%w: no result", ErrUnexpectedShape)
	case f.list.start < 0:
		return nil, 0, fmt.Errorf("%w: no result.%s", ErrUnexpectedShape, shape.array)
	case f.removed == 0:
		return body, 0, nil
	}
	return f.rebuild(), f.removed, nil
}

// listFilter walks one response, in a single pass over a document
// ValidateStrict accepted.
type listFilter struct {
	d       []byte
	shape   listShape
	keep    Predicate
	list    valueSpan   // the entries array, brackets included
	entries []valueSpan // each entry
	keepAt  []bool
	removed int
}

func (f *listFilter) result(v int) (int, error) {
	if f.d[v] != '{' {
		return 0, fmt.Errorf("%w: result is not an object", ErrUnexpectedShape)
	}
	return object(f.d, v, func(key []byte, v int) (int, error) {
		if is, err := keyIs(key, f.shape.array); err != nil {
			return 0, err
		} else if is {
			return f.array(v)
		}
		return skipValue(f.d, v), nil
	})
}

func (f *listFilter) array(v int) (int, error) {
	d := f.d
	if d[v] != '[' {
		return 0, fmt.Errorf("%w: result.%s is not an array", ErrUnexpectedShape, f.shape.array)
	}
	i := skipWS(d, v+1)
	for d[i] != ']' {
		end, err := f.entry(i)
		if err != nil {
			return 0, err
		}
		f.entries = append(f.entries, valueSpan{i, end})
		i = skipWS(d, end)
		if d[i] == ',' {
			i = skipWS(d, i+1)
		}
	}
	f.list = valueSpan{v, i + 1}
	return i + 1, nil
}

func (f *listFilter) entry(v int) (int, error) {
	d := f.d
	if d[v] != '{' {
		return 0, fmt.Errorf("%w: an entry of result.%s is not an object", ErrUnexpectedShape, f.shape.array)
	}
	name, annotations := valueSpan{-1, -1}, valueSpan{-1, -1}
	end, err := object(d, v, func(key []byte, v int) (int, error) {
		end := skipValue(d, v)
		if is, err := keyIs(key, f.shape.nameKey); err != nil {
			return 0, err
		} else if is {
			name = valueSpan{v, end}
		}
		if is, err := keyIs(key, "annotations"); err != nil {
			return 0, err
		} else if is {
			annotations = valueSpan{v, end}
		}
		return end, nil
	})
	if err != nil {
		return 0, err
	}
	n, ok := stringValue(d, name)
	if !ok {
		return 0, fmt.Errorf("%w: an entry's %s is not a string", ErrUnexpectedShape, f.shape.nameKey)
	}
	var raw json.RawMessage
	if annotations.start >= 0 {
		raw = d[annotations.start:annotations.end]
	}
	kept := f.keep(f.shape.kind, n, raw)
	f.keepAt = append(f.keepAt, kept)
	if !kept {
		f.removed++
	}
	return end, nil
}

// rebuild writes the response with the refused entries left out: what lies
// between '[' and the first entry, the kept entries joined by the original
// first separator, and what lies between the last entry and ']'.
func (f *listFilter) rebuild() []byte {
	d, entries := f.d, f.entries
	sep := []byte(",")
	if len(entries) > 1 {
		sep = d[entries[0].end:entries[1].start]
	}
	out := make([]byte, 0, len(d))
	out = append(out, d[:entries[0].start]...)
	first := true
	for n, e := range entries {
		if !f.keepAt[n] {
			continue
		}
		if !first {
			out = append(out, sep...)
		}
		out = append(out, d[e.start:e.end]...)
		first = false
	}
	return append(out, d[entries[len(entries)-1].end:]...)
}

// valueSpan is where a value sits in a document: [start, end); start < 0
// when absent.
type valueSpan struct{ start, end int }

// object walks the object at d[i] (validated) and calls member with each
// key, unescaped, and the index of its value; member returns the index
// after the value. object returns the index after the object.
func object(d []byte, i int, member func(key []byte, v int) (int, error)) (int, error) {
	i = skipWS(d, i+1) // '{'
	if d[i] == '}' {
		return i + 1, nil
	}
	for {
		keyEnd := skipString(d, i)
		key := d[i+1 : keyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if err := json.Unmarshal(d[i:keyEnd], &k); err != nil {
				return 0, fmt.Errorf("%w: %w", ErrUnreadable, err)
			}
			key = []byte(k)
		}
		i = skipWS(d, keyEnd)
		i = skipWS(d, i+1) // ':'
		end, err := member(key, i)
		if err != nil {
			return 0, err
		}
		i = skipWS(d, end)
		if d[i] == '}' {
			return i + 1, nil
		}
		i = skipWS(d, i+1) // ','
	}
}

// keyIs reports whether key is want. A key equal to want only under case
// folding is an error: some client decoders (Go's encoding/json) would
// read it as that member, others would not.
func keyIs(key []byte, want string) (bool, error) {
	if string(key) == want {
		return true, nil
	}
	// Folding maps at most one byte to three (K, U+212A, is k), never
	// fewer: only keys of these lengths can fold onto want.
	if len(key) >= len(want) && len(key) <= 3*len(want) && bytes.EqualFold(key, []byte(want)) {
		return false, fmt.Errorf("%w: key %q is ambiguous with %q", ErrUnexpectedShape, key, want)
	}
	return false, nil
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

// skipString returns the index after the string at d[i]. Short strings
// are scanned byte by byte; longer ones jump from quote to quote
// (bytes.IndexByte is vectorised). A quote preceded by an odd number of
// backslashes is escaped and does not end the string.
func skipString(d []byte, i int) int {
	i++
	for {
		j := i
		for end := min(i+16, len(d)); j < end && d[j] != '"'; j++ {
		}
		if j == len(d) || d[j] != '"' {
			j += bytes.IndexByte(d[j:], '"')
		}
		i = j
		backslashes := 0
		for k := i - 1; d[k] == '\\'; k-- { // stops at the opening quote at the latest
			backslashes++
		}
		if backslashes%2 == 0 {
			return i + 1
		}
		i++
	}
}

// structural marks the bytes skipValue stops at inside an object or array.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// skipValue returns the index after the value at d[i].
func skipValue(d []byte, i int) int {
	switch d[i] {
	case '"':
		return skipString(d, i)
	case '{', '[':
		depth := 0
		for {
			for !structural[d[i]] {
				i++
			}
			switch d[i] {
			case '"':
				i = skipString(d, i)
				continue
			case '{', '[':
				depth++
			default: // '}', ']'
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
