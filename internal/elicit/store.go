// Package elicit asks an MCP or A2A client to send its user to authorize a
// third party, then retry: the in-session re-authorization of MCP's
// URL-mode elicitation (2025-11-25), with fallbacks for clients without it.
//
// A Store remembers pending elicitations, bounded and expiring, each bound
// to the user from the token (and to the MCP session, for clean-up), so a
// completion can be matched to that user later. Begin gives each one an
// unguessable id and the authorization URL with state=<id> added, which the
// third party's callback hands back.
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
	DefaultSize = 10_000
	DefaultTTL  = 10 * time.Minute
)

// Errors from Begin.
var (
	ErrNoSubject    = errors.New("elicit: an elicitation needs the user it is for")
	ErrAuthorizeURL = errors.New("elicit: the authorization URL must be an absolute http(s) URL")
)

// Pending is an elicitation waiting for the user.
type Pending struct {
	// ID is the elicitationId: random, unguessable, 26 characters.
	ID string
	// URL is the authorization URL with state=ID.
	URL string
	// Subject is the user the elicitation is for; Session the MCP session
	// it was begun in ("" without one); Key what it is for (see Begin).
	Subject, Session, Key string
	Expires               time.Time
}

// Store holds pending elicitations. It is safe for concurrent use.
type Store struct {
	size int
	ttl  time.Duration
	now  func() time.Time

	mu sync.Mutex
	// order lists entries oldest first; with one TTL for all, that is also
	// soonest to expire first.
	order   *list.List // of *Pending
	byID    map[string]*list.Element
	byOwner map[owner]*list.Element
}

type owner struct{ subject, session, key string }

// New returns a Store of at most size pending elicitations, each kept for
// ttl. Non-positive values get DefaultSize and DefaultTTL; now is the clock
// (time.Now when nil).
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
		size:    size,
		ttl:     ttl,
		now:     now,
		order:   list.New(),
		byID:    make(map[string]*list.Element),
		byOwner: make(map[owner]*list.Element),
	}
}

// Begin returns the pending elicitation of subject in session for key,
// creating it if there is none. key names what is to be authorized (a
// route, an audience); the caller picks it so that repeated denials of the
// same request reuse one elicitation instead of piling up new ones. A
// pending one with less than half its time left is replaced, so the user
// is never sent to a URL about to stop working. authorizeURL is the third
// party's authorization URL; its query is kept, and any state parameter in
// it replaced.
func (s *Store) Begin(subject, session, key, authorizeURL string) (Pending, error) {
	if subject == "" {
		return Pending{}, ErrNoSubject
	}
	now := s.now()
	o := owner{subject, session, key}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if el, ok := s.byOwner[o]; ok {
		p := el.Value.(*Pending)
		if p.Expires.Sub(now) >= s.ttl/2 {
			return *p, nil
		}
		s.remove(el)
	}
	id := rand.Text()
	u, err := WithState(authorizeURL, id)
	if err != nil {
		return Pending{}, err
	}
	for s.order.Len() >= s.size {
		s.remove(s.order.Front())
	}
	p := &Pending{ID: id, URL: u, Subject: subject, Session: session, Key: key, Expires: now.Add(s.ttl)}
	el := s.order.PushBack(p)
	s.byID[id] = el
	s.byOwner[o] = el
	return *p, nil
}

// Complete ends the pending elicitation id if it belongs to subject, and
// returns it. Another user's id does not match and stays pending.
func (s *Store) Complete(id, subject string) (Pending, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.now())
	el, ok := s.byID[id]
	if !ok {
		return Pending{}, false
	}
	p := el.Value.(*Pending)
	if subject == "" || p.Subject != subject {
		return Pending{}, false
	}
	s.remove(el)
	return *p, true
}

// Get returns the pending elicitation id, whoever it is for: callers
// matching a third party's callback by state check Subject themselves.
func (s *Store) Get(id string) (Pending, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(s.now())
	el, ok := s.byID[id]
	if !ok {
		return Pending{}, false
	}
	return *el.Value.(*Pending), true
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
		if match(el.Value.(*Pending)) {
			s.remove(el)
			n++
		}
		el = next
	}
	return n
}

// expire drops entries past their deadline, from the oldest.
func (s *Store) expire(now time.Time) {
	for el := s.order.Front(); el != nil && !now.Before(el.Value.(*Pending).Expires); el = s.order.Front() {
		s.remove(el)
	}
}

func (s *Store) remove(el *list.Element) {
	p := s.order.Remove(el).(*Pending)
	delete(s.byID, p.ID)
	delete(s.byOwner, owner{p.Subject, p.Session, p.Key})
}

// WithState returns authorizeURL with its state parameters replaced by
// state=id. The rest of the query is kept as written, and so is the
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
