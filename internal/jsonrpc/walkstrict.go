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
	w := walker{s: scanner{data: data}, max: maxDepth, visit: visit}
	w.s.ws()
	if err := w.value(0); err != nil {
		return err
	}
	w.s.ws()
	if w.s.pos != len(data) {
		return ErrParse
	}
	if w.s.ambiguous {
		return ErrDuplicateKey
	}
	return nil
}

// walker drives the scanner through the visited containers; deeper values
// are left to the scanner's own value, which visits nothing.
type walker struct {
	s     scanner
	max   int
	visit Visit
}

// value scans the value at s.pos held by a container at depth.
func (w *walker) value(depth int) error {
	switch c := w.s.peek(); {
	case c == '{' && depth < w.max:
		return w.object(depth + 1)
	case c == '[' && depth < w.max:
		return w.array(depth + 1)
	}
	_, err := w.s.value(depth)
	return err
}

// object is scanner.object (without recording) plus the visits.
func (w *walker) object(depth int) error {
	s := &w.s
	if depth > MaxDepth {
		return ErrTooDeep
	}
	s.pos++ // '{'
	s.ws()
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	var seen keySet
	for {
		if s.peek() != '"' {
			return ErrParse
		}
		keyStart := s.pos + 1
		if err := s.str(); err != nil {
			return err
		}
		key := s.data[keyStart : s.pos-1]
		if s.escaped {
			key = unescapeKey(key)
		}
		if !seen.add(key) {
			s.ambiguous = true
		}
		s.ws()
		if s.peek() != ':' {
			return ErrParse
		}
		s.pos++
		s.ws()
		start := s.pos
		if err := w.value(depth); err != nil {
			return err
		}
		w.visit(depth, key, start, s.pos)
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
			s.ws()
		case '}':
			s.pos++
			return nil
		default:
			return ErrParse
		}
	}
}

// array is scanner.array plus the visits.
func (w *walker) array(depth int) error {
	s := &w.s
	if depth > MaxDepth {
		return ErrTooDeep
	}
	s.pos++ // '['
	s.ws()
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		start := s.pos
		if err := w.value(depth); err != nil {
			return err
		}
		w.visit(depth, nil, start, s.pos)
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
			s.ws()
		case ']':
			s.pos++
			return nil
		default:
			return ErrParse
		}
	}
}
