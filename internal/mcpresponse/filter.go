package mcpresponse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Kinds of list entries, passed to a Predicate.
const (
	KindTool             = "tool"
	KindPrompt           = "prompt"
	KindResource         = "resource"
	KindResourceTemplate = "resourceTemplate"
	KindSkill            = "skill" // the skills extension's (SEP-2640)
)

// Predicate decides whether a list entry stays. kind is one of the Kind
// constants; name is what access rules match for that kind (a tool's or
// prompt's name, a resource's uri, a template's uriTemplate, a skill's
// uri, that of its SKILL.md);
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
	// ErrListRefused: a list result by its shape on a stream no list may
	// pass on (NewSSEShapeFilter without a predicate).
	ErrListRefused = errors.New("mcpresponse: a list result where none may pass")
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
	"skills/list":              {KindSkill, "skills", "uri"},
}

// IsListMethod reports whether FilterList filters the results of method.
func IsListMethod(method string) bool {
	_, ok := listShapes[method]
	return ok
}

// FilterList removes from a JSON-RPC response to method (one of the list
// methods) every entry keep refuses, and returns the new body with the
// number removed. A result that says how it may be cached (cacheScope,
// MCP's CacheableResult) comes out with "cacheScope":"private", whether or
// not an entry was removed: the list is what this caller may use, and a
// shared cache must not serve it to another (an administrator's full list
// to anybody). Everything else is kept byte for byte: the id, other
// members of the result (nextCursor, ttlMs, _meta), other members of each
// kept entry, and the whitespace between entries (the separator of the
// first two entries is reused where entries were removed). When nothing
// changed the body is returned unchanged (same slice); Filter also says
// whether it changed.
//
// A JSON-RPC error response, and a message that is not a response (a
// request or notification sent on the same stream), come back unchanged:
// they list nothing. Anything else that is not exactly a list result is
// an error, and so is a result with a key equal to cacheScope only under
// case folding (some clients would read it as the scope).
func FilterList(method string, body []byte, keep Predicate) ([]byte, int, error) {
	out, removed, _, err := Filter(method, body, keep)
	return out, removed, err
}

// CacheScopePrivate is the value a filtered list's cacheScope is given.
const CacheScopePrivate = `"private"`

// privateScope is CacheScopePrivate as the pieces rebuild joins (read
// only).
var privateScope = []byte(CacheScopePrivate)

// Filter is FilterList, also reporting whether the body changed (entries
// removed or the cache scope made private): when it did not, out is body.
func Filter(method string, body []byte, keep Predicate) (out []byte, removed int, changed bool, err error) {
	shape, ok := listShapes[method]
	if !ok {
		return nil, 0, false, fmt.Errorf("%w: %q", ErrNotList, method)
	}
	// One strict pass records the members of the response (depth 1), of
	// its result (2), the entries (3) and their members (4). A value is
	// visited after what it holds (inner first), so each depth keeps what
	// it saw pending until the value holding it is visited.
	w := walks.Get().(*walk)
	defer w.release()
	w.reset(shape)
	if err := walkObject(body, 4, w.fn); err != nil {
		return nil, 0, false, err
	}
	if w.err != nil {
		return nil, 0, false, w.err
	}
	switch result := w.result; {
	case result.start < 0 && w.other:
		return body, 0, false, nil // an error response, a request or a notification
	case result.start < 0:
		return nil, 0, false, fmt.Errorf("%w: no result", ErrUnexpectedShape)
	case body[result.start] != '{':
		return nil, 0, false, fmt.Errorf("%w: result is not an object", ErrUnexpectedShape)
	case w.list.ambiguous:
		return nil, 0, false, fmt.Errorf("%w: a key of result is ambiguous with %q", ErrUnexpectedShape, shape.array)
	}
	list := w.list.span
	if list.start < 0 || body[list.start] != '[' {
		return nil, 0, false, fmt.Errorf("%w: result.%s is not an array", ErrUnexpectedShape, shape.array)
	}
	entries := w.entriesIn(list)
	// Every entry is checked before the predicate is asked about any.
	for i := range entries {
		e := &entries[i]
		switch {
		case body[e.span.start] != '{':
			return nil, 0, false, fmt.Errorf("%w: an entry of result.%s is not an object", ErrUnexpectedShape, shape.array)
		case e.ambiguous:
			return nil, 0, false, fmt.Errorf("%w: a key of an entry is ambiguous with %q or \"annotations\"", ErrUnexpectedShape, shape.nameKey)
		case e.name.start < 0 || body[e.name.start] != '"':
			return nil, 0, false, fmt.Errorf("%w: an entry's %s is not a string", ErrUnexpectedShape, shape.nameKey)
		}
	}
	switch scope := w.scope; {
	case scope.ambiguous:
		return nil, 0, false, fmt.Errorf("%w: a key of result is ambiguous with \"cacheScope\"", ErrUnexpectedShape)
	case scope.span.start >= 0 && string(body[scope.span.start:scope.span.end]) == CacheScopePrivate:
		w.scope.span = absent // already private
	}
	names, err := w.decodeNames(body, entries)
	if err != nil {
		return nil, 0, false, err
	}
	for i := range entries {
		e := &entries[i]
		var raw json.RawMessage
		if e.annotations.start >= 0 {
			raw = body[e.annotations.start:e.annotations.end]
		}
		e.keep = keep(shape.kind, names[e.nameStart:e.nameEnd], raw)
		if !e.keep {
			removed++
		}
	}
	if removed == 0 && w.scope.span.start < 0 {
		return body, 0, false, nil
	}
	return w.rebuild(body, entries, removed > 0, w.scope.span), removed, true, nil
}

