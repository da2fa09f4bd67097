package jsonrpc

import "errors"

// ErrDuplicateKey: an object holds the same key twice (after unescaping).
// Parsers disagree on which value wins, so such a document is refused.
var ErrDuplicateKey = errors.New("jsonrpc: duplicate key in an object")

// ValidateStrict checks that data is exactly one JSON value that every
// mainstream parser reads the same way: RFC 8259 syntax as encoding/json
// accepts it, valid UTF-8 in every string, no object with a repeated key,
// nesting at most MaxDepth, nothing but whitespace around it. It is the
// scanner Parse uses, without the recording; callers that walk a document
// themselves (the response filter) validate it with this first.
func ValidateStrict(data []byte) error {
	if len(data) > MaxBodySize {
		return ErrTooLarge
	}
	s := scanner{data: data}
	s.ws()
	if _, err := s.value(0); err != nil {
		return err
	}
	s.ws()
	if s.pos != len(data) {
		return ErrParse
	}
	if s.ambiguous {
		return ErrDuplicateKey
	}
	return nil
}
