package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// JSON-RPC error codes: the JSON-RPC 2.0 ones and those MCP defines.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	// CodeHeaderMismatch (MCP 2026-07-28): a required header (Mcp-Method,
	// Mcp-Name, MCP-Protocol-Version) is missing, malformed, or does not
	// match the body. Sent with HTTP 400.
	CodeHeaderMismatch = -32020
	// CodeURLElicitationRequired (MCP 2025-11-25 only): the user must visit
	// a URL (third-party authorization) before the request can succeed.
	CodeURLElicitationRequired = -32042
)

// CodeFor maps an error from Parse to the JSON-RPC error code and message to
// answer it with. Any other error is an internal error.
func CodeFor(err error) (code int, message string) {
	var reason invalid
	switch {
	case errors.As(err, &reason):
		return CodeInvalidRequest, "Invalid Request: " + string(reason)
	case errors.Is(err, ErrParse):
		return CodeParseError, "Parse error"
	case errors.Is(err, ErrBatch):
		return CodeInvalidRequest, "Invalid Request: batch requests are not supported"
	case errors.Is(err, ErrTooLarge):
		return CodeInvalidRequest, "Invalid Request: body too large"
	case errors.Is(err, ErrTooDeep):
		return CodeInvalidRequest, "Invalid Request: body nested too deeply"
	case errors.Is(err, ErrInvalidRequest):
		return CodeInvalidRequest, "Invalid Request"
	}
	return CodeInternal, "Internal error"
}

// ErrorBody returns a JSON-RPC 2.0 error response, compact:
//
//	{"jsonrpc":"2.0","id":<id>,"error":{"code":<code>,"message":<message>,"data":<data>}}
//
// id is echoed verbatim when it is a JSON string or number (as Parse returns
// it), else null. data is omitted when nil; it is marshalled with
// encoding/json and omitted, too, if that fails (a caller's bug: data is
// always built by this service).
func ErrorBody(id []byte, code int, message string, data any) []byte {
	var encodedData []byte
	if data != nil {
		encodedData = marshal(data)
	}
	b := make([]byte, 0, 64+len(id)+len(message)+len(encodedData))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	if validID(id) {
		b = append(b, id...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, message)
	if encodedData != nil {
		b = append(b, `,"data":`...)
		b = append(b, encodedData...)
	}
	return append(b, "}}"...)
}

// marshal encodes v as compact JSON without HTML escaping; nil on failure.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// URLElicitation is one URL-mode elicitation (MCP 2025-11-25): a page the
// user must visit, e.g. to authorize this service with a third party.
type URLElicitation struct {
	ID      string // elicitationId, echoed by notifications/elicitation/complete
	URL     string
	Message string // why the user should go there
}

// URLElicitationRequiredBody returns the -32042 error body that asks an MCP
// client declaring URL elicitation (Request.ElicitationURL) to send the
// user to each URL and then retry.
func URLElicitationRequiredBody(id []byte, message string, elicitations ...URLElicitation) []byte {
	type wire struct {
		Mode          string `json:"mode"`
		ElicitationID string `json:"elicitationId"`
		URL           string `json:"url"`
		Message       string `json:"message"`
	}
	data := struct {
		Elicitations []wire `json:"elicitations"`
	}{Elicitations: make([]wire, 0, len(elicitations))}
	for _, e := range elicitations {
		data.Elicitations = append(data.Elicitations, wire{Mode: "url", ElicitationID: e.ID, URL: e.URL, Message: e.Message})
	}
	return ErrorBody(id, CodeURLElicitationRequired, message, data)
}

// validID reports whether id is one JSON string or number, nothing around.
func validID(id []byte) bool {
	if len(id) == 0 {
		return false
	}
	s := scanner{data: id}
	k, err := s.value(0)
	return err == nil && s.pos == len(id) && (k == str || k == num)
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD;
// U+2028 and U+2029 are escaped, as encoding/json does, for JavaScript.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
