package loadtest

import "sync/atomic"

// TokenSource hands out the Authorization header value ("Bearer <token>")
// for each request. Next is called concurrently by every caller and must be
// cheap: all tokens are signed before the clock starts, so signing cost never
// lands in a measurement. ok is false once the source is used up, which ends
// the measurement early.
type TokenSource interface {
	Next() (authorization string, ok bool)
}

// bearer builds the header value once, outside the measurement.
func bearer(token string) string { return "Bearer " + token }

// Fixed is a TokenSource that always hands out the same token.
type Fixed struct{ authorization string }

var _ TokenSource = (*Fixed)(nil)

// NewFixed returns a source that always hands out token.
func NewFixed(token string) *Fixed { return &Fixed{authorization: bearer(token)} }

// Next returns the token.
func (f *Fixed) Next() (string, bool) { return f.authorization, true }

// Pool is a TokenSource that cycles through its tokens round-robin, forever.
type Pool struct {
	authorizations []string
	next           atomic.Uint64
}

var _ TokenSource = (*Pool)(nil)

// NewPool returns a source cycling through tokens; it panics when tokens is
// empty, which is a programming error.
func NewPool(tokens []string) *Pool {
	if len(tokens) == 0 {
		panic("loadtest: NewPool needs at least one token")
	}
	p := &Pool{authorizations: make([]string, len(tokens))}
	for i, t := range tokens {
		p.authorizations[i] = bearer(t)
	}
	return p
}

// Next returns the token after the last one handed out.
func (p *Pool) Next() (string, bool) {
	i := p.next.Add(1) - 1
	return p.authorizations[i%uint64(len(p.authorizations))], true
}

// Len is the number of distinct tokens.
func (p *Pool) Len() int { return len(p.authorizations) }

// Sequence is a TokenSource that hands out each of its tokens once, in order,
// and then reports that it is used up.
type Sequence struct {
	authorizations []string
	next           atomic.Uint64
}

var _ TokenSource = (*Sequence)(nil)

// NewSequence returns a source handing out each of tokens once.
func NewSequence(tokens []string) *Sequence {
	s := &Sequence{authorizations: make([]string, len(tokens))}
	for i, t := range tokens {
		s.authorizations[i] = bearer(t)
	}
	return s
}

// Next returns the next unused token, or false when none is left.
func (s *Sequence) Next() (string, bool) {
	i := s.next.Add(1) - 1
	if i >= uint64(len(s.authorizations)) {
		return "", false
	}
	return s.authorizations[i], true
}

// Len is the number of tokens in the sequence.
func (s *Sequence) Len() int { return len(s.authorizations) }
