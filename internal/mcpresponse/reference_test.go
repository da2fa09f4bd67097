package mcpresponse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// referenceFilterList is FilterList as first written (collect every
// visited member, then sort them out by position): simple, slow, and the
// reference the faster FilterList is checked against (FuzzFilterListReference).
func referenceFilterList(method string, body []byte, keep Predicate) ([]byte, int, error) {
	shape, ok := listShapes[method]
	if !ok {
		return nil, 0, fmt.Errorf("%w: %q", ErrNotList, method)
	}
	// One strict pass records the members of the response (depth 1), of
	// its result (2), the entries (3) and their members (4); the visits
	// come after their values (inner first), so they are sorted out by
	// position afterwards.
	w := refWalk{shape: shape, result: refSpan{-1, -1}}
	if err := jsonrpc.WalkStrict(body, 4, w.visit); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if body[refSkipWS(body, 0)] != '{' {
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
	list := refSpan{-1, -1}
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
	// The cache scope, a member of result: made private unless it is.
	scope := refSpan{-1, -1}
	for _, m := range w.scopes {
		if !result.holds(m.span) {
			continue
		}
		if m.ambiguous {
			return nil, 0, fmt.Errorf("%w: a key of result is ambiguous with \"cacheScope\"", ErrUnexpectedShape)
		}
		if string(body[m.span.start:m.span.end]) != `"private"` {
			scope = m.span
		}
	}

	// Entries of the list, in order, and their name and annotations:
	// members come in document order, so one merge pass pairs them.
	var entries []refSpan
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
		name, annotations := refSpan{-1, -1}, refSpan{-1, -1}
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
		nameValue, ok := refStringValue(body, name)
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
	if removed == 0 && scope.start < 0 {
		return body, 0, nil
	}
	// Two edits of body, the later one first so that the earlier keeps
	// its place: the entries replaced by the kept ones, the scope's value
	// by "private".
	type edit struct {
		at   refSpan
		with []byte
	}
	var edits []edit
	if removed > 0 {
		edits = append(edits, edit{refSpan{entries[0].start, entries[len(entries)-1].end}, refKept(body, entries, keepAt)})
	}
	if scope.start >= 0 {
		edits = append(edits, edit{scope, []byte(`"private"`)})
	}
	slices.SortFunc(edits, func(a, b edit) int { return b.at.start - a.at.start })
	out := slices.Clone(body)
	for _, e := range edits {
		out = slices.Replace(out, e.at.start, e.at.end, e.with...)
	}
	return out, removed, nil
}

// refSpan is where a value sits in a document: [start, end); start < 0
// when absent.
type refSpan struct{ start, end int }

func (v refSpan) holds(inner refSpan) bool {
	return v.start >= 0 && v.start < inner.start && inner.end < v.end
}

// member is a visited member the filter may need.
type refMember struct {
	span      refSpan
	isName    bool // the entry's name key (else annotations)
	ambiguous bool // the key equals one of ours only under case folding
}

// walk collects, during jsonrpc.WalkStrict, the values FilterList needs.
type refWalk struct {
	shape    listShape
	result   refSpan
	other    bool        // the message has error or method: not a result
	inner    []refMember // depth 2 members named like the list array
	scopes   []refMember // depth 2 members named like cacheScope
	elements []refSpan   // depth 3 array elements
	members  []refMember // depth 4 members named like name or annotations
	err      error
}

func (w *refWalk) visit(depth int, key []byte, start, end int) {
	span := refSpan{start, end}
	switch depth {
	case 1:
		switch is, ambiguous := refKeyIs(key, "result"); {
		case ambiguous:
			w.err = fmt.Errorf("%w: key %q is ambiguous with \"result\"", ErrUnexpectedShape, key)
		case is:
			w.result = span
		case string(key) == "error" || string(key) == "method":
			w.other = true
		}
	case 2:
		if is, ambiguous := refKeyIs(key, w.shape.array); is || ambiguous {
			w.inner = append(w.inner, refMember{span: span, ambiguous: ambiguous})
		}
		if is, ambiguous := refKeyIs(key, "cacheScope"); is || ambiguous {
			w.scopes = append(w.scopes, refMember{span: span, ambiguous: ambiguous})
		}
	case 3:
		if key == nil {
			w.elements = append(w.elements, span)
		}
	case 4:
		isName, ambiguousName := refKeyIs(key, w.shape.nameKey)
		isAnnotations, ambiguousAnnotations := refKeyIs(key, "annotations")
		if isName || isAnnotations || ambiguousName || ambiguousAnnotations {
			w.members = append(w.members, refMember{span: span, isName: isName, ambiguous: ambiguousName || ambiguousAnnotations})
		}
	}
}

// refKept is the kept entries joined by the original first separator.
func refKept(body []byte, entries []refSpan, keepAt []bool) []byte {
	sep := []byte(",")
	if len(entries) > 1 {
		sep = body[entries[0].end:entries[1].start]
	}
	var out []byte
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
	return out
}

// keyIs reports whether key is want, and whether it equals want only
// under case folding: some client decoders (Go's encoding/json) would read
// such a key as that member, others would not, so it is refused.
func refKeyIs(key []byte, want string) (is, ambiguous bool) {
	if string(key) == want {
		return true, false
	}
	// Folding maps at most one byte to three (K, U+212A, is k), never
	// fewer: only keys of these lengths can fold onto want.
	return false, len(key) >= len(want) && len(key) <= 3*len(want) && bytes.EqualFold(key, []byte(want))
}

// stringValue decodes the JSON string at v; false when absent or not a
// string.
func refStringValue(d []byte, v refSpan) (string, bool) {
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

func refSkipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// FuzzFilterListReference: FilterList agrees with referenceFilterList on
// every input: the same error class, the same output bytes and count, the
// same predicate calls on success.
func FuzzFilterListReference(f *testing.F) {
	in, err := os.ReadFile(filepath.Join("testdata", "tools_list.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(in, uint8(0b010), uint8(0))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`), uint8(1), uint8(0))
	f.Add([]byte(`{"id":1,"result":{"tools":[ {"name":"\u00e9"} , {"name":"x","annotations":null} ]}}`), uint8(2), uint8(0))
	f.Add([]byte(`{"id":1,"error":{"tools":[{"name":"a"}]},"result":{"x":[{"name":1}],"tools":[{"name":"a\/b","y":[{"NAME":2}]}]}}`), uint8(1), uint8(0))
	f.Add([]byte(`{"id":1,"result":{"resources":[{"uri":"a","annotations":{}},{"URI":"b","uri":"c"}]}}`), uint8(3), uint8(2))
	f.Add([]byte(`{"id":1,"result":{"resourceTemplates":[{"uriTemplate":"x{y}"}],"nextCursor":"c","_meta":{"k":[1]}}}`), uint8(1), uint8(3))
	f.Add([]byte(`{"id":1,"result":{"cacheScope":"public","tools":[{"name":"a"},{"name":"b"}],"ttlMs":0}}`), uint8(1), uint8(0))
	f.Add([]byte(`{"id":1,"result":{"tools":[{"name":"a"}] ,"cacheScope":"public"}}`), uint8(0), uint8(0))
	f.Add([]byte(`{"id":1,"result":{"prompts":[],"cacheScope":"private","_meta":{"cacheScope":"public"}}}`), uint8(0), uint8(1))
	f.Add([]byte(`{"id":1,"result":{"tools":[{"name":"a"}],"CACHESCOPE":"public"}}`), uint8(0), uint8(0))
	f.Add([]byte(`{"id":1,"result":{"skills":[{"uri":"skill://a/SKILL.md","resources":"dynamic"},{"uri":"skill://b/SKILL.md"}]}}`), uint8(1), uint8(4))
	methods := []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list", "skills/list"}
	f.Fuzz(func(t *testing.T, body []byte, mask, method uint8) {
		m := methods[int(method)%len(methods)]
		var gotCalls, wantCalls []string
		pred := func(calls *[]string) Predicate {
			return func(kind, name string, annotations json.RawMessage) bool {
				*calls = append(*calls, kind+"\x00"+name+"\x00"+string(annotations))
				return mask&(1<<((len(*calls)-1)%8)) == 0
			}
		}
		got, gotRemoved, gotErr := FilterList(m, body, pred(&gotCalls))
		want, wantRemoved, wantErr := referenceFilterList(m, body, pred(&wantCalls))
		for _, class := range []error{ErrNotList, ErrUnreadable, ErrUnexpectedShape} {
			if errors.Is(gotErr, class) != errors.Is(wantErr, class) {
				t.Fatalf("%s %q: err %v, reference %v", m, body, gotErr, wantErr)
			}
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%s %q: err %v, reference %v", m, body, gotErr, wantErr)
		}
		if gotErr != nil {
			return
		}
		if !bytes.Equal(got, want) || gotRemoved != wantRemoved {
			t.Fatalf("%s %q: got %q (%d), reference %q (%d)", m, body, got, gotRemoved, want, wantRemoved)
		}
		if !slices.Equal(gotCalls, wantCalls) {
			t.Fatalf("%s %q: calls %q, reference %q", m, body, gotCalls, wantCalls)
		}
	})
}

// referenceFilterEvent is FilterEvent as first written, with
// referenceFilterList.
func referenceFilterEvent(method string, event []byte, keep Predicate) ([]byte, int, error) {
	// Framing clients read differently (checkFraming), written plainly: a
	// byte order mark first, or a CR left once every CRLF is removed.
	if bytes.HasPrefix(event, []byte("\xEF\xBB\xBF")) || bytes.Contains(bytes.ReplaceAll(event, []byte("\r\n"), nil), []byte("\r")) {
		return nil, 0, ErrAmbiguousEvent
	}
	var data []byte
	hasData := false // a second data line adds "\n" even after an empty first
	eol := []byte("\n")
	first := true
	for line, rest := nextLine(event); line != nil; line, rest = nextLine(rest) {
		content, end := splitEOL(line)
		if first && len(end) > 0 {
			eol = end
			first = false
		}
		if value, ok := dataValue(content); ok {
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		}
	}
	if len(data) == 0 {
		// No data, or empty data (a priming event): the SSE spec does not
		// dispatch it, so no client reads a message from it.
		return event, 0, nil
	}
	filtered, removed, err := referenceFilterList(method, data, keep)
	if err != nil || bytes.Equal(filtered, data) {
		return event, 0, err
	}
	out := make([]byte, 0, len(event))
	written := false
	for line, rest := nextLine(event); line != nil; line, rest = nextLine(rest) {
		content, _ := splitEOL(line)
		if _, ok := dataValue(content); !ok {
			out = append(out, line...)
			continue
		}
		if written {
			continue
		}
		for _, l := range bytes.Split(filtered, []byte("\n")) {
			out = append(out, "data: "...)
			out = append(out, l...)
			out = append(out, eol...)
		}
		written = true
	}
	return out, removed, nil
}

// FuzzFilterEventReference: FilterEvent agrees with referenceFilterEvent.
func FuzzFilterEventReference(f *testing.F) {
	f.Add([]byte("event: message\r\ndata: {\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"},\r\ndata: {\"name\":\"x\"}]}}\r\nid: 3\r\n\r\n"))
	f.Add([]byte("data\ndata: {\"id\":1,\"result\":{\"tools\":[{\"name\":\"x\"}]}}\n\n"))
	f.Add([]byte(": c\rdata:{\"id\":1,\"result\":{\"tools\":[{\"name\":\"x\"},{\"name\":\"y\"}]}}\r\r"))
	f.Add([]byte("data: {\"id\":1,\"result\":{\"tools\":[{\"name\":\"y\"}],\"cacheScope\":\"public\"}}\n\n"))
	f.Fuzz(func(t *testing.T, event []byte) {
		keep := func(_, name string, _ json.RawMessage) bool { return name != "x" }
		got, gotRemoved, gotErr := FilterEvent("tools/list", event, keep)
		want, wantRemoved, wantErr := referenceFilterEvent("tools/list", event, keep)
		if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got, want) || gotRemoved != wantRemoved {
			t.Fatalf("%q: got %q %d %v, reference %q %d %v", event, got, gotRemoved, gotErr, want, wantRemoved, wantErr)
		}
	})
}
