// Package introspecttest is an OAuth 2.0 authorization server's token
// introspection endpoint (RFC 7662) for tests, on a real listener on
// 127.0.0.1. It is not used by the service itself.
//
//   - POST /introspect takes a form with token and an optional
//     token_type_hint; the client authenticates with client_secret_basic
//     or client_secret_post (401 otherwise, RFC 7662 section 2.1);
//   - the answer is {"active":false} for a token it does not know, else
//     the members set for it with "active":true; asked for
//     application/token-introspection+jwt and given a signing key, it
//     answers a signed JWT response (RFC 9701);
//   - the metadata is at /.well-known/oauth-authorization-server (RFC 8414)
//     with introspection_endpoint;
//   - tests program outages (SetFault), slow answers (Hold) and count
//     calls per token.
package introspecttest

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// The test client's credentials.
const (
	ClientID     = "gateway"
	ClientSecret = "gateway-secret"
)

// Fault is how the endpoint misbehaves.
type Fault int

// Faults.
const (
	None        Fault = iota
	Unavailable       // 503 with Retry-After: 7
	Garbage           // 200 with a body that is not JSON
	NoActive          // 200 with a JSON object lacking active
	Huge              // 200 with a body of 1 MiB
	WrongType         // 200 with a JWT answer whatever was asked
	Redirect          // 307 to an endpoint that says every token is mallory's
)

// Options configure a Server.
type Options struct {
	// Now is the clock of JWT responses (default time.Now).
	Now func() time.Time
	// Key, when set, signs JWT responses for clients that ask for them.
	Key *testtoken.Key
}

// Server is a running introspection endpoint.
type Server struct {
	// URL is the issuer (the server's base URL); IntrospectURL the
	// endpoint.
	URL, IntrospectURL string

	opts Options
	srv  *httptest.Server

	mu     sync.Mutex
	tokens map[string]map[string]any
	calls  map[string]int
	total  int
	hints  []string
	fault  Fault
	hold   chan struct{} // non-nil: calls wait until it is closed
}

// New starts a server, closed when the test ends.
func New(t testing.TB, o Options) *Server {
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{opts: o, tokens: map[string]map[string]any{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /introspect", s.introspect)
	// Where Redirect points: a client that follows it reads an answer no
	// configuration named.
	mux.HandleFunc("POST /elsewhere", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"active":true,"sub":"mallory"}`))
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	s.URL = s.srv.URL
	s.IntrospectURL = s.srv.URL + "/introspect"
	return s
}

// Close stops the server: calls are refused from then on.
func (s *Server) Close() {
	s.Release()
	s.srv.Close()
}

// Set makes token active with members (active is added).
func (s *Server) Set(token string, members map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = members
}

// Revoke makes token inactive.
func (s *Server) Revoke(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}

// SetFault makes the endpoint misbehave (None: behave).
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// Hold makes calls wait until Release (or the client gives up).
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold == nil {
		s.hold = make(chan struct{})
	}
}

// Release lets held calls answer.
func (s *Server) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// Calls is how many calls asked about token; Total, about any.
func (s *Server) Calls(token string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[token]
}

// Total is how many calls reached the endpoint.
func (s *Server) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Hints are the token_type_hint values received, in order ("" for none).
func (s *Server) Hints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hints...)
}

// MaxCallsPerToken is the most calls any one token got.
func (s *Server) MaxCallsPerToken() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n = max(n, c)
	}
	return n
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"issuer":                 s.URL,
		"introspection_endpoint": s.IntrospectURL,
		"token_endpoint":         s.URL + "/token",
	})
}

func (s *Server) authenticated(r *http.Request) bool {
	if id, secret, ok := r.BasicAuth(); ok {
		// RFC 6749 section 2.3.1: form-encoded before base64; the test
		// credentials need no escaping.
		return id == ClientID && secret == ClientSecret
	}
	return r.PostForm.Get("client_id") == ClientID && r.PostForm.Get("client_secret") == ClientSecret
}

func (s *Server) introspect(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || len(r.URL.RawQuery) > 0 {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	if !s.authenticated(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="introspect"`)
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	token := r.PostForm.Get("token")
	s.mu.Lock()
	s.calls[token]++
	s.total++
	s.hints = append(s.hints, r.PostForm.Get("token_type_hint"))
	members, active := s.tokens[token]
	fault, hold := s.fault, s.hold
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	switch fault {
	case Redirect:
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		return
	case Unavailable:
		w.Header().Set("Retry-After", "7")
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	case Garbage:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("<html>not json"))
		return
	case NoActive:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sub":"x"}`))
		return
	case Huge:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"active":true,"pad":"` + strings.Repeat("x", 1<<20) + `"}`))
		return
	}
	doc := map[string]any{"active": false}
	if active {
		doc = map[string]any{}
		for k, v := range members {
			doc[k] = v
		}
		doc["active"] = true
	}
	accept, _, _ := mime.ParseMediaType(r.Header.Get("Accept"))
	if s.opts.Key != nil && (accept == "application/token-introspection+jwt" || fault == WrongType) {
		s.writeJWT(w, doc)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
}

// writeJWT answers doc as an RFC 9701 JWT response.
func (s *Server) writeJWT(w http.ResponseWriter, doc map[string]any) {
	k := s.opts.Key
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), jwt.MapClaims{
		"iss":                 s.URL,
		"aud":                 ClientID,
		"iat":                 s.opts.Now().Unix(),
		"token_introspection": doc,
	})
	tok.Header["kid"] = k.KID
	tok.Header["typ"] = "token-introspection+jwt"
	signed, err := tok.SignedString(k.Private)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/token-introspection+jwt")
	_, _ = w.Write([]byte(signed))
}
