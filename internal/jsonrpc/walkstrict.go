package jsonrpc

import "errors"

// ErrDuplicateKey: an object holds the same key twice (after unescaping).
// Parsers disagree on which value wins, so such a document is refused.
var ErrDuplicateKey = errors.New("jsonrpc: duplicate key in an object")

// Visit is called by WalkStrict for each object member and array element
// held by a container at most maxDepth deep, once its value has been
// scanned: depth is the container's nesting (1 for the members of a
// top-level object), key the member's key unescaped (nil for an array
// element), data[start:end] the value's raw JSON. key may alias data and
// must not be kept.
type Visit func(depth int, key []byte, start, end int)

// WalkStrict checks that data is exactly one JSON value that every
// mainstream parser reads the same way: RFC 8259 syntax as encoding/json
// accepts it, valid UTF-8 in every string, no object with a repeated key
// (ErrDuplicateKey), nesting at most MaxDepth, nothing but whitespace
// around it, at most MaxBodySize bytes. It is the scanner Parse uses, and
// in the same pass it calls visit for the values of the outer maxDepth
// containers, so that a caller that needs their positions (the response
// filter) reads the document once. Values visited before an error are not
// to be trusted: the document is refused.
func WalkStrict(data []byte, maxDepth int, visit Visit) error {
	if len(data) > MaxBodySize {
		return ErrTooLarge
	}
	// Set field by field: a composite literal of this large a struct is
	// built in a temporary and copied.
	var s scanner
	s.data, s.visit, s.visitDepth = data, visit, maxDepth
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
