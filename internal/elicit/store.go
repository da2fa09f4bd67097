// Package elicit asks an MCP or A2A client to send its user to authorize a
// third party, then retry: the in-session re-authorization of MCP's
// URL-mode elicitation (2025-11-25), with fallbacks for clients without it.
//
// A Store remembers pending elicitations, bounded and expiring, each bound
// to the user from the token (and to the MCP session, for clean-up), so a
// completion can be matched to that user later. Each user holds at most
// PerSubject of them, a new one beyond that replacing only the user's own
// oldest; a store full of other users' is never made room in by dropping
// theirs: Begin refuses (ErrFull) until some expire or complete. Begin gives each one an
// unguessable id and the authorization URL with a signed state added
// (state.go): the third party's callback hands it back, and a completion
// must present it (VerifyState), so knowing an id is not enough.
//
// The answer builders make the HTTP 200 bodies that deny a JSON-RPC request
// in a form each kind of client understands:
//   - URLElicitationError: MCP clients that declared
//     capabilities.elicitation.url get JSON-RPC error -32042 with one URL
//     elicitation;
//   - ToolResultAuthRequired: other MCP clients get, for tools/call, a tool
//     result with isError and _meta.auth_required, text the model can relay;
//   - A2AAuthRequired: A2A clients get JSON-RPC error
//     CodeA2AAuthorizationRequired carrying the URL.
package elicit

