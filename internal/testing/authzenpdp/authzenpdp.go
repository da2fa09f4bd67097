// Package authzenpdp is a tiny OpenID AuthZEN 1.0 policy decision point for
// tests: an httptest server answering POST /access/v1/evaluation as the
// specification's examples do, with a policy given as a Go function. It
// records what it was asked and can be made to fail.
package authzenpdp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"
)

// Path is the Access Evaluation endpoint's path (AuthZEN 1.0 section 6).
const Path = "/access/v1/evaluation"

// Entity is a subject, action or resource as the PDP reads it.
type Entity struct {
	Type       string         `json:"type,omitempty"`
	ID         string         `json:"id,omitempty"`
	Name       string         `json:"name,omitempty"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Request is an evaluation request as received.
type Request struct {
	Subject  Entity         `json:"subject"`
	Action   Entity         `json:"action"`
	Resource Entity         `json:"resource"`
	Context  map[string]any `json:"context,omitempty"`
	// Authorization is the header the request came with.
	Authorization string `json:"-"`
}

// Policy decides a request; the context map, if not nil, is returned as the
// response's context.
type Policy func(Request) (decision bool, context map[string]any)

// PDP is a running test PDP.
type PDP struct {
	*httptest.Server
	policy Policy

	mu       sync.Mutex
	requests []Request

	// Calls counts evaluation requests.
	Calls atomic.Int64
	// Status, if not 0 or 200, is answered instead of a decision.
	Status atomic.Int32
	// Answer, if set, may answer one request instead of the policy, as a
	// PDP rejecting what one user's request carried does, or answering it
	// late or unreadably: it reports whether it answered. Set it before
	// the first request.
	Answer func(Request, http.ResponseWriter) bool
	// Body, if set, is answered verbatim (with 200) instead of a decision.
	Body atomic.Pointer[string]
	// CacheControl, if set, is sent as the Cache-Control header.
	CacheControl atomic.Pointer[string]
	// Location, if set, is sent as the Location header (with Status, for
	// a redirect).
	Location atomic.Pointer[string]
	// Token, if set, is the bearer token or Basic credentials the PDP
	// requires: the whole Authorization header value.
	Token string
	// Hold, if set, blocks each request until it is closed.
	Hold chan struct{}
	// Delay is slept before answering.
	Delay time.Duration
}

// Start runs a PDP deciding with p on 127.0.0.1; Close it when done.
func Start(p Policy) *PDP {
	pdp := &PDP{policy: p}
	pdp.Server = httptest.NewServer(http.HandlerFunc(pdp.serve))
	return pdp
}

// Endpoint is the evaluation URL.
func (p *PDP) Endpoint() string { return p.URL + Path }

// Requests returns the requests received so far.
func (p *PDP) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

func (p *PDP) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	p.Calls.Add(1)
	if p.Hold != nil {
		<-p.Hold
	}
	if p.Delay > 0 {
		time.Sleep(p.Delay)
	}
	if p.Token != "" && r.Header.Get("Authorization") != p.Token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	var req Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	if err := dec.Decode(&req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	req.Authorization = r.Header.Get("Authorization")
	p.mu.Lock()
	p.requests = append(p.requests, req)
	p.mu.Unlock()
	if id := r.Header.Get("X-Request-ID"); id != "" {
		w.Header().Set("X-Request-ID", id)
	}
	if cc := p.CacheControl.Load(); cc != nil {
		w.Header().Set("Cache-Control", *cc)
	}
	if l := p.Location.Load(); l != nil {
		w.Header().Set("Location", *l)
	}
	if s := p.Status.Load(); s != 0 && s != http.StatusOK {
		w.WriteHeader(int(s))
		return
	}
	if p.Answer != nil && p.Answer(req, w) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if b := p.Body.Load(); b != nil {
		_, _ = w.Write([]byte(*b))
		return
	}
	decision, ctx := p.policy(req)
	_ = json.NewEncoder(w).Encode(struct {
		Decision bool           `json:"decision"`
		Context  map[string]any `json:"context,omitempty"`
	}{decision, ctx})
}
