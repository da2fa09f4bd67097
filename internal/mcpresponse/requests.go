package mcpresponse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// The server's requests (sampling/createMessage, elicitation/create,
// roots/list) reach the client on an event stream: the one answering a
// call, or the session's standalone stream. Where the caller's rules
// refuse one, the client's answer to it is refused on the way back (the
// check's authorizeAnswers); the request itself is dropped on the way
// out, so that the client's model does not write for nothing and the user
// is not asked a question, or sent to a URL, that the rules forbid.

// RequestRefused reports whether the caller's rules refuse the server's
// request method (one of jsonrpc.ServerRequests).
type RequestRefused func(method string) bool

// serverRequestOf returns the server's request (jsonrpc.ServerRequests)
// the JSON-RPC message msg is, by its method member: "" for any other
// message (a response, another request, a notification) and for a method
// that is no string (no client dispatches it). An error means msg cannot
// be read exactly: not strict JSON, not an object, or a key equal to
// "method" only under case folding, which a client decoding members
// case-insensitively (the Go SDK) reads as the method.
func serverRequestOf(msg []byte) (string, error) {
	var (
		value     []byte
		ambiguous []byte
	)
	err := walkObject(msg, 1, func(_ int, key []byte, start, end int) {
		switch is, fold := keyIs(key, "method"); {
		case is:
			value = msg[start:end]
		case fold:
			ambiguous = key
		}
	})
	switch {
	case err != nil:
		return "", err
	case ambiguous != nil:
		return "", fmt.Errorf("%w: key %q is ambiguous with \"method\"", ErrUnexpectedShape, ambiguous)
	case len(value) < 2 || value[0] != '"':
		return "", nil
	}
	method := string(value[1 : len(value)-1])
	if bytes.IndexByte(value, '\\') >= 0 {
		// An escape spells the same method for every client.
		if json.Unmarshal(value, &method) != nil {
			return "", fmt.Errorf("%w: its method cannot be read", ErrUnreadable)
		}
	}
	if !slices.Contains(jsonrpc.ServerRequests[:], method) {
		return "", nil
	}
	return method, nil
}

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

// dropRefusedRequest returns event without its message when the message
// is a server's request the caller's rules refuse (dropped true), else
// event itself. event's framing was checked and data is its message, not
// empty.
func dropRefusedRequest(event, data []byte, refused RequestRefused) (out []byte, dropped bool, err error) {
	method, err := serverRequestOf(data)
	if err != nil || method == "" || !refused(method) {
		return event, false, err
	}
	return withoutData(event), true, nil
}

// RefusedRequestIn returns the server's request refused names that a JSON
// answer to a POST carries, "" when it carries none. A client reads such
// an answer as one message or a batch of them and dispatches each
// whatever its kind, a request too (the TypeScript SDK's does), so every
// message of it is looked at. An error means body cannot be read exactly
// (not strict JSON, a batch element that is not an object, a key equal to
// "method" only under case folding): the caller fails closed.
func RefusedRequestIn(body []byte, refused RequestRefused) (string, error) {
	i := jsonrpc.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '[' {
		method, err := serverRequestOf(body)
		if err != nil || method == "" || !refused(method) {
			return "", err
		}
		return method, nil
	}
	var elements [][]byte
	if err := jsonrpc.WalkStrict(body, 1, func(_ int, _ []byte, start, end int) {
		elements = append(elements, body[start:end])
	}); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	for _, msg := range elements {
		method, err := serverRequestOf(msg)
		if err != nil {
			return "", err
		}
		if method != "" && refused(method) {
			return method, nil
		}
	}
	return "", nil
}