// valueSpan is where a value sits in a document: [start, end); start < 0
// when absent.
type valueSpan struct{ start, end int }

var absent = valueSpan{-1, -1}

func (v valueSpan) holds(inner valueSpan) bool {
	return v.start >= 0 && v.start < inner.start && inner.end < v.end
}

// entry is an element of an array that may be the list, with the members
// the filter reads.
type entry struct {
	span, name, annotations valueSpan
	ambiguous               bool // a key equals name or annotations only under case folding
	nameStart, nameEnd      int  // the decoded name, in decodeNames's string
	keep                    bool
}

// candidate is a member of an object at depth 2 named like the list.
type candidate struct {
	span      valueSpan // the member named exactly so; start < 0 when none
	ambiguous bool      // a key equal to the list's only under case folding
}

// walk collects, during jsonrpc.WalkStrict, the values FilterList needs.
// Walks are pooled: a list of a hundred tools is filtered without a
// per-entry allocation.
type walk struct {
	shape  listShape
	fn     jsonrpc.Visit // visit, bound once
	result valueSpan
	other  bool      // the message has error or method: not a result
	list   candidate // in result
	scope  candidate // result's cacheScope
	// pendingList and pendingScope are what the members at depth 2 seen
	// since the last member at depth 1 named; they become list and scope
	// when that member is result.
	pendingList, pendingScope candidate
	// entries are the elements (depth 3) of the arrays at depth 2 named
	// like the list, in document order. mark is how many of them belong
	// to such arrays already visited; the elements after it belong to an
	// array not yet visited, and are dropped when it is named otherwise.
	entries []entry
	mark    int
	// pending is the entry being read: its members (depth 4) come before
	// it is visited (depth 3).
	pending entry
	names   []byte   // decodeNames's buffer
	pieces  [][]byte // rebuild's
	err     error
}

// Pooled walks above these sizes are left to the collector.
const (
	maxPooledEntries = 1 << 12
	maxPooledNames   = 64 << 10
)

var walks = sync.Pool{New: func() any {
	w := &walk{}
	w.fn = w.visit
	return w
}}

func (w *walk) reset(shape listShape) {
	w.shape = shape
	w.result = absent
	w.other = false
	w.list = candidate{span: absent}
	w.pendingList = candidate{span: absent}
	w.scope = candidate{span: absent}
	w.pendingScope = candidate{span: absent}
	w.entries = w.entries[:0]
	w.mark = 0
	w.pending = entry{name: absent, annotations: absent}
	w.names = w.names[:0]
	w.err = nil
}

func (w *walk) release() {
	if cap(w.entries) > maxPooledEntries || cap(w.pieces) > 2*maxPooledEntries || cap(w.names) > maxPooledNames {
		return
	}
	// Keep nothing of the document.
	clear(w.entries)
	clear(w.pieces)
	w.pieces = w.pieces[:0]
	w.err = nil
	walks.Put(w)
}

func (w *walk) visit(depth int, key []byte, start, end int) {
	span := valueSpan{start, end}
	switch depth {
	case 1:
		switch is, err := resultKey(key); {
		case err != nil:
			w.err = err
		case is:
			w.result = span
			w.list = w.pendingList
			w.scope = w.pendingScope
		case string(key) == "error" || string(key) == "method":
			w.other = true
		}
		w.pendingList = candidate{span: absent}
		w.pendingScope = candidate{span: absent}
	case 2:
		switch is, ambiguous := keyIs(key, "cacheScope"); {
		case is:
			w.pendingScope.span = span
		case ambiguous:
			w.pendingScope.ambiguous = true
		}
		is, ambiguous := keyIs(key, w.shape.array)
		switch {
		case is:
			w.pendingList.span = span
			w.mark = len(w.entries)
		case ambiguous:
			w.pendingList.ambiguous = true
			fallthrough
		default:
			w.entries = w.entries[:w.mark]
		}
	case 3:
		if key == nil {
			w.pending.span = span
			w.entries = append(w.entries, w.pending)
		}
		w.pending = entry{name: absent, annotations: absent}
	case 4:
		isName, ambiguousName := keyIs(key, w.shape.nameKey)
		isAnnotations, ambiguousAnnotations := keyIs(key, "annotations")
		switch {
		case isName:
			w.pending.name = span
		case isAnnotations:
			w.pending.annotations = span
		case ambiguousName || ambiguousAnnotations:
			w.pending.ambiguous = true
		}
	}
}

