package mcpresponse

import (
	"fmt"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Lists recognised by their shape, for messages whose request is not
// known: a response replayed on a resumed event stream (GET with
// Last-Event-ID), or sent on a session's standalone stream, answers a
// request the stream's own request does not name.

// shapeMethods are the list methods, bit i of a shapeWalk's sets standing
// for shapeMethods[i]; shapeArrays are the members of result holding
// their entries, as listShapes says.
var (
	shapeMethods = [...]string{"tools/list", "prompts/list", "resources/list", "resources/templates/list", "skills/list"}
	shapeArrays  = func() (a [len(shapeMethods)]string) {
		for i, m := range shapeMethods {
			a[i] = listShapes[m].array
		}
		return a
	}()
)

// shapeWalk reads, in one strict pass, which list members a message's
// result holds. One serves one stream (SSEListFilter); its visit function
// is bound once, so a message is read without an allocation.
type shapeWalk struct {
	fn jsonrpc.Visit
	// pending are the list members (bit i: shapeMethods[i]) of the
	// object at depth 2 last visited, and pendingAmbiguous the members
	// equal to one only under case folding; found and ambiguous are
	// pending's once the member holding them turned out to be result.
	pending, pendingAmbiguous, found, ambiguous uint8
	result                                      bool
	err                                         error
}

func newShapeWalk() *shapeWalk {
	w := &shapeWalk{}
	w.fn = w.visit
	return w
}

func (w *shapeWalk) visit(depth int, key []byte, _, _ int) {
	switch depth {
	case 1:
		switch is, err := resultKey(key); {
		case err != nil:
			w.err = err
		case is:
			w.result = true
			w.found, w.ambiguous = w.pending, w.pendingAmbiguous
		}
		w.pending, w.pendingAmbiguous = 0, 0
	case 2:
		if key == nil {
			return // an element of an array
		}
		for i, array := range shapeArrays {
			switch is, ambiguous := keyIs(key, array); {
			case is:
				w.pending |= 1 << i
			case ambiguous:
				w.pendingAmbiguous |= 1 << i
			}
		}
	}
}

// listMethod returns the list method whose result msg is by its shape: a
// JSON object whose result member has a tools, prompts, resources,
// resourceTemplates or skills member ("" when it has none: another
// response, an error, a request, a notification). msg must be strict JSON
// and an object (a batch is not read); a result with two of these members,
// or a key equal to one of them (or to result) only under case folding, is
// ErrUnexpectedShape: clients could read it as a list the filter did not.
func (w *shapeWalk) listMethod(msg []byte) (string, error) {
	*w = shapeWalk{fn: w.fn}
	if err := walkObject(msg, 2, w.fn); err != nil {
		return "", err
	}
	switch {
	case w.err != nil:
		return "", w.err
	case w.ambiguous != 0:
		return "", fmt.Errorf("%w: a key of result is ambiguous with a list", ErrUnexpectedShape)
	case w.found == 0:
		return "", nil
	case w.found&(w.found-1) != 0:
		return "", fmt.Errorf("%w: result holds more than one list", ErrUnexpectedShape)
	}
	for i, method := range shapeMethods {
		if w.found == 1<<i {
			return method, nil
		}
	}
	return "", nil // unreachable: found has one bit of shapeMethods
}

// ListMethodOf returns the list method whose result the JSON-RPC message
// msg is by its shape: its result has a tools, prompts, resources,
// resourceTemplates or skills member; "" when it is no list result. An
// error means msg cannot be read exactly (not strict JSON, not an object,
// more than one list, a key ambiguous under case folding): the caller
// fails closed.
func ListMethodOf(msg []byte) (string, error) {
	return newShapeWalk().listMethod(msg)
}

// FilterByShape is Filter for a message whose request is not known: the
// list it is by its shape (ListMethodOf) is filtered; any other message
// comes back unchanged.
func FilterByShape(body []byte, keep Predicate) (out []byte, removed int, changed bool, err error) {
	method, err := ListMethodOf(body)
	switch {
	case err != nil:
		return nil, 0, false, err
	case method == "":
		return body, 0, false, nil
	}
	return Filter(method, body, keep)
}

// FilterAnswerByShape is FilterByShape for a JSON answer to a POST whose
// call is no list, on a route that filters lists. A client matches the
// responses it reads by id across the session, whatever answer carries
// them, so a server holding back a tools/list POST could answer the
// caller's tools/call with the list response, unfiltered, and the client's
// pending list would take it. One message is filtered as the list it is by
// its shape; a batch is read element by element, and one that holds a
// list, or an element that cannot be read exactly, is ErrUnexpectedShape
// (no batch is rebuilt; MCP answers no POST with one since 2025-06-18).
func FilterAnswerByShape(body []byte, keep Predicate) (out []byte, removed int, changed bool, err error) {
	i := jsonrpc.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '[' {
		return FilterByShape(body, keep)
	}
	// The batch's elements, read strictly as RefusedRequestIn reads them.
	elements, err := newRequestReader(0).valuesOf(body)
	if err != nil {
		return nil, 0, false, err
	}
	w := newShapeWalk()
	for _, e := range elements {
		switch method, err := w.listMethod(e); {
		case err != nil:
			return nil, 0, false, err
		case method != "":
			return nil, 0, false, fmt.Errorf("%w: a batch holds a %s result", ErrUnexpectedShape, method)
		}
	}
	return body, 0, false, nil
}
