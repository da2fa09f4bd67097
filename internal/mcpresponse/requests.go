package mcpresponse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// The server's requests (sampling/createMessage, elicitation/create,
// roots/list) reach the client on an event stream (the one answering a
// call, or the session's standalone stream), in a JSON answer, which
// clients read as messages of any kind, or asked for in a result
// (2026-07-28's inputRequests). Where the caller's rules refuse one, the
// client's answer to it is refused on the way back (the check's
// authorizeAnswers); the request itself is kept from the client on the
// way out, so that the client's model does not write for nothing and the
// user is not asked a question, or sent to a URL, that the rules forbid.

// requestReader reads what messages ask the client for (refusedIn) of the
// server's requests refused names, bit i standing for
// jsonrpc.ServerRequests[i]. One serves one stream; its visit function is
// bound once, so that a message is read without an allocation.
type requestReader struct {
	refused uint8
	fn      jsonrpc.Visit
	// doc is the object being read, names the keys wanted of it (n of
	// them), values theirs and ambiguous a key equal to one only under
	// case folding; with each, the values of every member are collected
	// in elements instead.
	doc       []byte
	names     [3]string
	n         int
	values    [3][]byte
	ambiguous []byte
	each      bool
	elements  [][]byte
}

func newRequestReader(refused uint8) *requestReader {
	r := &requestReader{refused: refused}
	r.fn = r.visit
	return r
}

func (r *requestReader) visit(_ int, key []byte, start, end int) {
	if r.each {
		r.elements = append(r.elements, r.doc[start:end])
		return
	}
	for i, name := range r.names[:r.n] {
		switch is, fold := keyIs(key, name); {
		case is:
			r.values[i] = r.doc[start:end]
		case fold:
			r.ambiguous = key
		}
	}
}

// members returns the raw values of the members of the JSON object doc
// named names (at most three), in their order (nil for one absent). A key
// equal to one of names only under case folding is an error, as is a doc
// that is not one strict JSON object.
func (r *requestReader) members(doc []byte, names ...string) ([3][]byte, error) {
	r.doc, r.n, r.values, r.ambiguous, r.each = doc, copy(r.names[:], names), [3][]byte{}, nil, false
	err := walkObject(doc, 1, r.fn)
	switch {
	case err != nil:
		return [3][]byte{}, err
	case r.ambiguous != nil:
		return [3][]byte{}, fmt.Errorf("%w: key %q is ambiguous with one the filter reads", ErrUnexpectedShape, r.ambiguous)
	}
	return r.values, nil
}

// valuesOf returns the values held by the JSON object or array doc (its
// members' or elements'), in their order, valid until the next call. An
// error means doc is not strict JSON.
func (r *requestReader) valuesOf(doc []byte) ([][]byte, error) {
	r.doc, r.each, r.elements = doc, true, r.elements[:0]
	defer func() { r.each = false }()
	if err := jsonrpc.WalkStrict(doc, 1, r.fn); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return r.elements, nil
}

// refusedIn returns the first of the server's requests r refuses that the
// JSON-RPC message msg asks the client for: the request msg is, by its
// method member, or one of those its result asks for (inResult;
// 2026-07-28's multi round-trip requests, result.inputRequests, a map of
// requests the client answers in its retry), with id the message's raw
// id. "" when it asks for none; a method that is no string names none (no
// client dispatches it). An error means msg cannot be read exactly: not
// strict JSON, not an object, or a key equal to method, result or
// inputRequests only under case folding, which a client decoding members
// case-insensitively (the Go SDK) reads as that member.
func (r *requestReader) refusedIn(msg []byte) (method string, id []byte, inResult bool, err error) {
	top, err := r.members(msg, "method", "result", "id")
	if err != nil {
		return "", nil, false, err
	}
	if method, err = r.refusedMethod(top[0]); err != nil || method != "" {
		return method, top[2], false, err
	}
	if !isObject(top[1]) {
		return "", nil, false, nil
	}
	result, err := r.members(top[1], "inputRequests")
	if err != nil || !isObject(result[0]) {
		return "", nil, false, err
	}
	requests, err := r.valuesOf(result[0])
	if err != nil {
		return "", nil, false, err
	}
	for _, req := range requests {
		if !isObject(req) {
			continue // no request a client could read
		}
		m, err := r.members(req, "method")
		if err != nil {
			return "", nil, false, err
		}
		if method, err = r.refusedMethod(m[0]); err != nil || method != "" {
			return method, top[2], true, err
		}
	}
	return "", nil, false, nil
}