import (
	"container/list"
	"crypto/rand"
	"errors"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Defaults for New.
const (
	DefaultSize       = 10_000
	DefaultTTL        = 10 * time.Minute
	DefaultPerSubject = 100
)

// Errors from Begin.
var (
	ErrNoSubject    = errors.New("elicit: an elicitation needs the user it is for")
	ErrAuthorizeURL = errors.New("elicit: the authorization URL must be an absolute http(s) URL")
)

// ErrFull is returned by Begin when the store is full of other users'
// pending elicitations: none of them is dropped to make room. The error
// is a *FullError.
var ErrFull = errors.New("elicit: too many pending elicitations")

// FullError is Begin's ErrFull, with how long until the oldest pending
// elicitation expires.
type FullError struct{ RetryAfter time.Duration }

func (e *FullError) Error() string { return ErrFull.Error() }

// Is makes errors.Is(err, ErrFull) hold.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// ErrNotPending is returned by Complete for an id with no pending
// elicitation (never begun, completed, expired or dropped).
var ErrNotPending = errors.New("elicit: no such pending elicitation")

// Pending is an elicitation waiting for the user.
type Pending struct {
	// ID is the elicitationId: random, unguessable, 26 characters.
	ID string
	// URL is the authorization URL with state=State.
	URL string
	// State is the signed state the URL carries, bound to ID, Issuer,
	// Subject and Expires; a completion must present it.
	State string
	// Issuer and Subject are the user the elicitation is for; Session the
	// MCP session it was begun in ("" without one); Key what it is for (see
	// Begin).
	Issuer, Subject, Session, Key string
	Expires                       time.Time
}

// Store holds pending elicitations. It is safe for concurrent use.
type Store struct {
	size       int
	perSubject int
	ttl        time.Duration
	now        func() time.Time
	key        stateKey // read-only after SetStateKey

	mu sync.Mutex
	// order lists entries oldest first; with one TTL for all, that is also
	// soonest to expire first.
	order   *list.List // of *entry
	byID    map[string]*list.Element
	byOwner map[owner]*list.Element
	// bySubject lists each user's entries (their elements in order),
	// oldest first.
	bySubject map[user]*list.List
}

type owner struct{ issuer, subject, session, key string }

type user struct{ issuer, subject string }

// entry is one pending elicitation and its place in its user's list.
type entry struct {
	Pending
	mine *list.Element
}

// New returns a Store of at most size pending elicitations, each kept for
// ttl. Non-positive values get DefaultSize and DefaultTTL; now is the clock
// (time.Now when nil). Its states are signed with a random key until
// SetStateKey gives it one.
func New(size int, ttl time.Duration, now func() time.Time) *Store {
	if size <= 0 {
		size = DefaultSize
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Store{
		size:       size,
		perSubject: min(DefaultPerSubject, size),
		ttl:        ttl,
		now:        now,
		key:        randomStateKey(),
		order:      list.New(),
		byID:       make(map[string]*list.Element),
		byOwner:    make(map[owner]*list.Element),
		bySubject:  make(map[user]*list.List),
	}
}

// SetPerSubject bounds the pending elicitations of one user (issuer and
// subject) to n, at most the store's size; n <= 0 keeps the default
// (DefaultPerSubject, at most the size). Call it before the store is used.
func (s *Store) SetPerSubject(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perSubject = min(n, s.size)
}

// SetStateKey makes the store sign and verify states with key (at least
// MinStateKeyBytes): replicas that share pending elicitations must share it.
// Call it before the store is used.
func (s *Store) SetStateKey(key []byte) error {
	k, err := newStateKey(key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = k
	return nil
}

// VerifyState checks that state was issued for p (the same elicitation id,
// issuer and subject; see state.go) and has not expired. It returns
// ErrStateMissing, ErrStateInvalid or ErrStateExpired otherwise.
func (s *Store) VerifyState(p Pending, state string) error {
	s.mu.Lock()
	k := s.key
	s.mu.Unlock()
	return k.verify(p, state, s.now())
}

// Begin returns the pending elicitation of the user (issuer, subject) in
// session for key, creating it if there is none. key names what is to be
// authorized (a route, an audience); the caller picks it so that repeated
// denials of the same request reuse one elicitation instead of piling up
// new ones. A pending one with less than half its time left is replaced, so
// the user is never sent to a URL about to stop working. authorizeURL is
// the third party's authorization URL; its query is kept, and any state
// parameter in it replaced by the signed state.
//
// A user with PerSubject pending elicitations has the oldest of them
// replaced, as does a user with any when the store is full; a user with
// none in a store full of other users' gets a *FullError (ErrFull) and no
// elicitation.
func (s *Store) Begin(issuer, subject, session, key, authorizeURL string) (Pending, error) {
	p, _, err := s.BeginReplacing(issuer, subject, session, key, authorizeURL)
	return p, err
}

// BeginReplacing is Begin, also returning the ids of the user's own
// pending elicitations dropped to make room for the new one (the user's
// oldest beyond PerSubject or in a full store), for a shared tier holding
// copies of them to drop: without it, one user's flood of new ones would
// pile up there until they expire.
func (s *Store) BeginReplacing(issuer, subject, session, key, authorizeURL string) (p Pending, replaced []string, err error) {
	if subject == "" {
		return Pending{}, nil, ErrNoSubject
	}
	now := s.now()
	o := owner{issuer, subject, session, key}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if el, ok := s.byOwner[o]; ok {
		p := &el.Value.(*entry).Pending
		if p.Expires.Sub(now) >= s.ttl/2 {
			return *p, nil, nil
		}
		s.remove(el)
	}
	p = Pending{ID: rand.Text(), Issuer: issuer, Subject: subject, Session: session, Key: key, Expires: now.Add(s.ttl)}
	p.State = s.key.sign(p, p.Expires)
	u, err := WithState(authorizeURL, p.State)
	if err != nil {
		return Pending{}, replaced, err
	}
	p.URL = u
	who := user{issuer, subject}
	mine := s.bySubject[who]
	for mine != nil && mine.Len() > 0 && (mine.Len() >= s.perSubject || s.order.Len() >= s.size) {
		el := mine.Front().Value.(*list.Element)
		replaced = append(replaced, el.Value.(*entry).ID)
		s.remove(el)
		mine = s.bySubject[who]
	}
	if s.order.Len() >= s.size {
		return Pending{}, replaced, &FullError{RetryAfter: s.order.Front().Value.(*entry).Expires.Sub(now)}
	}
	if mine == nil {
		mine = list.New()
		s.bySubject[who] = mine
	}
	e := &entry{Pending: p}
	el := s.order.PushBack(e)
	e.mine = mine.PushBack(el)
	s.byID[p.ID] = el
	s.byOwner[o] = el
	return p, replaced, nil
}

// Complete ends the pending elicitation id when state is the one issued
// for it (VerifyState), and returns it. It returns ErrNotPending when there
// is no such elicitation here, and the state's error otherwise; a refused
// completion leaves the elicitation pending.
func (s *Store) Complete(id, state string) (Pending, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	el, ok := s.byID[id]
	if !ok {
		return Pending{}, ErrNotPending
	}
	p := &el.Value.(*entry).Pending
	if err := s.key.verify(*p, state, now); err != nil {
		return Pending{}, err
	}
	s.remove(el)
	return *p, nil
}

// Get returns the pending elicitation id, whoever it is for: callers
// completing it check the state with VerifyState.
func (s *Store) Get(id string) (Pending, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.now())
	el, ok := s.byID[id]
	if !ok {
		return Pending{}, false
	}
	return el.Value.(*entry).Pending, true
}

// DropSession forgets the elicitations begun in an MCP session (on its
// DELETE) and returns how many. An empty session matches nothing.
func (s *Store) DropSession(session string) int {
	if session == "" {
		return 0
	}
	return s.dropWhere(func(p *Pending) bool { return p.Session == session })
}

// DropOwnSession forgets the elicitations subject began in an MCP session
// (its owner's DELETE) and returns how many: nobody else's, even in a
// session of the same id on another route.
func (s *Store) DropOwnSession(subject, session string) int {
	if subject == "" || session == "" {
		return 0
	}
	return s.dropWhere(func(p *Pending) bool { return p.Subject == subject && p.Session == session })
}

// DropSubject forgets a user's elicitations and returns how many.
func (s *Store) DropSubject(subject string) int {
	if subject == "" {
		return 0
	}
	return s.dropWhere(func(p *Pending) bool { return p.Subject == subject })
}

// Len is the number of pending elicitations, expired ones included until
// the store is next used.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

func (s *Store) dropWhere(match func(*Pending) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for el := s.order.Front(); el != nil; {
		next := el.Next()
		if match(&el.Value.(*entry).Pending) {
			s.remove(el)
			n++
		}
		el = next
	}
	return n
}

// expire drops entries past their deadline, from the oldest.
func (s *Store) expire(now time.Time) {
	for el := s.order.Front(); el != nil && !now.Before(el.Value.(*entry).Expires); el = s.order.Front() {
		s.remove(el)
	}
}

func (s *Store) remove(el *list.Element) {
	e := s.order.Remove(el).(*entry)
	delete(s.byID, e.ID)
	delete(s.byOwner, owner{e.Issuer, e.Subject, e.Session, e.Key})
	who := user{e.Issuer, e.Subject}
	if mine := s.bySubject[who]; mine != nil {
		mine.Remove(e.mine)
		if mine.Len() == 0 {
			delete(s.bySubject, who)
		}
	}
}

// WithState returns authorizeURL with its state parameters replaced by
// state=id (the signed state, for Begin). The rest of the query is kept as written, and so is the
// fragment. The URL must be absolute http or https with a host.
func WithState(authorizeURL, id string) (string, error) {
	u, err := url.Parse(authorizeURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return "", ErrAuthorizeURL
	}
	var b strings.Builder
	b.Grow(len(u.RawQuery) + len("&state=") + len(id))
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		if part == "" {
			continue
		}
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && n == "state" {
			continue
		}
		b.WriteString(part)
		b.WriteByte('&')
	}
	b.WriteString("state=")
	b.WriteString(url.QueryEscape(id))
	u.RawQuery = b.String()
	u.ForceQuery = false
	return u.String(), nil
}
