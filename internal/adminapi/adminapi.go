// Package adminapi serves and calls the extauthz admin API
// (proto/extauthz/admin/v1): the gRPC Server over a Backend that the pipeline
// implements, the Handler that puts it on the admin HTTP listener next to
// the elicitation completion, the Authenticator and Audit that let only
// allowed callers in (bearer token from a file, mTLS with allowed client
// identities, or both) and log every call with who made it, and RunCLI, the
// `extauthz admin` command.
//
// The admin API changes what the service remembers (invalidation, revocation
// of users and of API keys) and reads
// what it would do (Explain, Stats); it never decides requests. It belongs on
// the admin listener only, never on the ext_authz port Envoy reaches, nor on
// the read-only ops listener (probes, metrics).
package adminapi

import (
	"context"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
)

// Backend is what the admin API acts on: the pipeline and its caches. It must
// be safe for concurrent use. An error means the backend is broken; return a
// gRPC status error to choose the code the client sees (otherwise Internal).
type Backend interface {
	// InvalidateSession drops the cached verdicts, exchanged tokens and
	// pending elicitations of one session (the value the service sets as
	// x-session-id). session is never empty.
	InvalidateSession(ctx context.Context, session string) (Counts, error)
	// RevokeSubject revokes one user, (issuer, subject): the issuer's
	// configured name or iss, and the token's user claim. Neither is ever
	// empty; an issuer that is not configured is an InvalidArgument status.
	RevokeSubject(ctx context.Context, issuer, subject string) (Counts, error)
	// RevokeAPIKey revokes the API key id of the api_keys issuer named
	// issuer, here and on every replica. Neither is ever empty; an issuer
	// that is not an api_keys issuer, or an id no key can have, is an
	// InvalidArgument status.
	RevokeAPIKey(ctx context.Context, issuer, id string) (KeyRevocation, error)
	// Explain decides req as Envoy's Check would, without side effects:
	// nothing is cached, bound or exchanged. A denial is an Explanation,
	// not an error. req is never nil.
	Explain(ctx context.Context, req *authv3.CheckRequest) (Explanation, error)
	// Stats reports the service's counters.
	Stats(ctx context.Context) (Stats, error)
}

// Counts is how many entries an invalidation dropped, per kind.
type Counts struct {
	Verdicts        int
	ExchangedTokens int
	SessionBindings int
	Elicitations    int
}

// KeyRevocation is what revoking an API key did.
type KeyRevocation struct {
	Dropped Counts
	// Until is when the revocation ends.
	Until time.Time
	// Known reports whether the answering replica has a key with the id.
	Known bool
}

// Explanation is how the pipeline would decide a request.
type Explanation struct {
	Route       string // the route that decided; empty when none matched
	Outcome     string // machine-readable: allowed, public, missing_token, ...
	Allowed     bool   // Envoy would send the request upstream
	HTTPStatus  int    // 200 when allowed, else the status the client gets
	Description string // why, as the client would read it
	Steps       []Step // in the order they ran; the last one decided
	// Response is the CheckResponse Envoy would apply. Required.
	Response *authv3.CheckResponse
}

// Step is one stage of the pipeline and what it concluded.
type Step struct {
	Name    string // route, public_path, credential, identity, ...
	Outcome string // ok, skipped, or the outcome it denied with
	Detail  string // for a human; never a token or a secret
}

// Stats is a snapshot of the service's counters.
type Stats struct {
	Version          string
	StartedAt        time.Time // when the service started serving; uptime is measured from it
	ConfigGeneration uint64    // 1 for the configuration read at start, +1 per reload
	ConfigLoadedAt   time.Time
	Caches           []CacheStats // named CacheVerdicts, CacheExchangedTokens, ...
}

// CacheStats are one cache's counters.
type CacheStats struct {
	Name                    string
	Hits, Misses, Evictions uint64
	Size                    int
}

// The names of the service's caches in Stats.
const (
	CacheVerdicts        = "verdicts"
	CacheExchangedTokens = "exchanged_tokens"
	CacheSessions        = "sessions"
	CacheElicitations    = "elicitations"
)