// refusedMethod is the server's request a method member's raw value names
// when r refuses it: "" when it is absent, no string, or names no request
// r refuses.
func (r *requestReader) refusedMethod(value []byte) (string, error) {
	if len(value) < 2 || value[0] != '"' {
		return "", nil
	}
	raw := value[1 : len(value)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		// An escape spells the same method for every client.
		var method string
		if json.Unmarshal(value, &method) != nil {
			return "", fmt.Errorf("%w: a method cannot be read", ErrUnreadable)
		}
		raw = []byte(method)
	}
	for i, method := range jsonrpc.ServerRequests {
		if string(raw) == method && r.refused&(1<<i) != 0 {
			return method, nil
		}
	}
	return "", nil
}

// isObject reports whether a raw JSON value (strict, no leading space) is
// an object.
func isObject(value []byte) bool { return len(value) > 0 && value[0] == '{' }

// withoutData is event with its data lines removed: the client dispatches
// nothing, and still takes its id (the last event id a resumption sends),
// event type and retry time, so that the stream reads on as it would have.
// An event of data alone leaves nothing, not even its blank line.
func withoutData(event []byte) []byte {
	out := make([]byte, 0, len(event))
	for line, rest := nextLine(event); line != nil; line, rest = nextLine(rest) {
		if content, _ := splitEOL(line); !isData(content) {
			out = append(out, line...)
		}
	}
	if len(bytes.Trim(out, "\r\n")) == 0 {
		return out[:0]
	}
	return out
}

// dropRefusedRequest returns what replaces event when its message asks
// the client for one of the server's requests the caller's rules refuse
// (dropped true): the event without its message when it is the request,
// the event with an error for the message's id in its place when its
// result asks for it (inputRequests), else event itself. event's framing
// was checked and data is its message, not empty; eol is its first line
// end.
func (r *requestReader) dropRefusedRequest(event, data, eol []byte) (out []byte, dropped bool, err error) {
	method, id, inResult, err := r.refusedIn(data)
	switch {
	case err != nil || method == "":
		return event, false, err
	case inResult:
		return withData(event, RefusedRequestFailure(id, method), eol), true, nil
	}
	return withoutData(event), true, nil
}

// RefusedRequestIn returns the server's request refused names (bit i:
// jsonrpc.ServerRequests[i]) that a JSON answer to a POST asks the client
// for (refusedIn: a message that is one,
// or a result asking for one), "" when it asks for none. A client reads such
// an answer as one message or a batch of them and dispatches each
// whatever its kind, a request too (the TypeScript SDK's does), so every
// message of it is looked at. An error means body cannot be read exactly
// (not strict JSON, a batch element that is not an object, a key equal to
// "method" only under case folding): the caller fails closed.
func RefusedRequestIn(body []byte, refused uint8) (string, error) {
	r := newRequestReader(refused)
	i := jsonrpc.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '[' {
		method, _, _, err := r.refusedIn(body)
		return method, err
	}
	elements, err := r.valuesOf(body)
	if err != nil {
		return "", err
	}
	// refusedIn reuses the reader's elements: each message is read from
	// a copy of the list.
	for _, msg := range slices.Clone(elements) {
		if method, _, _, err := r.refusedIn(msg); err != nil || method != "" {
			return method, err
		}
	}
	return "", nil
}
