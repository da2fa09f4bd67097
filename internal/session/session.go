// Package session binds MCP sessions to the user who first used them, so a
// session id alone never lets anyone act as someone else (the MCP security
// guidance's "<user>:<session>" binding). Bindings expire after an idle time
// and are bounded in number. A session id never authenticates anybody: the
// store is consulted only after the caller's token was verified.
package session

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Binding is the owner of one session.
type Binding struct {
	Subject string
	// ElicitationURL records that the client declared URL-mode elicitation
	// when it initialized the session (MCP 2025-11-25).
	ElicitationURL bool
	// Confirmed is when a shared tier last confirmed the binding (zero
	// without one).
	Confirmed time.Time
	idleUntil time.Time
}

// Store holds bindings in memory. It is safe for concurrent use.
type Store struct {
	mu   sync.Mutex
	lru  *simplelru.LRU[string, *Binding]
	idle time.Duration
	now  func() time.Time
}

// New returns a store of at most size bindings that each expire after idle
// without use.
func New(size int, idle time.Duration, now func() time.Time) (*Store, error) {
	if now == nil {
		now = time.Now
	}
	l, err := simplelru.NewLRU[string, *Binding](size, nil)
	if err != nil {
		return nil, err
	}
	return &Store{lru: l, idle: idle, now: now}, nil
}

// Key scopes a session id to the route (server) that issued it.
func Key(route, session string) string { return route + "\x00" + session }

// Bind binds key to subject if it is unbound (or its binding expired) and
// reports the owner. owned is true when subject owns the session; its idle
// deadline is then extended. init, when not nil, fills in a new binding.
func (s *Store) Bind(key, subject string, init func(*Binding)) (owner string, owned bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lru.Get(key)
	if ok && now.Before(b.idleUntil) {
		if b.Subject != subject {
			return b.Subject, false
		}
		b.idleUntil = now.Add(s.idle)
		return subject, true
	}
	nb := &Binding{Subject: subject, idleUntil: now.Add(s.idle)}
	if init != nil {
		init(nb)
	}
	s.lru.Add(key, nb)
	return subject, true
}

// Put records a binding a shared tier decided, replacing the local one.
func (s *Store) Put(key string, b Binding) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.lru.Peek(key); ok && old.Subject == b.Subject && !b.ElicitationURL {
		b.ElicitationURL = old.ElicitationURL
	}
	b.idleUntil = now.Add(s.idle)
	s.lru.Add(key, &b)
}

// Lookup returns the live binding of key.
func (s *Store) Lookup(key string) (Binding, bool) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lru.Peek(key)
	if !ok || !now.Before(b.idleUntil) {
		return Binding{}, false
	}
	return *b, true
}

// SetElicitationURL records the session's URL-elicitation capability.
func (s *Store) SetElicitationURL(key string, v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.lru.Peek(key); ok {
		b.ElicitationURL = v
	}
}

// End removes the binding of key if subject owns it (or nobody does) and
// reports whether subject may end it.
func (s *Store) End(key, subject string) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.lru.Peek(key)
	if ok && now.Before(b.idleUntil) && b.Subject != subject {
		return false
	}
	s.lru.Remove(key)
	return true
}

// RemoveSubject drops every binding of subject (revocation) and returns how
// many it dropped.
func (s *Store) RemoveSubject(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.lru.Keys() {
		if b, ok := s.lru.Peek(k); ok && b.Subject == subject {
			s.lru.Remove(k)
			n++
		}
	}
	return n
}

// RemoveSession drops the binding of a session id on every route.
func (s *Store) RemoveSession(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, k := range s.lru.Keys() {
		if len(k) > len(session) && k[len(k)-len(session)-1] == 0 && k[len(k)-len(session):] == session {
			s.lru.Remove(k)
			n++
		}
	}
	return n
}

// Len is the number of bindings, expired ones included until touched.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}
