package mcpresponse

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// FilterEvent applies FilterList to the JSON-RPC message one server-sent
// event carries (its data lines joined by "\n", as a client reads them) and
// returns the event with its data lines replaced when the message
// changed (entries removed, or the cache scope made private). An event with no or empty data (a priming event, a comment)
// comes back unchanged: clients do not dispatch it. The other fields (event, id, retry, comments) and the line
// ends are kept; the new data is written where the first data line was,
// one data line per line of the message.
func FilterEvent(method string, event []byte, keep Predicate) ([]byte, int, error) {
	out, removed, _, err := filterEvent(method, event, keep)
	return out, removed, err
}

// filterEvent is FilterEvent, also reporting whether the event changed
// (when it did not, out is event).
func filterEvent(method string, event []byte, keep Predicate) (out []byte, removed int, changed bool, err error) {
	if err := checkFraming(event); err != nil {
		return nil, 0, false, err
	}
	data, eol := eventData(event)
	if len(data) == 0 {
		// No data, or empty data (a priming event): the SSE spec does not
		// dispatch it, so no client reads a message from it.
		return event, 0, false, nil
	}
	return filterEventData(method, event, data, eol, keep)
}

// bom is the UTF-8 byte order mark.
var bom = []byte("\xEF\xBB\xBF")

// checkFraming refuses an event whose lines clients find in different
// places (ErrAmbiguousEvent), since the filter reads only the data lines
// it finds: one that starts with a byte order mark (at the start of a
// stream the WHATWG parser, and the TypeScript SDK's TextDecoderStream,
// drop it and read the line after it, where a reader of bytes sees an
// unknown field), and one holding a CR not followed by LF (a line end for
// the WHATWG parser, but not for a line scanner such as the Go SDK's
// bufio.Scanner, which reads "data:\r{...}" as the message the filter saw
// as empty data and an unknown field). No MCP server frames events so.
func checkFraming(event []byte) error {
	if bytes.HasPrefix(event, bom) {
		return fmt.Errorf("%w: it starts with a byte order mark", ErrAmbiguousEvent)
	}
	for rest := event; ; {
		i := bytes.IndexByte(rest, '\r')
		if i < 0 {
			return nil
		}
		if i+1 == len(rest) || rest[i+1] != '\n' {
			return fmt.Errorf("%w: a CR ends a line without LF", ErrAmbiguousEvent)
		}
		rest = rest[i+2:]
	}
}

// filterEventData is filterEvent for an event whose data and first line
// end were already read (eventData), and whose data is not empty.
func filterEventData(method string, event, data, eol []byte, keep Predicate) (out []byte, removed int, changed bool, err error) {
	filtered, removed, changed, err := Filter(method, data, keep)
	if err != nil || !changed {
		return event, 0, false, err
	}
	return withData(event, filtered, eol), removed, true, nil
}

// withData is event with msg as its message: the event's other lines stay,
// the message takes the place of the first data line, one data line per
// line of it, each ended by eol.
func withData(event, msg, eol []byte) []byte {
	size := 0
	for line, rest := nextLine(event); line != nil; line, rest = nextLine(rest) {
		if content, _ := splitEOL(line); !isData(content) {
			size += len(line)
		}
	}
	size += len(msg) + (bytes.Count(msg, []byte("\n"))+1)*(len("data: ")+len(eol)-1) + 1
	out := make([]byte, 0, size)
	written := false
	for line, rest := nextLine(event); line != nil; line, rest = nextLine(rest) {
		content, _ := splitEOL(line)
		if !isData(content) {
			out = append(out, line...)
			continue
		}
		if written {
			continue
		}
		for l, more := msg, true; more; {
			var piece []byte
			piece, l, more = bytes.Cut(l, []byte("\n"))
			out = append(out, "data: "...)
			out = append(out, piece...)
			out = append(out, eol...)
		}
		written = true
	}
	return out
}

// EventData is the message an event carries, as a client dispatches it:
// its data lines' values joined by "\n" (nil when it has none). It is read
// in place when the event has one data line.
func EventData(event []byte) []byte {
	data, _ := eventData(event)
	return data
}

// eventData is EventData, with the event's first line end (how its lines
// end).
func eventData(event []byte) (data, eol []byte) {
	// The message is the one data line's value, read in place, or the
	// data lines joined (copied) when there are more.
	lines := 0 // a second data line adds "\n" even after an empty first
	eol = []byte("\n")
	first := true
	for line, rest := nextLine(event); line != nil; line, rest = nextLine(rest) {
		content, end := splitEOL(line)
		if first && len(end) > 0 {
			eol = end
			first = false
		}
		if value, ok := dataValue(content); ok {
			switch lines {
			case 0:
				data = value
			case 1:
				joined := make([]byte, 0, len(event))
				data = append(append(append(joined, data...), '\n'), value...)
			default:
				data = append(append(data, '\n'), value...)
			}
			lines++
		}
	}
	return data, eol
}