// entriesIn returns the entries list holds: a run of w.entries, which are
// in document order.
func (w *walk) entriesIn(list valueSpan) []entry {
	lo := 0
	for lo < len(w.entries) && !list.holds(w.entries[lo].span) {
		lo++
	}
	hi := lo
	for hi < len(w.entries) && list.holds(w.entries[hi].span) {
		hi++
	}
	return w.entries[lo:hi]
}

// decodeNames decodes the names of entries (each a string) into one
// string, one allocation for the whole list, and records where each lies
// in it.
func (w *walk) decodeNames(body []byte, entries []entry) (string, error) {
	for i := range entries {
		e := &entries[i]
		raw := body[e.name.start+1 : e.name.end-1]
		e.nameStart = len(w.names)
		if bytes.IndexByte(raw, '\\') < 0 {
			w.names = append(w.names, raw...)
		} else {
			var s string
			if err := json.Unmarshal(body[e.name.start:e.name.end], &s); err != nil {
				return "", fmt.Errorf("%w: an entry's %s is not a string", ErrUnexpectedShape, w.shape.nameKey)
			}
			w.names = append(w.names, s...)
		}
		e.nameEnd = len(w.names)
	}
	return string(w.names), nil
}

// rebuild writes body with the refused entries left out (when filtered):
// what lies between '[' and the first entry, the kept entries joined by
// the original first separator, and what lies between the last entry and
// ']'; and with the value at scope (when present) replaced by
// CacheScopePrivate. The scope is a sibling of the list, so it lies before
// the first entry or after the last. The pieces are joined by bytes.Join,
// which allocates the exact size once and does not zero it first.
func (w *walk) rebuild(body []byte, entries []entry, filtered bool, scope valueSpan) []byte {
	pieces := w.pieces[:0]
	pos := 0 // body[pos:] is not yet in pieces
	private := privateScope
	scopeFirst := scope.start >= 0 && (len(entries) == 0 || scope.start < entries[0].span.start)
	if scopeFirst {
		pieces = append(pieces, body[pos:scope.start], private)
		pos = scope.end
	}
	if filtered {
		sep := []byte(",")
		if len(entries) > 1 {
			sep = body[entries[0].span.end:entries[1].span.start]
		}
		pieces = append(pieces, body[pos:entries[0].span.start])
		first := true
		for _, e := range entries {
			if !e.keep {
				continue
			}
			if !first {
				pieces = append(pieces, sep)
			}
			pieces = append(pieces, body[e.span.start:e.span.end])
			first = false
		}
		pos = entries[len(entries)-1].span.end
	}
	if scope.start >= 0 && !scopeFirst {
		pieces = append(pieces, body[pos:scope.start], private)
		pos = scope.end
	}
	pieces = append(pieces, body[pos:])
	w.pieces = pieces
	return bytes.Join(pieces, nil)
}

// walkObject reads msg in one strict pass (jsonrpc.WalkStrict to depth,
// visiting fn) and refuses a message that is not a JSON object: the
// reading FilterList and ListMethodOf share.
func walkObject(msg []byte, depth int, fn jsonrpc.Visit) error {
	if err := jsonrpc.WalkStrict(msg, depth, fn); err != nil {
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if msg[jsonrpc.SkipSpace(msg, 0)] != '{' {
		return fmt.Errorf("%w: not an object", ErrUnexpectedShape)
	}
	return nil
}

// resultKey reports whether a member of the message (depth 1) is its
// result; a key equal to "result" only under case folding is an error.
func resultKey(key []byte) (bool, error) {
	is, ambiguous := keyIs(key, "result")
	if ambiguous {
		return false, fmt.Errorf("%w: key %q is ambiguous with \"result\"", ErrUnexpectedShape, key)
	}
	return is, nil
}

// keyIs is jsonrpc.KeyIs: a key equal to one the filter reads only under
// case folding is refused.
func keyIs(key []byte, want string) (is, ambiguous bool) { return jsonrpc.KeyIs(key, want) }
