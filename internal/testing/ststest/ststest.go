// Package ststest is an OAuth 2.0 Token Exchange (RFC 8693) security token
// service for tests, on a real listener on 127.0.0.1. It does what a real
// STS does, so tests exercise the protocol rather than a mock of it:
//
//   - the token endpoint (/token) accepts only a form POST, refuses
//     repeated parameters (audience and resource excepted) and parameters
//     in the query string, and checks every parameter RFC 8693 section 2.1
//     defines;
//   - clients authenticate with client_secret_basic (form-encoded
//     credentials, RFC 6749 section 2.3.1), client_secret_post,
//     private_key_jwt (RFC 7523: signature, iss, sub, aud, exp, jti
//     replay) or none, each only with the method it is registered for;
//   - errors are RFC 6749 section 5.2 JSON with status 400, or 401 and a
//     WWW-Authenticate challenge for invalid_client;
//   - issued tokens are ES256 JWTs with iss, sub, aud (the requested
//     audiences and resources), scope, client_id and, when an actor token is
//     sent, act naming the actor with the subject token's own act nested
//     inside (RFC 8693 section 4.1); a subject token's may_act is enforced;
//   - the keys are at /jwks and the metadata at
//     /.well-known/oauth-authorization-server (RFC 8414).
//
// A subject or actor token is a JWT whose claims are read without checking
// its signature unless Options.VerifySubject says otherwise; one that is not
// a JWT, lacks sub or has expired gets invalid_grant, as deployed STSs
// commonly answer (RFC 8693 section 2.2.2 says invalid_request).
//
// Tests program refusals per audience or resource (Options.Failures),
// outages (SetFault) and slow answers (Pause), and count calls.
package ststest

import (
	"crypto"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// RFC 8693 and RFC 7523 identifiers.
const (
	GrantType           = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccess     = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT        = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeID         = "urn:ietf:params:oauth:token-type:id_token"
	ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
)

// Client is a registered client.
type Client struct {
	ID string
	// Method is the only authentication the client may use:
	// client_secret_basic, client_secret_post, private_key_jwt or none.
	Method string
	Secret string
	// Key verifies the client's private_key_jwt assertions (an
	// *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey).
	Key crypto.PublicKey
}

// DefaultClient is registered when Options.Clients is empty.
var DefaultClient = Client{ID: "extauthz", Method: "client_secret_basic", Secret: "extauthz-secret"}

// Failure is a programmed refusal.
type Failure struct {
	Status      int // default 400
	Code        string
	Description string
}

// Fault replaces every token endpoint answer while set (see SetFault).
type Fault struct {
	Status int
	Header http.Header
	Body   string
	// Hang: answer nothing until the client gives up.
	Hang bool
}

// Options configure a Server. Zero values get defaults.
type Options struct {
	Clients []Client
	// Failures refuse a request naming this audience or resource (see
	// also SetFailure).
	Failures map[string]Failure
	// Audiences, when set, are the only audience and resource values
	// accepted; others get invalid_target.
	Audiences []string
	// Scopes, when set, are the only scope values accepted; others get
	// invalid_scope.
	Scopes []string
	// Lifetime of issued tokens (default 5m).
	Lifetime time.Duration
	// OmitExpiresIn leaves expires_in out of responses (the token's exp
	// still says when it expires).
	OmitExpiresIn bool
	// VerifySubject returns a subject or actor token's claims or an error
	// (invalid_grant). Default: claims read unverified, sub required, exp
	// checked when present.
	VerifySubject func(token string) (jwt.MapClaims, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Respond may change a successful response before it is sent.
	Respond func(resp map[string]any)
	// OIDCOnly serves the metadata only at /.well-known/openid-configuration.
	OIDCOnly bool
}

// Request is a token request as the server received it.
type Request struct {
	// ClientID and AuthMethod: who authenticated and how; empty when
	// authentication failed.
	ClientID, AuthMethod string
	Form                 url.Values
}

// maxKept bounds the requests a Server remembers.
const maxKept = 1000

// Server is a running STS. Its methods are safe for concurrent use.
type Server struct {
	URL      string // base URL, also the issuer
	Issuer   string
	TokenURL string
	JWKSURL  string
	Key      testtoken.Key // signs issued tokens

	opts    Options
	clients map[string]Client
	srv     *httptest.Server
	done    chan struct{}

	mu       sync.Mutex
	calls    int
	requests []Request
	fault    *Fault
	failures map[string]Failure
	gate     chan struct{} // non-nil while paused
	jtis     map[string]time.Time
}

// New starts a Server, closed when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if len(o.Clients) == 0 {
		o.Clients = []Client{DefaultClient}
	}
	if o.Lifetime <= 0 {
		o.Lifetime = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{
		Key:      testtoken.EC(t, "ststest-1"),
		opts:     o,
		clients:  make(map[string]Client, len(o.Clients)),
		done:     make(chan struct{}),
		jtis:     map[string]time.Time{},
		failures: maps.Clone(o.Failures),
	}
	if s.failures == nil {
		s.failures = map[string]Failure{}
	}
	for _, c := range o.Clients {
		s.clients[c.ID] = c
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/token", s.token)
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(testtoken.JWKS(t, s.Key))
	})
	metadata := "GET /.well-known/oauth-authorization-server"
	if o.OIDCOnly {
		metadata = "GET /.well-known/openid-configuration"
	}
	mux.HandleFunc(metadata, s.metadata)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.Issuer = s.srv.URL
	s.TokenURL = s.srv.URL + "/token"
	s.JWKSURL = s.srv.URL + "/jwks"
	t.Cleanup(func() {
		close(s.done) // let hanging and paused handlers go
		s.srv.Close()
	})
	return s
}

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Calls is how many requests reached the token endpoint.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Requests returns the last token requests received (at most 1000), oldest
// first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Last returns the last token request received.
func (s *Server) Last() (Request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}, false
	}
	return s.requests[len(s.requests)-1], true
}

