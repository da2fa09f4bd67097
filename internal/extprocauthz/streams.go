package extprocauthz

import (
	"encoding/json"
	"sync"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/shared"
)

// Injection of notifications/elicitation/complete (MCP 2025-11-25) into a
// client's open event stream: the standalone GET stream of an MCP session,
// which Envoy must send in FULL_DUPLEX_STREAMED (per route, Envoy 1.34+).
// Such a stream is registered under its session and user once the
// response headers are answered; the processor then re-emits the
// upstream's bytes as whole events only (so the client is always at an
// event boundary; on a route that filters lists, each filtered by its
// shape, since a resumed stream may replay a list) and may add events of its own at any time after the
// first upstream chunk (Envoy refuses them before) and before the end of
// the stream. A completion for the session's user is queued until then,
// dropped when the queue is full or the stream ended: the client then
// retries, as without a stream.

// maxQueued bounds the notifications waiting for a stream's first chunk.
const maxQueued = 8

// streamKey names the streams a completion goes to: the session and its
// user (a session id alone may exist on two routes for two users).
type streamKey struct{ session, subject string }

// registry holds the open injectable streams.
type registry struct {
	mu sync.Mutex
	m  map[streamKey]map[*exchange]struct{}
}

func (r *registry) add(k streamKey, st *exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[streamKey]map[*exchange]struct{})
	}
	if r.m[k] == nil {
		r.m[k] = make(map[*exchange]struct{})
	}
	r.m[k][st] = struct{}{}
}

func (r *registry) remove(k streamKey, st *exchange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m[k], st)
	if len(r.m[k]) == 0 {
		delete(r.m, k)
	}
}

// send offers event to every stream of k without waiting and reports how
// many took it.
func (r *registry) send(k streamKey, event []byte) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for st := range r.m[k] {
		select {
		case st.inject <- event:
			n++
		default: // its queue is full: that client retries
		}
	}
	return n
}

// ElicitationCompleted injects notifications/elicitation/complete for p
// into the open streams of p's session and user on this replica, and
// reports into how many.
func (s *Server) ElicitationCompleted(p elicit.Pending) int {
	if p.Session == "" || p.Subject == "" {
		return 0
	}
	return s.streams.send(streamKey{session: p.Session, subject: p.Subject}, mcpresponse.ElicitationCompleteEvent(p.ID))
}

// completion is an shared.EventElicitationComplete's ID.
type completion struct {
	ID      string `json:"id"`
	Subject string `json:"sub"`
	Session string `json:"sid"`
}

// CompletionEvent is the bus event announcing p's completion to the other
// replicas (shared.Store.Publish).
func CompletionEvent(p elicit.Pending) shared.Event {
	b, _ := json.Marshal(completion{ID: p.ID, Subject: p.Subject, Session: p.Session}) // strings only: cannot fail
	return shared.Event{Kind: shared.EventElicitationComplete, ID: string(b)}
}

// HandleEvent injects the completion another replica announced; other
// events are not the processor's.
func (s *Server) HandleEvent(ev shared.Event) int {
	if ev.Kind != shared.EventElicitationComplete {
		return 0
	}
	var c completion
	if json.Unmarshal([]byte(ev.ID), &c) != nil {
		return 0
	}
	return s.ElicitationCompleted(elicit.Pending{ID: c.ID, Subject: c.Subject, Session: c.Session})
}

// openStream registers the exchange's response as an injectable stream.
func (st *exchange) openStream(session string) {
	st.streamKey = streamKey{session: session, subject: st.x.Subject()}
	st.inject = make(chan []byte, maxQueued)
	st.reasm = mcpresponse.NewReassembler(st.s.maxEvent)
	st.s.streams.add(st.streamKey, st)
	st.s.count(st.x.Route(), ActionStreamOpened)
}

// closeStream unregisters it (the stream ended, or its body did).
func (st *exchange) closeStream() {
	if st.inject != nil && !st.closed {
		st.closed = true
		st.s.streams.remove(st.streamKey, st)
	}
}

// streamChunk re-emits an upstream chunk of an injectable stream as the
// whole events it completes, followed by the notifications queued before
// the first chunk. On a route that filters lists each event is filtered
// by its shape (filteredStreamChunk). Elsewhere an event over the size
// limit ends injection: what is held and everything after it pass as they
// come.
func (st *exchange) streamChunk(chunk []byte, eos bool) []byte {
	st.firstChunk = true
	if st.sse != nil {
		return st.filteredStreamChunk(chunk, eos)
	}
	if st.raw {
		return chunk
	}
	// unsent mirrors what the Reassembler holds, so that it can be passed
	// on as it is if the Reassembler gives up.
	st.unsent = append(st.unsent, chunk...)
	var out []byte
	emit := func(ev []byte) error {
		out = append(out, ev...)
		return nil
	}
	if err := st.reasm.Write(chunk, emit); err != nil {
		st.raw = true
		st.closeStream()
		out = append(out, st.unsent[len(out):]...)
		st.unsent = nil
		return out
	}
	st.unsent = append(st.unsent[:0], st.unsent[len(out):]...)
	// Whatever was queued goes out now, at the event boundary after the
	// whole events (even when this is the stream's last chunk).
	for len(st.queued) > 0 {
		out = append(out, st.queued[0]...)
		st.queued = st.queued[1:]
	}
	if eos {
		rest, _ := st.reasm.Flush(emit)
		out = append(out, rest...)
		st.unsent = nil
		st.closeStream()
	}
	return out
}

// injectNow answers an injection: a streamed_response with the event when
// Envoy takes one now, else queued until the first chunk (nil reply).
func (st *exchange) injectNow(event []byte) []byte {
	switch {
	case st.closed || st.raw:
		return nil
	case !st.firstChunk:
		if len(st.queued) < maxQueued {
			st.queued = append(st.queued, event)
		}
		return nil
	}
	return event
}

// filteredStreamChunk is streamChunk on a route that filters lists: the
// whole events the chunk completes are filtered by their shape
// (filterSSE), the queued notifications follow them. An event that cannot
// be filtered, one over the size limit included, ends the stream with the
// filter's error event: nothing of it leaves unexamined, and nothing more
// is injected.
func (st *exchange) filteredStreamChunk(chunk []byte, eos bool) []byte {
	out := st.filterSSE(chunk, eos)
	if st.failedSSE {
		st.queued = nil
		st.closeStream()
		return out
	}
	if len(st.queued) > 0 {
		// out may be a slice of chunk: append to a copy.
		out = out[:len(out):len(out)]
		for _, ev := range st.queued {
			out = append(out, ev...)
		}
		st.queued = nil
	}
	if eos {
		st.closeStream()
	}
	return out
}
