// Package session binds MCP sessions to the user who first used them, so a
// session id alone never lets anyone act as someone else (the MCP security
// guidance's "<user>:<session>" binding). A session id never authenticates
// anybody: the store is consulted only after the caller's token was
// verified.
//
// The service binds a session on first sight (it never sees the initialize
// response that creates the id), so a binding that is lost is a session
// anyone can claim. The store therefore never loses a binding to somebody
// else's traffic:
//
//   - a binding lives at least the idle timeout after its last use, and
//     nothing but its own expiry, or its owner, ends it (an MCP DELETE does
//     not: the server may answer it 405 and keep the session);
//   - each user holds at most a bounded number of bindings; a user's new
//     session may push out only that user's own least recently used one;
//   - when the store as a whole is full of live bindings, a new session is
//     refused (Full) instead of making room at someone else's expense.
//
// Users are whatever string the caller passes as the subject: the check
// package passes the issuer-qualified user, never a bare sub claim.
package session

import (
	"cmp"
	"sync"
	"time"
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
	// Tool is, for a task, the tool it was created for when the creating
	// call was seen ("" when bound on first sight).
	Tool string
}

// Result is what Bind decided.
type Result uint8

const (
	// Owned: the subject owned the session already.
	Owned Result = iota
	// Conflict: another subject owns the session.
	Conflict
	// Full: the session is unbound and there is no room to bind it without
	// dropping another user's live binding; refuse the request.
	Full
	// Created: the session was unbound and now belongs to the subject.
	Created
)

func (r Result) String() string {
	switch r {
	case Owned:
		return "owned"
	case Conflict:
		return "conflict"
	case Full:
		return "full"
	case Created:
		return "created"
	}
	return "unknown"
}

// Accepted reports whether the subject may use the session.
func (r Result) Accepted() bool { return r == Owned || r == Created }

// entry is one binding, linked into the store's use order and into its
// owner's. Both lists run from the most to the least recently used, which
// with one idle timeout for all is also the order of expiry.
type entry struct {
	key       string
	b         Binding
	idleUntil int64 // unix nanoseconds
	user      *user
	prev      *entry // store-wide use order
	next      *entry
	uprev     *entry // the owner's use order
	unext     *entry
}

// user is one subject's bindings.
type user struct {
	head, tail *entry
	n          int
}

// Store holds bindings in memory. It is safe for concurrent use.
type Store struct {
	mu         sync.Mutex
	entries    map[string]*entry
	users      map[string]*user
	head, tail *entry
	max        int
	perSubject int
	idle       time.Duration
	now        func() time.Time
}

// New returns a store of at most size bindings, at most perSubject of them
// per subject, that each live idle after their last use. perSubject <= 0 or
// above size means size.
func New(size, perSubject int, idle time.Duration, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	size = max(size, 1)
	if perSubject <= 0 || perSubject > size {
		perSubject = size
	}
	return &Store{
		entries: make(map[string]*entry), users: make(map[string]*user),
		max: size, perSubject: perSubject, idle: idle, now: now,
	}
}

// Key scopes an id to a space: the kind of id it is (MCP sessions, tasks,
// A2A contexts), never the route, whose server knows the id on every route
// in front of it.
func Key(space, id string) string { return space + "\x00" + id }

// Bind binds key to subject if it is unbound (or its binding expired) and
// reports the owner. When subject owns the session its idle deadline is
// extended. init, when not nil, fills in a new binding.
func (s *Store) Bind(key, subject string, init func(*Binding)) (owner string, r Result) {
	now := s.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok {
		if now < e.idleUntil {
			if e.b.Subject != subject {
				return e.b.Subject, Conflict
			}
			s.touch(e, now)
			return subject, Owned
		}
		s.remove(e)
	}
	b := Binding{Subject: subject}
	if init != nil {
		init(&b)
	}
	if !s.add(key, b, now) {
		return "", Full
	}
	return subject, Created
}

// Put records a binding a shared tier decided, replacing the local one. It
// reports false when there is no room (the shared tier stays the truth).
func (s *Store) Put(key string, b Binding) bool {
	now := s.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok {
		if e.b.Subject == b.Subject && now < e.idleUntil {
			b.ElicitationURL = b.ElicitationURL || e.b.ElicitationURL
			b.Tool = cmp.Or(b.Tool, e.b.Tool)
			e.b = b
			s.touch(e, now)
			return true
		}
		s.remove(e)
	}
	return s.add(key, b, now)
}

// Lookup returns the live binding of key.
func (s *Store) Lookup(key string) (Binding, bool) {
	now := s.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok || now >= e.idleUntil {
		return Binding{}, false
	}
	return e.b, true
}

// RetryAfter is how long until the least recently used binding expires,
// and with it room for a new one (at least a second).
func (s *Store) RetryAfter() time.Duration {
	now := s.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tail == nil {
		return time.Second
	}
	return max(time.Duration(s.tail.idleUntil-now), time.Second)
}

// DropSubject forgets subject's bindings and returns how many.
func (s *Store) DropSubject(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[subject]
	if u == nil {
		return 0
	}
	n := u.n
	for u.head != nil {
		s.remove(u.head)
	}
	return n
}

// Len is the number of bindings, expired ones included until they are
// pushed out.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// add inserts a new binding, making room first: the subject's own least
// recently used binding when the subject is at its bound, then expired
// bindings. It never drops another subject's live binding. s.mu is held.
func (s *Store) add(key string, b Binding, now int64) bool {
	if u := s.users[b.Subject]; u != nil && u.n >= s.perSubject {
		s.remove(u.tail)
	}
	for len(s.entries) >= s.max && s.tail != nil && now >= s.tail.idleUntil {
		s.remove(s.tail)
	}
	if len(s.entries) >= s.max {
		return false
	}
	u := s.users[b.Subject]
	if u == nil {
		u = &user{}
		s.users[b.Subject] = u
	}
	e := &entry{key: key, b: b, idleUntil: now + int64(s.idle), user: u}
	s.entries[key] = e
	s.pushFront(e)
	u.n++
	return true
}

// touch extends e's life and moves it to the front of both orders.
func (s *Store) touch(e *entry, now int64) {
	e.idleUntil = now + int64(s.idle)
	s.unlink(e)
	s.pushFront(e)
}

func (s *Store) pushFront(e *entry) {
	e.prev, e.next = nil, s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
	u := e.user
	e.uprev, e.unext = nil, u.head
	if u.head != nil {
		u.head.uprev = e
	}
	u.head = e
	if u.tail == nil {
		u.tail = e
	}
}

func (s *Store) unlink(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	u := e.user
	if e.uprev != nil {
		e.uprev.unext = e.unext
	} else {
		u.head = e.unext
	}
	if e.unext != nil {
		e.unext.uprev = e.uprev
	} else {
		u.tail = e.uprev
	}
	e.prev, e.next, e.uprev, e.unext = nil, nil, nil, nil
}

// remove drops e. s.mu is held.
func (s *Store) remove(e *entry) {
	s.unlink(e)
	delete(s.entries, e.key)
	if e.user.n--; e.user.n == 0 {
		delete(s.users, e.b.Subject)
	}
}