// SetFault makes the token endpoint answer f until SetFault(Fault{}).
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Status == 0 && !f.Hang {
		s.fault = nil
		return
	}
	s.fault = &f
}

// SetFailure refuses requests naming target (an audience or resource)
// with f from now on; a zero f accepts them again.
func (s *Server) SetFailure(target string, f Failure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Code == "" {
		delete(s.failures, target)
		return
	}
	s.failures[target] = f
}

// Pause holds token requests until release is called (once or more).
func (s *Server) Pause() (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gate := make(chan struct{})
	s.gate = gate
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.gate == gate {
				s.gate = nil
			}
			s.mu.Unlock()
			close(gate)
		})
	}
}

// Verify checks an issued token's signature, issuer and lifetime and
// returns its claims.
func (s *Server) Verify(token string) (jwt.MapClaims, error) {
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return s.Key.Private.Public(), nil },
		jwt.WithValidMethods([]string{s.Key.Alg}), jwt.WithIssuer(s.Issuer), jwt.WithExpirationRequired(), jwt.WithTimeFunc(s.opts.Now))
	return claims, err
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                s.Issuer,
		"token_endpoint":                        s.TokenURL,
		"jwks_uri":                              s.JWKSURL,
		"grant_types_supported":                 []string{GrantType},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "private_key_jwt", "none"},
		"token_endpoint_auth_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
	})
}

// oauthError is an RFC 6749 section 5.2 error.
type oauthError struct {
	status     int
	code, desc string
	challenge  bool // invalid_client after an Authorization header
}

