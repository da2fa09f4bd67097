// Package testjwks is a JWK set endpoint for fault tests: it serves a key
// set that a test can replace (drop or add keys), make fail with a status,
// or make hang (accept the request and never answer until released or the
// client gives up), and counts the fetches. It is not used by the service.
package testjwks

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// Server is a JWK set endpoint at URL. Its methods are safe for concurrent
// use.
type Server struct {
	URL string

	t      testing.TB
	srv    *httptest.Server
	doc    atomic.Pointer[[]byte]
	status atomic.Int32 // 0 serves the document
	hits   atomic.Int64

	mu   sync.Mutex
	hang chan struct{} // non-nil while hanging
}

// New starts a server publishing keys, closed when the test ends.
func New(t testing.TB, keys ...testtoken.Key) *Server {
	t.Helper()
	s := &Server{t: t}
	s.SetKeys(keys...)
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/jwks.json"
	t.Cleanup(func() {
		s.Hang(false)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	s.mu.Lock()
	hang := s.hang
	s.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
			return
		}
	}
	if code := s.status.Load(); code != 0 {
		http.Error(w, "unavailable", int(code))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(*s.doc.Load())
}

// SetKeys replaces the published keys.
func (s *Server) SetKeys(keys ...testtoken.Key) {
	doc := testtoken.JWKS(s.t, keys...)
	s.doc.Store(&doc)
}

// Fail answers every fetch with status (0 serves the keys again).
func (s *Server) Fail(status int) { s.status.Store(int32(status)) }

// Hang holds every fetch (on) until Hang(false) releases them.
func (s *Server) Hang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case on && s.hang == nil:
		s.hang = make(chan struct{})
	case !on && s.hang != nil:
		close(s.hang)
		s.hang = nil
	}
}

// Fetches is the number of requests received.
func (s *Server) Fetches() int64 { return s.hits.Load() }
