package jsonrpc

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// The Mcp-Name header (MCP 2026-07-28) mirrors params.name or params.uri. A
// value that is not plain printable ASCII, or has leading or trailing
// whitespace, or itself looks like the sentinel, travels as
// "=?base64?<standard Base64 of the UTF-8>?=". The markers are
// case-sensitive.
const (
	sentinelPrefix = "=?base64?"
	sentinelSuffix = "?="
)

// ErrMcpName: an Mcp-Name value that is neither plain printable ASCII nor a
// valid Base64 sentinel. Answer it with CodeHeaderMismatch.
var ErrMcpName = errors.New("jsonrpc: malformed Mcp-Name header value")

// DecodeMcpName returns the name an Mcp-Name header value carries. A plain
// value must be printable ASCII (0x20-0x7E) without surrounding spaces and
// is returned as is. A sentinel value must hold padded standard Base64 of
// valid UTF-8; the decoded name may hold any character (that is why it was
// encoded) and is meant to be compared with the body's.
func DecodeMcpName(v string) (string, error) {
	if isSentinel(v) {
		payload := v[len(sentinelPrefix) : len(v)-len(sentinelSuffix)]
		if strings.ContainsAny(payload, "\r\n") { // which the decoder would skip
			return "", ErrMcpName
		}
		b, err := base64.StdEncoding.Strict().DecodeString(payload)
		if err != nil || !utf8.Valid(b) {
			return "", ErrMcpName
		}
		return string(b), nil
	}
	if !isPlain(v) {
		return "", ErrMcpName
	}
	return v, nil
}

func isSentinel(v string) bool {
	return len(v) >= len(sentinelPrefix)+len(sentinelSuffix) &&
		strings.HasPrefix(v, sentinelPrefix) && strings.HasSuffix(v, sentinelSuffix)
}

// isPlain reports whether v can travel as a header value unencoded.
func isPlain(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return v == "" || v[0] != ' ' && v[len(v)-1] != ' '
}