func fail(code, desc string) *oauthError {
	return &oauthError{status: http.StatusBadRequest, code: code, desc: desc}
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	fault, gate := s.fault, s.gate
	s.mu.Unlock()

	if gate != nil {
		select {
		case <-gate:
		case <-s.done:
		case <-r.Context().Done():
			return
		}
	}
	if fault != nil {
		if fault.Hang {
			select {
			case <-s.done:
			case <-r.Context().Done():
			}
			return
		}
		for k, v := range fault.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(fault.Status)
		_, _ = w.Write([]byte(fault.Body))
		return
	}

	rec := Request{}
	resp, oe := s.exchange(r, &rec)
	s.mu.Lock()
	if len(s.requests) == maxKept {
		s.requests = slices.Delete(s.requests, 0, 1)
	}
	s.requests = append(s.requests, rec)
	s.mu.Unlock()

	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	if oe != nil {
		if oe.challenge {
			w.Header().Set("WWW-Authenticate", `Basic realm="ststest"`)
		}
		body := map[string]any{"error": oe.code}
		if oe.desc != "" {
			body["error_description"] = oe.desc
		}
		writeJSON(w, oe.status, body)
		return
	}
	if s.opts.Respond != nil {
		s.opts.Respond(resp)
	}
	writeJSON(w, http.StatusOK, resp)
}

// exchange validates the request and issues the token response.
func (s *Server) exchange(r *http.Request, rec *Request) (map[string]any, *oauthError) {
	if r.Method != http.MethodPost {
		return nil, fail("invalid_request", "the token endpoint takes POST")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, fail("invalid_request", "the body must be application/x-www-form-urlencoded")
	}
	if r.URL.RawQuery != "" {
		return nil, fail("invalid_request", "parameters belong in the body")
	}
	r.Body = http.MaxBytesReader(nil, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return nil, fail("invalid_request", "the body is not a valid form")
	}
	form := r.PostForm
	rec.Form = form
	for k, v := range form {
		if len(v) > 1 && k != "audience" && k != "resource" {
			return nil, fail("invalid_request", "parameter "+k+" is repeated")
		}
	}

	client, method, oe := s.authenticate(r, form)
	if oe != nil {
		return nil, oe
	}
	rec.ClientID, rec.AuthMethod = client.ID, method

	if g := form.Get("grant_type"); g != GrantType {
		return nil, fail("unsupported_grant_type", "only token exchange is supported")
	}
	subject, subjectType := form.Get("subject_token"), form.Get("subject_token_type")
	if subject == "" || subjectType == "" {
		return nil, fail("invalid_request", "subject_token and subject_token_type are required")
	}
	if !slices.Contains([]string{TokenTypeAccess, TokenTypeJWT, TokenTypeID}, subjectType) {
		return nil, fail("invalid_request", "unsupported subject_token_type")
	}
	actor, actorType := form.Get("actor_token"), form.Get("actor_token_type")
	if (actor == "") != (actorType == "") {
		return nil, fail("invalid_request", "actor_token and actor_token_type go together")
	}
	if actor != "" && actorType != TokenTypeJWT && actorType != TokenTypeAccess {
		return nil, fail("invalid_request", "unsupported actor_token_type")
	}
	requested := form.Get("requested_token_type")
	switch requested {
	case "":
		requested = TokenTypeAccess
	case TokenTypeAccess, TokenTypeJWT:
	default:
		return nil, fail("invalid_request", "unsupported requested_token_type")
	}

	audiences, resources := form["audience"], form["resource"]
	for _, res := range resources {
		u, err := url.Parse(res)
		if err != nil || !u.IsAbs() || u.Fragment != "" {
			return nil, fail("invalid_target", "resource must be an absolute URI without fragment")
		}
	}
	targets := slices.Concat(audiences, resources)
	for _, t := range targets {
		s.mu.Lock()
		f, ok := s.failures[t]
		s.mu.Unlock()
		if ok {
			status := f.Status
			if status == 0 {
				status = http.StatusBadRequest
			}
			return nil, &oauthError{status: status, code: f.Code, desc: f.Description}
		}
		if s.opts.Audiences != nil && !slices.Contains(s.opts.Audiences, t) {
			return nil, fail("invalid_target", "the target is unknown")
		}
	}
	scope := form.Get("scope")
	if s.opts.Scopes != nil {
		for sc := range strings.FieldsSeq(scope) {
			if !slices.Contains(s.opts.Scopes, sc) {
				return nil, fail("invalid_scope", "the scope is not available")
			}
		}
	}

	sub, err := s.claims(subject)
	if err != nil {
		return nil, fail("invalid_grant", "the subject token is invalid: "+err.Error())
	}
	now := s.opts.Now()
	claims := jwt.MapClaims{
		"iss": s.Issuer,
		"sub": sub["sub"],
		"iat": now.Unix(),
		"exp": now.Add(s.opts.Lifetime).Unix(),
		"jti": rand.Text(),
	}
	switch len(targets) {
	case 0:
		if client.ID != "" {
			claims["aud"] = client.ID
		}
	case 1:
		claims["aud"] = targets[0]
	default:
		claims["aud"] = targets
	}
	if scope != "" {
		claims["scope"] = scope
	}
	if client.ID != "" {
		claims["client_id"] = client.ID
	}
	if sid, ok := sub["session_id"]; ok {
		claims["session_id"] = sid
	}
	prior, hasPrior := sub["act"]
	if actor != "" {
		ac, err := s.claims(actor)
		if err != nil {
			return nil, fail("invalid_grant", "the actor token is invalid: "+err.Error())
		}
		if mayAct, ok := sub["may_act"].(map[string]any); ok && !sameParty(mayAct, ac) {
			return nil, fail("invalid_grant", "the actor may not act for the subject")
		}
		act := map[string]any{"sub": ac["sub"]}
		if iss, ok := ac["iss"]; ok {
			act["iss"] = iss
		}
		if hasPrior {
			act["act"] = prior // earlier actors nest inside the current one
		}
		claims["act"] = act
	} else if hasPrior {
		claims["act"] = prior
	}

	tok := jwt.NewWithClaims(jwt.GetSigningMethod(s.Key.Alg), claims)
	tok.Header["kid"] = s.Key.KID
	signed, err := tok.SignedString(s.Key.Private)
	if err != nil {
		return nil, &oauthError{status: http.StatusInternalServerError, code: "server_error"}
	}
	resp := map[string]any{
		"access_token":      signed,
		"issued_token_type": requested,
		"token_type":        "Bearer",
	}
	if !s.opts.OmitExpiresIn {
		resp["expires_in"] = int64(s.opts.Lifetime / time.Second)
	}
	if scope != "" {
		resp["scope"] = scope
	}
	return resp, nil
}

