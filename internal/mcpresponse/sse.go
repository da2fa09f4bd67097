// Package mcpresponse holds the response-path pieces of an MCP-aware
// external processor that do not depend on Envoy or on the check pipeline:
// reassembling server-sent events split across body chunks, filtering the
// entries of list results (tools/list, prompts/list, resources/list,
// resources/templates/list, the skills extension's skills/list) by a
// caller's predicate, and building the bodies that replace an upstream
// answer (re-authorization, elicitation completion).
//
// Everything here fails closed: input it cannot read exactly is an error,
// never passed through unexamined.
package mcpresponse

import "errors"

// DefaultMaxEvent bounds the bytes of one incomplete event a Reassembler
// holds when NewReassembler is given no limit.
const DefaultMaxEvent = 1 << 20

// ErrEventTooLarge: an event grew past the Reassembler's limit before it was
// terminated. The caller answers with an error instead of passing the
// stream on (fail closed).
var ErrEventTooLarge = errors.New("mcpresponse: server-sent event over the size limit")

// ErrAmbiguousEvent: an event that mainstream clients split into lines
// differently, so that one may read a message where the filter read none
// (or another). The caller fails closed, as for an unreadable list.
var ErrAmbiguousEvent = errors.New("mcpresponse: server-sent event clients read differently")

// Reassembler turns the chunks of a text/event-stream body, split at
// arbitrary byte boundaries, into whole events. An event is every byte up
// to and including the blank line that ends it; line ends are CRLF, LF or
// CR (WHATWG HTML, "Parsing an event stream"), so events end at "\n\n",
// "\r\n\r\n", "\r\r" or any mix. The events, followed by what Flush
// returns, are exactly the input bytes: nothing is dropped or rewritten.
//
// A Reassembler is not safe for concurrent use; one serves one stream.
type Reassembler struct {
	buf       []byte
	scan      int // where the next Write resumes looking for line ends
	lineStart int // start of the line being read
	max       int
}

// NewReassembler returns a Reassembler that refuses to hold an incomplete
// event of more than maxEvent bytes (DefaultMaxEvent when maxEvent <= 0).
func NewReassembler(maxEvent int) *Reassembler {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEvent
	}
	return &Reassembler{max: maxEvent}
}

// Write adds chunk to the stream and calls emit with every event it
// completes, in order. The event slice is valid only during the call. An
// error from emit stops Write and is returned; ErrEventTooLarge is
// returned when the incomplete tail exceeds the limit.
func (r *Reassembler) Write(chunk []byte, emit func(event []byte) error) error {
	data := chunk
	if len(r.buf) > 0 {
		r.buf = append(r.buf, chunk...)
		data = r.buf
	}
	start := 0 // start of the current event in data
	i := r.scan
	lineStart := r.lineStart
	for i < len(data) {
		eol := indexEOL(data[i:])
		if eol < 0 {
			i = len(data)
			break
		}
		i += eol
		c := data[i]
		end := i + 1
		if c == '\r' {
			if end == len(data) {
				break // a CR last: wait to see whether an LF follows
			}
			if data[end] == '\n' {
				end++
			}
		}
		if i == lineStart { // a blank line ends the event
			if err := emit(data[start:end]); err != nil {
				return err
			}
			start = end
		}
		lineStart = end
		i = end
	}
	// Keep the incomplete tail, relative to its own start.
	tail := data[start:]
	if len(tail) > r.max {
		return ErrEventTooLarge
	}
	r.buf = append(r.buf[:0], tail...) // copy (within buf, tail starts at or after buf[0])
	r.scan = i - start
	r.lineStart = lineStart - start
	return nil
}

// Flush ends the stream: it emits the last event when a lone CR ended it
// (which Write holds back in case an LF follows), then returns the bytes of
// an event the stream ended without terminating (nil when none) and resets
// the Reassembler. Pass what it returns on: the upstream's last bytes are
// kept even when they are not a whole event.
func (r *Reassembler) Flush(emit func(event []byte) error) ([]byte, error) {
	if n := len(r.buf); n > 0 && r.buf[n-1] == '\r' && r.lineStart == n-1 {
		err := emit(r.buf)
		r.buf = r.buf[:0]
		r.scan, r.lineStart = 0, 0
		return nil, err
	}
	var rest []byte
	if len(r.buf) > 0 {
		rest = append([]byte(nil), r.buf...)
	}
	r.buf = r.buf[:0]
	r.scan, r.lineStart = 0, 0
	return rest, nil
}

// Buffered reports how many bytes of an incomplete event are held.
func (r *Reassembler) Buffered() int { return len(r.buf) }
