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

// RequestRefused reports whether the caller's rules refuse the server's
// request method (one of jsonrpc.ServerRequests).
type RequestRefused func(method string) bool

// refusedIn returns the first of the server's requests refused names that
// the JSON-RPC message msg asks the client for: the request msg is, by its
// method member, or one of those its result asks for (inResult;
// 2026-07-28's multi round-trip requests, result.inputRequests, a map of
// requests the client answers in its retry), with id the message's raw
// id. "" when it asks for none; a method that is no string names none (no
// client dispatches it). An error means msg cannot be read exactly: not
// strict JSON, not an object, or a key equal to method, result or
// inputRequests only under case folding, which a client decoding members
// case-insensitively (the Go SDK) reads as that member.
func refusedIn(msg []byte, refused RequestRefused) (method string, id []byte, inResult bool, err error) {
	top, err := members(msg, "method", "result", "id")
	if err != nil {
		return "", nil, false, err
	}
	if method, err = serverMethod(top[0]); err != nil || method != "" && refused(method) {
		return method, top[2], false, err
	}
	if !isObject(top[1]) {
		return "", nil, false, nil
	}
	result, err := members(top[1], "inputRequests")
	if err != nil || !isObject(result[0]) {
		return "", nil, false, err
	}
	var requests [][]byte
	if err := jsonrpc.WalkStrict(result[0], 1, func(_ int, _ []byte, start, end int) {
		requests = append(requests, result[0][start:end])
	}); err != nil {
		return "", nil, false, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	for _, req := range requests {
		if !isObject(req) {
			continue // no request a client could read
		}
		m, err := members(req, "method")
		if err != nil {
			return "", nil, false, err
		}
		if method, err = serverMethod(m[0]); err != nil || method != "" && refused(method) {
			return method, top[2], true, err
		}
	}
	return "", nil, false, nil
}

// members returns the raw values of the members of the JSON object doc
// named names, in their order (nil for one absent). A key equal to one of
// names only under case folding is an error, as is a doc that is not one
// strict JSON object.
func members(doc []byte, names ...string) ([][]byte, error) {
	values := make([][]byte, len(names))
	var ambiguous []byte
	err := walkObject(doc, 1, func(_ int, key []byte, start, end int) {
		for i, name := range names {
			switch is, fold := keyIs(key, name); {
			case is:
				values[i] = doc[start:end]
			case fold:
				ambiguous = key
			}
		}
	})
	switch {
	case err != nil:
		return nil, err
	case ambiguous != nil:
		return nil, fmt.Errorf("%w: key %q is ambiguous with one the filter reads", ErrUnexpectedShape, ambiguous)
	}
	return values, nil
}

// serverMethod is the server's request a method member's raw value names:
// "" when it is absent, no string, or names no server's request.
func serverMethod(value []byte) (string, error) {
	if len(value) < 2 || value[0] != '"' {
		return "", nil
	}
	method := string(value[1 : len(value)-1])
	if bytes.IndexByte(value, '\\') >= 0 {
		// An escape spells the same method for every client.
		if json.Unmarshal(value, &method) != nil {
			return "", fmt.Errorf("%w: a method cannot be read", ErrUnreadable)
		}
	}
	if !slices.Contains(jsonrpc.ServerRequests[:], method) {
		return "", nil
	}
	return method, nil
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
func dropRefusedRequest(event, data, eol []byte, refused RequestRefused) (out []byte, dropped bool, err error) {
	method, id, inResult, err := refusedIn(data, refused)
	switch {
	case err != nil || method == "":
		return event, false, err
	case inResult:
		return withData(event, RefusedRequestFailure(id, method), eol), true, nil
	}
	return withoutData(event), true, nil
}

// RefusedRequestIn returns the server's request refused names that a JSON
// answer to a POST asks the client for (refusedIn: a message that is one,
// or a result asking for one), "" when it asks for none. A client reads such
// an answer as one message or a batch of them and dispatches each
// whatever its kind, a request too (the TypeScript SDK's does), so every
// message of it is looked at. An error means body cannot be read exactly
// (not strict JSON, a batch element that is not an object, a key equal to
// "method" only under case folding): the caller fails closed.
func RefusedRequestIn(body []byte, refused RequestRefused) (string, error) {
	i := jsonrpc.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '[' {
		method, _, _, err := refusedIn(body, refused)
		return method, err
	}
	var elements [][]byte
	if err := jsonrpc.WalkStrict(body, 1, func(_ int, _ []byte, start, end int) {
		elements = append(elements, body[start:end])
	}); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	for _, msg := range elements {
		if method, _, _, err := refusedIn(msg, refused); err != nil || method != "" {
			return method, err
		}
	}
	return "", nil
}
