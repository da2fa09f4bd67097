// Package testpeers provides real protocol peers for end-to-end tests: an MCP
// server and an A2A agent built with the official SDKs, the SDK clients that
// talk to them, and a bearer-token transport for those clients.
//
// Every peer reports what it saw: the identity and lineage headers that
// reached it and a fingerprint of its Authorization header (never the token),
// as an [Observation]. A test puts the proxy between a client and a peer and
// checks the observation: forged headers stripped, identity set, lineage
// derived, no token passed through.
package testpeers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// ObservedHeaders are the request headers a peer reports, in canonical form:
// the identity and lineage headers the proxy sets upstream, and the lineage
// headers agents send to each other the way kagent does.
var ObservedHeaders = []string{
	"X-User-Id",
	"X-Session-Id",
	"X-Root-Context-Id",
	"X-Parent-Context-Id",
	"X-Lineage-Depth",
	"X-Actor-Chain",
	HeaderKagentRootContextID,
	HeaderKagentParentContextID,
	"X-Extauthz-Dry-Run",
	"X-Extauthz-Tools",
	// Underscore spellings of the identity headers, which CGI-style
	// servers read as the headers themselves: a proxy drops them, or the
	// service refuses the request.
	"X_user_id",
	"X_actor_chain",
}

// The lineage headers kagent stamps on every outbound A2A call.
const (
	// HeaderKagentParentContextID carries the immediate caller's context id;
	// it changes with every hop.
	HeaderKagentParentContextID = "X-Kagent-Parent-Context-Id"
	// HeaderKagentRootContextID carries the context id at the top of the
	// chain; it is forwarded unchanged.
	HeaderKagentRootContextID = "X-Kagent-Root-Context-Id"
	// HeaderUserID is the user id kagent forwards with them.
	HeaderUserID = "X-User-Id"
)

// Observation is what a peer saw on one request.
type Observation struct {
	// Peer is the name of the peer that saw the request.
	Peer string `json:"peer"`
	// ContextID is the A2A context id the agent served (A2A only).
	ContextID string `json:"contextId,omitempty"`
	// Tenant is the A2A tenant the agent served the call for (A2A only).
	Tenant string `json:"tenant,omitempty"`
	// Headers holds every value of each [ObservedHeaders] entry that arrived;
	// absent headers are left out, repeated ones keep all their values.
	Headers http.Header `json:"headers"`
	// Authorization reports whether an Authorization header arrived.
	Authorization bool `json:"authorization"`
	// AuthorizationSHA256 is [Fingerprint] of the first Authorization value.
	AuthorizationSHA256 string `json:"authorizationSha256,omitempty"`
	// Cookies are the names (never the values) of the cookies that arrived.
	Cookies []string `json:"cookies,omitempty"`
	// APIToken reports whether an X-Api-Token header (an alternative
	// credential header) arrived.
	APIToken bool `json:"apiToken,omitempty"`
	// Next is what the next agent in the chain saw (A2A with a next hop).
	Next *Observation `json:"next,omitempty"`
}

// Fingerprint returns the first 16 hex digits of the SHA-256 of an
// Authorization header value, so that a test can tell which token arrived
// without the peer ever reporting the token. For a bearer token tok, compare
// with Fingerprint("Bearer " + tok).
func Fingerprint(headerValue string) string {
	sum := sha256.Sum256([]byte(headerValue))
	return hex.EncodeToString(sum[:8])
}

// observe records what peer saw in h.
func observe(peer string, h http.Header) Observation {
	o := Observation{Peer: peer, Headers: http.Header{}}
	for _, name := range ObservedHeaders {
		if vs := h.Values(name); len(vs) > 0 {
			o.Headers[name] = append([]string(nil), vs...)
		}
	}
	if auth := h.Values("Authorization"); len(auth) > 0 {
		o.Authorization = true
		o.AuthorizationSHA256 = Fingerprint(auth[0])
	}
	for _, c := range (&http.Request{Header: h}).Cookies() {
		o.Cookies = append(o.Cookies, c.Name)
	}
	o.APIToken = len(h.Values("X-Api-Token")) > 0
	return o
}

// ParseObservation decodes the JSON a peer replied with.
func ParseObservation(text string) (Observation, error) {
	var o Observation
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		return Observation{}, fmt.Errorf("testpeers: reply is not an observation: %w", err)
	}
	if o.Headers == nil {
		o.Headers = http.Header{}
	}
	return o, nil
}

// marshal encodes o; an Observation always encodes.
func (o Observation) marshal() string {
	b, err := json.Marshal(o)
	if err != nil {
		panic("testpeers: observation does not encode: " + err.Error())
	}
	return string(b)
}