func isData(content []byte) bool {
	_, ok := dataValue(content)
	return ok
}

// nextLine returns the first line of b with its line end (CRLF, LF or CR),
// and the rest; nil when b is empty.
func nextLine(b []byte) (line, rest []byte) {
	if len(b) == 0 {
		return nil, nil
	}
	i := indexEOL(b)
	if i < 0 {
		return b, nil
	}
	end := i + 1
	if b[i] == '\r' && end < len(b) && b[end] == '\n' {
		end++
	}
	return b[:end], b[end:]
}

// indexEOL returns the index of the first CR or LF in b, -1 when none:
// two byte searches (vectorized) rather than one test per byte.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	before := b
	if i >= 0 {
		before = b[:i]
	}
	if j := bytes.IndexByte(before, '\r'); j >= 0 {
		return j
	}
	return i
}

func splitEOL(line []byte) (content, eol []byte) {
	n := len(line)
	for n > 0 && (line[n-1] == '\n' || line[n-1] == '\r') {
		n--
	}
	return line[:n], line[n:]
}

// dataValue returns the value of a "data" field line: after "data:" one
// leading space is dropped (a line "data" alone has an empty value).
func dataValue(content []byte) ([]byte, bool) {
	if bytes.Equal(content, []byte("data")) {
		return []byte{}, true
	}
	v, ok := bytes.CutPrefix(content, []byte("data:"))
	if !ok {
		return nil, false
	}
	v, _ = bytes.CutPrefix(v, []byte(" "))
	return v, true
}

// Event wraps one JSON-RPC message as a server-sent event of type
// "message", as MCP servers send them on a streamable HTTP stream. message
// must hold no line ends (every body this package builds is compact).
func Event(message []byte) []byte {
	b := make([]byte, 0, len(message)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, message...)
	return append(b, "\n\n"...)
}

// ElicitationComplete returns the notifications/elicitation/complete
// notification (MCP 2025-11-25) for elicitationID, compact JSON:
//
//	{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"<id>"}}
func ElicitationComplete(elicitationID string) []byte {
	type params struct {
		ElicitationID string `json:"elicitationId"`
	}
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":`)
	p, _ := json.Marshal(params{ElicitationID: elicitationID}) // one string: cannot fail
	b = append(b, p...)
	return append(b, '}')
}

// ElicitationCompleteEvent is ElicitationComplete as a server-sent event,
// ready to be injected at an event boundary of a client's open stream.
func ElicitationCompleteEvent(elicitationID string) []byte {
	return Event(ElicitationComplete(elicitationID))
}

// Reauthorization returns the body that replaces an upstream 401/403 answer
// to the JSON-RPC request id: the -32042 URL elicitation error when the
// client declared URL elicitation, else the isError tool result with the
// URL in its text and _meta (the same bodies the exchange re-authorization
// of the check pipeline answers with). Both go with HTTP 200.
func Reauthorization(id []byte, urlElicitation bool, p elicit.Pending, message string) []byte {
	if urlElicitation {
		return elicit.URLElicitationError(id, p, message)
	}
	return elicit.ToolResultAuthRequired(id, p, message)
}

// FilterFailure returns the JSON-RPC error that replaces a list response
// FilterList could not read (fail closed): -32603 Internal error for id.
func FilterFailure(id []byte) []byte {
	return jsonrpc.ErrorBody(id, jsonrpc.CodeInternal, "Internal error", map[string]string{"reason": "the list response could not be filtered"})
}

// EventFailure returns the JSON-RPC error that ends an event stream read
// for the server's requests alone (NewSSEEventFilter) at an event it could not
// read (fail closed): -32603 Internal error for id.
func EventFailure(id []byte) []byte {
	return jsonrpc.ErrorBody(id, jsonrpc.CodeInternal, "Internal error", map[string]string{"reason": "an event of the response could not be read"})
}

// RefusedRequestFailure returns the JSON-RPC error that replaces a JSON
// answer carrying one of the server's requests the caller's rules refuse
// (RefusedRequestIn): -32603 Internal error for id, naming the method.
func RefusedRequestFailure(id []byte, method string) []byte {
	return jsonrpc.ErrorBody(id, jsonrpc.CodeInternal, "Internal error", map[string]string{"reason": "the server asked the client for " + method + ", which the rules refuse"})
}