// sameParty: the actor matches may_act's sub (and iss, when may_act names one).
func sameParty(mayAct map[string]any, actor jwt.MapClaims) bool {
	if mayAct["sub"] != actor["sub"] {
		return false
	}
	iss, ok := mayAct["iss"]
	return !ok || iss == actor["iss"]
}

// claims reads a subject or actor token.
func (s *Server) claims(token string) (jwt.MapClaims, error) {
	if s.opts.VerifySubject != nil {
		return s.opts.VerifySubject(token)
	}
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(token, c); err != nil {
		return nil, errors.New("not a JWT")
	}
	if sub, _ := c["sub"].(string); sub == "" {
		return nil, errors.New("no sub")
	}
	if exp, err := c.GetExpirationTime(); err != nil {
		return nil, errors.New("bad exp")
	} else if exp != nil && !s.opts.Now().Before(exp.Time) {
		return nil, errors.New("expired")
	}
	return c, nil
}

// authenticate identifies the client by exactly one method.
func (s *Server) authenticate(r *http.Request, form url.Values) (Client, string, *oauthError) {
	_, basic := r.Header["Authorization"]
	methods := 0
	for _, used := range []bool{basic, form.Has("client_secret"), form.Has("client_assertion")} {
		if used {
			methods++
		}
	}
	if methods > 1 {
		return Client{}, "", fail("invalid_request", "use one client authentication method")
	}
	invalid := &oauthError{status: http.StatusUnauthorized, code: "invalid_client", desc: "client authentication failed", challenge: basic}
	switch {
	case basic:
		id, secret, ok := basicCredentials(r.Header.Get("Authorization"))
		c, known := s.clients[id]
		if !ok || !known || c.Method != "client_secret_basic" || c.Secret != secret {
			return Client{}, "", invalid
		}
		if cid := form.Get("client_id"); cid != "" && cid != id {
			return Client{}, "", fail("invalid_request", "client_id does not match the credentials")
		}
		return c, c.Method, nil
	case form.Has("client_secret"):
		c, known := s.clients[form.Get("client_id")]
		if !known || c.Method != "client_secret_post" || c.Secret != form.Get("client_secret") {
			return Client{}, "", invalid
		}
		return c, c.Method, nil
	case form.Has("client_assertion"):
		if form.Get("client_assertion_type") != ClientAssertionType {
			return Client{}, "", fail("invalid_request", "unsupported client_assertion_type")
		}
		c, err := s.verifyAssertion(form.Get("client_assertion"), form.Get("client_id"))
		if err != nil {
			invalid.desc = "client assertion rejected: " + err.Error()
			return Client{}, "", invalid
		}
		return c, c.Method, nil
	}
	c, known := s.clients[form.Get("client_id")]
	if !known || c.Method != "none" {
		return Client{}, "", invalid
	}
	return c, c.Method, nil
}

