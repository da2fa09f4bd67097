package mcpresponse

import "fmt"

// SSEListFilter filters the list result carried by a text/event-stream
// response body that arrives in chunks (ext_proc STREAMED mode), and drops
// the server's requests the caller's rules refuse (DropRequests): each
// chunk is replaced by the whole events completed so far, filtered, and the
// end of the stream flushes the rest. Events are emitted whole, so a
// processor never sends half an event it might still have to change.
type SSEListFilter struct {
	method string
	keep   Predicate
	r      *Reassembler
	// shapes reads each event's list by its shape when method is ""
	// (NewSSEShapeFilter).
	shapes *shapeWalk
	// requests, when set, reads each event for the server's requests to
	// drop (DropRequests).
	requests *requestReader
	// Removed counts the entries removed so far, Dropped the server's
	// requests.
	Removed, Dropped int
}

// NewSSEListFilter returns a filter for the response to a request with
// method (IsListMethod), holding at most maxEvent bytes of an incomplete
// event (DefaultMaxEvent when maxEvent <= 0).
func NewSSEListFilter(method string, keep Predicate, maxEvent int) *SSEListFilter {
	return &SSEListFilter{method: method, keep: keep, r: NewReassembler(maxEvent)}
}

// NewSSEShapeFilter returns a filter for an event stream whose request
// names no list (a resumed stream, GET with Last-Event-ID, or a session's
// standalone stream): an event whose message is a list result by its
// shape (ListMethodOf) is filtered as that list, every other event passes
// byte for byte, and an event that cannot be read exactly is an error, as
// in NewSSEListFilter's streams. With a nil keep every list result is an
// error (ErrListRefused): the stream of a caller no list may reach.
func NewSSEShapeFilter(keep Predicate, maxEvent int) *SSEListFilter {
	return &SSEListFilter{keep: keep, r: NewReassembler(maxEvent), shapes: newShapeWalk()}
}

// NewSSEEventFilter returns a filter for an event stream that carries no
// list to filter (the answer to any other call): every event passes byte
// for byte but the server's requests it drops (DropRequests).
func NewSSEEventFilter(maxEvent int) *SSEListFilter {
	return &SSEListFilter{r: NewReassembler(maxEvent)}
}

// DropRequests makes the filter drop the server's requests refused names,
// bit i standing for jsonrpc.ServerRequests[i]
// (sampling/createMessage, elicitation/create, roots/list): such an
// event keeps its other fields (its id, which a resumption sends back)
// and loses its data, so that the client dispatches nothing. An event
// that cannot be read exactly (not strict JSON, not an object, a key equal
// to "method" only under case folding, over the size limit) is an error,
// as on a list's stream: it could be a request the client reads and the
// filter did not.
func (f *SSEListFilter) DropRequests(refused uint8) {
	f.requests = nil
	if refused != 0 {
		f.requests = newRequestReader(refused)
	}
}

// FiltersLists reports whether the filter filters lists (false for
// NewSSEEventFilter's, which only drops the server's requests).
func (f *SSEListFilter) FiltersLists() bool { return f.method != "" || f.shapes != nil }

// filterEvent is filterEvent for the filter's list: its method's, or the
// event's by its shape; a server's request it drops first.
func (f *SSEListFilter) filterEvent(event []byte) (out []byte, removed int, changed bool, err error) {
	if f.shapes == nil && f.requests == nil {
		return filterEvent(f.method, event, f.keep)
	}
	if err := checkFraming(event); err != nil {
		return nil, 0, false, err
	}
	data, eol := eventData(event)
	if len(data) == 0 {
		return event, 0, false, nil // not dispatched (filterEvent)
	}
	if f.requests != nil {
		out, dropped, err := f.requests.dropRefusedRequest(event, data, eol)
		switch {
		case err != nil:
			return nil, 0, false, err
		case dropped:
			f.Dropped++
			return out, 0, true, nil
		}
	}
	switch {
	case f.method != "":
		return filterEventData(f.method, event, data, eol, f.keep)
	case f.shapes == nil:
		return event, 0, false, nil // NewSSEEventFilter: no list here
	}
	method, err := f.shapes.listMethod(data)
	switch {
	case err != nil || method == "":
		return event, 0, false, err
	case f.keep == nil:
		return nil, 0, false, fmt.Errorf("%w: %s", ErrListRefused, method)
	}
	return filterEventData(method, event, data, eol, f.keep)
}

// Chunk takes the next chunk of the body and returns the bytes to send on
// in its place (possibly none). With eos it also flushes the end of the
// stream. An error (an event over the limit, a list result that cannot be
// read) means the stream must not be passed on: the caller fails closed.
// The bytes returned may be a slice of chunk (the events it completes,
// when none was changed and nothing was held from earlier chunks).
func (f *SSEListFilter) Chunk(chunk []byte, eos bool) ([]byte, error) {
	// With nothing held, Write reads chunk in place (and never writes to
	// it); otherwise it reads its own buffer, which it rewrites before
	// returning, so what it emits must be copied at once.
	fromChunk := f.r.Buffered() == 0
	var out []byte
	// run is the unchanged events of chunk not yet copied to out: the
	// events of one Write are adjacent slices of chunk, so a run grows
	// without a copy.
	var run []byte
	emit := func(event []byte) error {
		filtered, removed, changed, err := f.filterEvent(event)
		if err != nil {
			return err
		}
		f.Removed += removed
		if !fromChunk {
			out = append(out, filtered...)
			return nil
		}
		if !changed && len(run) > 0 && cap(run)-len(run) == cap(event) {
			run = run[:len(run)+len(event)] // event follows run
			return nil
		}
		out = append(out, run...)
		if !changed {
			run = event
			return nil
		}
		run = nil
		if out == nil {
			out = filtered // new bytes of FilterEvent's own: no copy
			return nil
		}
		out = append(out, filtered...)
		return nil
	}
	if err := f.r.Write(chunk, emit); err != nil {
		return nil, err
	}
	if out == nil && fromChunk && !eos {
		return run, nil // nothing changed: a slice of chunk
	}
	out = append(out, run...)
	if eos {
		add := func(event []byte) error {
			filtered, removed, _, err := f.filterEvent(event)
			if err != nil {
				return err
			}
			f.Removed += removed
			out = append(out, filtered...)
			return nil
		}
		rest, err := f.r.Flush(add)
		if err != nil {
			return nil, err
		}
		if len(rest) > 0 {
			// An unterminated last event: the client discards it (it is
			// never dispatched), but it is filtered like the others so that
			// nothing unexamined leaves.
			if err := add(rest); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