// basicCredentials decodes RFC 6749 section 2.3.1 credentials: base64 of
// form-encoded id ":" form-encoded secret.
func basicCredentials(h string) (id, secret string, ok bool) {
	enc, found := strings.CutPrefix(h, "Basic ")
	if !found {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", "", false
	}
	rawID, rawSecret, found := strings.Cut(string(raw), ":")
	if !found {
		return "", "", false
	}
	id, err1 := url.QueryUnescape(rawID)
	secret, err2 := url.QueryUnescape(rawSecret)
	return id, secret, err1 == nil && err2 == nil
}

// verifyAssertion checks a private_key_jwt client assertion (RFC 7523
// section 3).
func (s *Server) verifyAssertion(assertion, formClientID string) (Client, error) {
	var c Client
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(assertion, claims, func(t *jwt.Token) (any, error) {
		iss, _ := t.Claims.(jwt.MapClaims)["iss"].(string)
		known, ok := s.clients[iss]
		if !ok || known.Method != "private_key_jwt" || known.Key == nil {
			return nil, errors.New("unknown client")
		}
		c = known
		return known.Key, nil
	}, jwt.WithValidMethods([]string{"RS256", "ES256", "EdDSA"}), jwt.WithExpirationRequired(), jwt.WithTimeFunc(s.opts.Now))
	if err != nil {
		return Client{}, err
	}
	if sub, _ := claims["sub"].(string); sub != c.ID {
		return Client{}, errors.New("sub is not the client id")
	}
	if formClientID != "" && formClientID != c.ID {
		return Client{}, errors.New("client_id does not match the assertion")
	}
	aud, err := claims.GetAudience()
	if err != nil || !(slices.Contains(aud, s.TokenURL) || slices.Contains(aud, s.Issuer)) {
		return Client{}, errors.New("aud is neither the token endpoint nor the issuer")
	}
	jti, _ := claims["jti"].(string)
	if jti == "" {
		return Client{}, errors.New("no jti")
	}
	exp, _ := claims.GetExpirationTime()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	for k, until := range s.jtis {
		if now.After(until) {
			delete(s.jtis, k)
		}
	}
	if _, seen := s.jtis[jti]; seen {
		return Client{}, errors.New("jti replayed")
	}
	if len(s.jtis) >= maxKept*10 {
		return Client{}, errors.New("too many live assertions")
	}
	s.jtis[jti] = exp.Time
	return c, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
