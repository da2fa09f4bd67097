// Package config owns the service's configuration file: its YAML schema, the
// strict decoding of it (an unknown key is an error naming the key and its
// line), the built-in default used when no file is given, and validation that
// reports every problem at once. It holds plain data; the check package
// compiles it into the runtime structures that serve requests.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// File is the whole configuration.
type File struct {
	// src is the YAML document f was decoded from, for the lines of
	// validation errors; nil when f was built in code.
	src *yaml.Node

	Issuers  []Issuer `yaml:"issuers"`
	Routes   []Route  `yaml:"routes"`
	Cache    Cache    `yaml:"cache"`
	Identity Identity `yaml:"identity"`
	Sessions Sessions `yaml:"sessions"`
	Lineage  Lineage  `yaml:"lineage"`
	Limits   Limits   `yaml:"limits"`
	Tracing  Tracing  `yaml:"tracing"`
	// Exchanges are the security token services routes exchange tokens at.
	Exchanges []Exchange `yaml:"exchanges"`
	// Elicitations bounds pending re-authorizations.
	Elicitations Elicitations `yaml:"elicitations"`
	// Redis, when addrs are set, shares session bindings, pending
	// elicitations, exchanged tokens and revocations between replicas.
	// Read at start only.
	Redis Redis `yaml:"redis"`
	// Audit writes a record of every decision; off without a sink. Read at
	// start only.
	Audit Audit `yaml:"audit"`
	// DPoP sets how DPoP proofs (RFC 9449) of DPoP-bound tokens are
	// checked; every route checks them.
	DPoP DPoP `yaml:"dpop"`
}

// Audit is the decision log (see docs/audit.md).
type Audit struct {
	Sink          string    `yaml:"sink"`      // stdout, file or otlp; empty: off
	Decisions     string    `yaml:"decisions"` // all (default) or denied
	SampleAllowed *float64  `yaml:"sample_allowed"`
	LogArguments  []string  `yaml:"log_arguments"`
	QueueSize     int       `yaml:"queue_size"`
	File          AuditFile `yaml:"file"`
}

// AuditFile is where the file sink writes and how it rotates.
type AuditFile struct {
	Path       string `yaml:"path"`
	MaxSize    int    `yaml:"max_size"` // megabytes
	MaxBackups int    `yaml:"max_backups"`
}

// RateLimit is one limit of a route or rule (see docs/rate-limits.md).
type RateLimit struct {
	// Key is subject, subject_tool, client, root or principal.
	Key      string   `yaml:"key"`
	Requests int      `yaml:"requests"`
	Per      Duration `yaml:"per"`
	Burst    int      `yaml:"burst"`
	Action   string   `yaml:"action"` // deny (the default and only one)
}

// Redis is the optional shared tier behind the in-process caches.
type Redis struct {
	Addrs              []string `yaml:"addrs"`
	MasterName         string   `yaml:"master_name"` // Sentinel
	Cluster            bool     `yaml:"cluster"`
	Username           string   `yaml:"username"`
	PasswordEnv        string   `yaml:"password_env"`
	DB                 int      `yaml:"db"`
	TLS                bool     `yaml:"tls"`
	TLSServerName      string   `yaml:"tls_server_name"`
	TLSCAFile          string   `yaml:"tls_ca_file"`
	InsecureSkipVerify bool     `yaml:"insecure_skip_verify"`
	KeyPrefix          string   `yaml:"key_prefix"`
	OpTimeout          Duration `yaml:"op_timeout"`
	// EncryptionKeyEnv names an environment variable holding a base64
	// 32-byte key: exchanged tokens are sealed with AES-256-GCM.
	EncryptionKeyEnv string `yaml:"encryption_key_env"`
	// FailOpen lets MCP session binding fall back to this replica alone
	// while Redis is unreachable; by default such requests are refused 503.
	FailOpen bool `yaml:"fail_open"`
	// RequiredForReady makes /readyz fail while Redis is unreachable.
	RequiredForReady bool `yaml:"required_for_ready"`
}

// Exchange is one RFC 8693 security token service and how this service
// authenticates to it.
type Exchange struct {
	Name string `yaml:"name"`
	// TokenEndpoint, or Issuer to discover it from (RFC 8414, then OIDC).
	TokenEndpoint      string         `yaml:"token_endpoint"`
	Issuer             string         `yaml:"issuer"`
	ClientAuth         ExchangeClient `yaml:"client_auth"`
	SubjectTokenType   string         `yaml:"subject_token_type"`
	RequestedTokenType string         `yaml:"requested_token_type"`
	ActorTokenFile     string         `yaml:"actor_token_file"`
	ActorTokenType     string         `yaml:"actor_token_type"`
	Timeout            Duration       `yaml:"timeout"`
	SafetyMargin       Duration       `yaml:"safety_margin"`
	RefreshAhead       Duration       `yaml:"refresh_ahead"`
	BreakerFailures    int            `yaml:"breaker_failures"`
	BreakerCooldown    Duration       `yaml:"breaker_cooldown"`
	CacheSize          int            `yaml:"cache_size"`
	// CachePerSubject bounds one user's exchanged tokens in the cache: a
	// user's new one beyond it replaces the user's own oldest, so one user
	// cannot push everybody else's out (0: 100; at most cache_size/4).
	CachePerSubject int `yaml:"cache_per_subject"`
}

// ExchangeClient is the client authentication at the STS.
type ExchangeClient struct {
	// Method: client_secret_basic (default with a secret), client_secret_post,
	// private_key_jwt (RFC 7523) or none.
	Method           string `yaml:"method"`
	ClientID         string `yaml:"client_id"`
	ClientSecretEnv  string `yaml:"client_secret_env"`
	ClientSecretFile string `yaml:"client_secret_file"`
	PrivateKeyFile   string `yaml:"private_key_file"`
	KeyID            string `yaml:"key_id"`
	Algorithm        string `yaml:"algorithm"`
}

// Elicitations bounds the pending re-authorizations.
type Elicitations struct {
	MaxEntries int `yaml:"max_entries"`
	// MaxPerSubject bounds one user's pending elicitations (and completed
	// consents): a user's new one beyond it replaces only that user's
	// oldest.
	MaxPerSubject int      `yaml:"max_per_subject"`
	TTL           Duration `yaml:"ttl"`
	// StateKeyEnv or StateKeyFile holds the key (at least 32 bytes) that
	// signs the state of authorization URLs; without either a random key is
	// made at start. Replicas sharing Redis must share it. Read at start
	// only.
	StateKeyEnv  string `yaml:"state_key_env"`
	StateKeyFile string `yaml:"state_key_file"`
}

// RouteExchange replaces the inbound token with one issued for the upstream.
type RouteExchange struct {
	STS      string   `yaml:"sts"`
	Audience []string `yaml:"audience"`
	Resource []string `yaml:"resource"` // RFC 8707
	Scope    string   `yaml:"scope"`
	// Methods are the JSON-RPC methods (globs) whose requests need the
	// exchanged token; empty: every request that is not public.
	Methods []string `yaml:"methods"`
	// Tools override audience, resource and scope for MCP tools/call by tool
	// name (globs, first match), and may require the user's consent first.
	Tools []ToolExchange `yaml:"tools"`
	// Agents override audience, resource and scope by the calling agent;
	// an agent's override wins over a tool's.
	Agents []AgentExchange `yaml:"agents"`
	// AuthorizeURL is where a user authorizes the upstream when the STS
	// answers interaction_required / consent_required or consent is needed;
	// the service adds state=<elicitation id>.
	AuthorizeURL string `yaml:"authorize_url"`
	Message      string `yaml:"message"`
}

// ToolExchange is a per-tool override.
type ToolExchange struct {
	Names    []string `yaml:"names"`
	Audience []string `yaml:"audience"`
	Resource []string `yaml:"resource"`
	Scope    string   `yaml:"scope"`
	// Consent requires the user to have completed the authorization at
	// AuthorizeURL (an elicitation) before the first call.
	Consent bool `yaml:"consent"`
}

// AgentExchange overrides audience, resource and scope for the calling
// agent: its azp/client_id, a subject of its token's act chain, or its mTLS
// principal (exact, or a prefix ending in /*). The first matching agent
// override wins over a tool's.
type AgentExchange struct {
	ClientIDs   []string `yaml:"client_ids"`
	ActSubjects []string `yaml:"act_subjects"`
	Principals  []string `yaml:"principals"`
	Audience    []string `yaml:"audience"`
	Resource    []string `yaml:"resource"`
	Scope       string   `yaml:"scope"`
}

// Tracing sends OpenTelemetry spans to an OTLP/gRPC collector; off unless
// otlp_endpoint is set. Read at start only.
type Tracing struct {
	OTLPEndpoint string   `yaml:"otlp_endpoint"`
	Insecure     bool     `yaml:"insecure"`
	SampleRatio  *float64 `yaml:"sample_ratio"` // default 1
	ServiceName  string   `yaml:"service_name"`
}

// DPoP bounds the proofs of DPoP-bound tokens (RFC 9449). A token whose
// cnf names a key (jkt) is accepted only with the DPoP scheme and a fresh
// proof signed by that key; zero values take the defaults.
type DPoP struct {
	// MaxAge is how old a proof's iat may be (default 1m); Leeway how far
	// in the future for clock skew (default 5s).
	MaxAge Duration `yaml:"max_age"`
	Leeway Duration `yaml:"leeway"`
	// ReplayEntries bounds the proofs a replica remembers to refuse their
	// reuse (default 200000); a proof that would need more is answered
	// 503 until older ones age out, never by forgetting a live one.
	ReplayEntries int `yaml:"replay_entries"`
}

// Limits protect the service under overload.
type Limits struct {
	// MaxConcurrentChecks bounds checks in progress; beyond it a check is
	// answered at once with OverloadStatus (fail closed) instead of queueing.
	MaxConcurrentChecks int `yaml:"max_concurrent_checks"`
	OverloadStatus      int `yaml:"overload_status"`
	// CheckDeadline is the most a check waits on its dependencies (a key
	// set refetch, the STS, Redis); keep it below the proxy's own timeout
	// (Envoy ext_authz `timeout`, default 200ms in Envoy, 2s in our
	// examples). What is not ready by then gets the answer it would get
	// without the dependency: an unknown kid 401, a token needing an
	// exchange 503 with Retry-After (default 1s).
	CheckDeadline Duration `yaml:"check_deadline"`
	// MaxWaitingPerDependency bounds the checks waiting at once on one
	// dependency: one issuer's key set refetch, or one STS. The others get
	// their answer at once, so a flood of tokens naming unknown kids never
	// holds the check slots cached tokens need (default 64). Read at start
	// for key sets.
	MaxWaitingPerDependency int `yaml:"max_waiting_per_dependency"`
}

// Lineage configures the conversation lineage headers and whom to believe
// about them.
type Lineage struct {
	// Preset picks header names: "default" (x-root-context-id, ...) or
	// "kagent" (x-kagent-root-context-id, x-kagent-parent-context-id).
	Preset  string         `yaml:"preset"`
	Headers LineageHeaders `yaml:"headers"`
	// MaxDepth refuses deeper delegation chains (default 8).
	MaxDepth int          `yaml:"max_depth"`
	Trust    LineageTrust `yaml:"trust"`
	// Signing mints a short-lived JWT carrying the lineage for the next hop.
	Signing LineageSigning `yaml:"signing"`
	// Peers are other services whose signed lineage tokens are accepted.
	Peers []LineagePeer `yaml:"peers"`
}

// LineageHeaders override single header names of the preset.
type LineageHeaders struct {
	Root       string `yaml:"root"`
	Parent     string `yaml:"parent"`
	Depth      string `yaml:"depth"`
	ActorChain string `yaml:"actor_chain"`
	Signed     string `yaml:"signed"`
}

// LineageTrust says whose inbound lineage headers are kept: tokens of these
// issuers or client ids (azp / client_id), mTLS peers with these principals
// (exact SPIFFE ids, or prefixes ending in /*), or everybody. Tokens with an
// act claim are trusted too unless Act is false.
type LineageTrust struct {
	All        bool     `yaml:"all"`
	Issuers    []string `yaml:"issuers"`
	ClientIDs  []string `yaml:"client_ids"`
	Principals []string `yaml:"principals"`
	// Act: a token with an act claim is trusted (nil: true). False on a
	// route that accepts an issuer whose tokens could carry any act claim.
	Act *bool `yaml:"act"`
}

// LineageSigning is the key the service signs lineage tokens with.
type LineageSigning struct {
	KeyFile string   `yaml:"key_file"` // PEM, Ed25519 or P-256; replace the file to rotate
	Issuer  string   `yaml:"issuer"`
	TTL     Duration `yaml:"ttl"`
}

// LineagePeer is another service's lineage signing key set.
type LineagePeer struct {
	Issuer   string `yaml:"issuer"`
	JWKSURL  string `yaml:"jwks_url"`
	JWKSFile string `yaml:"jwks_file"`
}

// RouteLineage overrides lineage settings for one route.
type RouteLineage struct {
	Disabled bool          `yaml:"disabled"`
	MaxDepth int           `yaml:"max_depth"`
	Trust    *LineageTrust `yaml:"trust"`
	// Sign sets a signed lineage token on upstream requests of this route.
	Sign bool `yaml:"sign"`
}

// Sessions bounds the MCP session bindings (docs/sessions.md).
type Sessions struct {
	// MaxEntries bounds the bindings held; when all are live a new session
	// is refused (503), never made room for by dropping someone's binding.
	MaxEntries int `yaml:"max_entries"`
	// MaxPerSubject bounds one user's bindings: a user's new session beyond
	// it pushes out only that user's least recently used one.
	MaxPerSubject int `yaml:"max_per_subject"`
	// IdleTimeout is how long a binding lives after its last use; set it
	// to at least the upstream's session lifetime.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// Delegates may use a session (or task) of the user their token acts
	// for: the user is the token's subject or in its act chain, and the
	// caller is named here. Never implicit: empty means nobody but the
	// owner.
	Delegates []SessionDelegate `yaml:"delegates"`
	// TaskOwnership binds MCP and A2A tasks to their creator like sessions
	// (default on).
	TaskOwnership *bool `yaml:"task_ownership"`
}

// OwnsTasks reports whether tasks are bound to their creator
// (TaskOwnership, on when unset).
func (s Sessions) OwnsTasks() bool { return s.TaskOwnership == nil || *s.TaskOwnership }

// SessionDelegate names callers that may join the session of the user
// their token acts for.
type SessionDelegate struct {
	Name string `yaml:"name"`
	// ClientIDs are the caller token's azp or client_id.
	ClientIDs []string `yaml:"client_ids"`
	// ActSubjects are subjects in the caller token's act chain.
	ActSubjects []string `yaml:"act_subjects"`
}

// Issuer is one trusted token issuer and where its keys come from: exactly one
// of an HMAC secret (secret_env, secret_file or secret), jwks_url, jwks_file or
// discovery.
type Issuer struct {
	Name       string   `yaml:"name"`
	Issuer     string   `yaml:"issuer"`
	Algorithms []string `yaml:"algorithms"`

	SecretEnv  string `yaml:"secret_env"`
	SecretFile string `yaml:"secret_file"`
	Secret     string `yaml:"secret"`

	JWKSURL   string `yaml:"jwks_url"`
	JWKSFile  string `yaml:"jwks_file"`
	Discovery bool   `yaml:"discovery"`

	// SubjectPrefix is the issuer's subject namespace: it is put before
	// the subject in the user header and tells this issuer's users from
	// another's (default: "<name>:" when several issuers are configured,
	// none with one). Issuers with the same prefix share one subject space.
	SubjectPrefix *string `yaml:"subject_prefix"`
	// SharedSubjects declares that the issuer's subjects are the same
	// users as those of every other issuer that shares them: the subject
	// is used as it is (subject_prefix: "").
	SharedSubjects bool `yaml:"shared_subjects"`

	Leeway             Duration `yaml:"leeway"`
	Type               string   `yaml:"type"`
	RefreshInterval    Duration `yaml:"refresh_interval"`
	UnknownKIDInterval Duration `yaml:"unknown_kid_interval"`

	// Introspection, APIKeys and Peer make the issuer one of the other
	// kinds (docs/credentials.md): opaque tokens asked about at the
	// server, API keys from a file, workload identity from mTLS.
	Introspection *Introspection `yaml:"introspection"`
	APIKeys       *APIKeys       `yaml:"api_keys"`
	Peer          *Peer          `yaml:"peer"`
}

// Introspection is an issuer of opaque tokens asked about at its RFC 7662
// introspection endpoint.
type Introspection struct {
	// Endpoint; empty discovers it from the issuer (RFC 8414).
	Endpoint      string         `yaml:"endpoint"`
	ClientAuth    ExchangeClient `yaml:"client_auth"`
	TokenTypeHint string         `yaml:"token_type_hint"`
	Timeout       Duration       `yaml:"timeout"`
	CacheTTL      Duration       `yaml:"cache_ttl"`
	NegativeTTL   Duration       `yaml:"negative_ttl"`
	// Always introspects this server's JWTs too.
	Always bool `yaml:"always"`
	// JWTResponse asks for RFC 9701 signed answers, verified with the
	// issuer's jwks_url or discovery.
	JWTResponse bool `yaml:"jwt_response"`
}

// APIKeys is an issuer of API keys defined in a file.
type APIKeys struct {
	File string `yaml:"file"`
	// Header is read besides Authorization: Bearer ek_... (e.g. x-api-key).
	Header string `yaml:"header"`
}

// Peer is an issuer of workload identities from mTLS.
type Peer struct {
	TrustDomains []string `yaml:"trust_domains"`
	Paths        []string `yaml:"paths"`
	Subject      string   `yaml:"subject"`
	// XFCCFrom are the networks of the proxies whose
	// X-Forwarded-Client-Cert is believed (forward-auth).
	XFCCFrom []string `yaml:"xfcc_from"`
}

// Kind is the issuer's kind: jwt, introspection, api_keys or peer.
func (is Issuer) Kind() string {
	switch {
	case is.Introspection != nil:
		return "introspection"
	case is.APIKeys != nil:
		return "api_keys"
	case is.Peer != nil:
		return "peer"
	}
	return "jwt"
}

// Route is a class of requests with one authentication policy.
type Route struct {
	Name string `yaml:"name"`
	// Default makes this the route for requests that match no other.
	Default    bool     `yaml:"default"`
	Hosts      []string `yaml:"hosts"`
	PathPrefix string   `yaml:"path_prefix"`

	Issuers   []string `yaml:"issuers"`
	Audiences []string `yaml:"audiences"`
	Scopes    []string `yaml:"scopes"`
	// PublicPaths pass without a token: exact paths, or prefixes ending in *.
	PublicPaths []string `yaml:"public_paths"`
	// ResourceMetadata is the RFC 9728 protected resource metadata URL named
	// in challenges. When empty it is derived from the request's host.
	ResourceMetadata string `yaml:"resource_metadata"`
	// ForwardAuthorization keeps the inbound Authorization header on the
	// upstream request; by default it is removed.
	ForwardAuthorization bool        `yaml:"forward_authorization"`
	Credentials          Credentials `yaml:"credentials"`
	// SenderConstrained, "dpop" or "mtls", refuses every token not bound
	// to its sender that way (cnf.jkt, cnf.x5t#S256); empty takes bearer
	// tokens too. Bound tokens are held to their binding on every route.
	SenderConstrained string        `yaml:"sender_constrained"`
	ClaimHeaders      []ClaimHeader `yaml:"claim_headers"`

	// Protocol is what the upstream speaks: "mcp", "a2a", "http" (no
	// JSON-RPC awareness) or "auto" (the default: JSON-RPC aware when the
	// body is JSON-RPC, MCP or A2A by its method).
	Protocol string `yaml:"protocol"`
	MCP      MCP    `yaml:"mcp"`
	// Rules authorize JSON-RPC methods and the tools, prompts and resources
	// they name; the first matching rule decides, DefaultAction otherwise.
	Rules             []Rule            `yaml:"rules"`
	DefaultAction     string            `yaml:"default_action"`
	ProtectedResource ProtectedResource `yaml:"protected_resource"`
	Lineage           RouteLineage      `yaml:"lineage"`
	Exchange          *RouteExchange    `yaml:"exchange"`
	// RequestBody says whether the front end sends the request body to the
	// service: "sent" (the default: Envoy with_request_body, Traefik
	// forwardBody, nginx with the njs recipe) or "none" (nginx auth_request,
	// Caddy forward_auth). Rules on a route without the body need
	// UpstreamValidatesMCPHeaders.
	RequestBody string `yaml:"request_body"`
	// UpstreamValidatesMCPHeaders declares that the upstream refuses a call
	// whose Mcp-Method and Mcp-Name headers disagree with its body (MCP
	// 2026-07-28 servers), so that rules may allow on those headers when
	// the body is not sent.
	UpstreamValidatesMCPHeaders bool `yaml:"upstream_validates_mcp_headers"`
	// UpstreamScopesTaskLists declares that the A2A agent lists only the
	// caller's tasks (it keeps them by the user header), so that a task
	// list no context filters may reach it where tasks are bound.
	UpstreamScopesTaskLists bool `yaml:"upstream_scopes_task_lists"`
	// DryRun decides, logs and counts as usual but lets every request pass,
	// telling the upstream the decision in the x-extauthz-dry-run header.
	DryRun bool `yaml:"dry_run"`
	// Limits count the route's authenticated requests.
	Limits []RateLimit `yaml:"limits"`
	// ResponsePath declares that Envoy's ext_proc filter sends this route's
	// responses to the service (docs/extproc.md): sessions are then bound
	// when the initialize response creates them, and a session id nobody
	// saw created is refused (404).
	ResponsePath bool `yaml:"response_path"`
	// FilterLists, on a route with a response path, removes from list
	// results the tools, prompts and resources the caller may not use
	// (default on).
	FilterLists *bool `yaml:"filter_lists"`
	// ToolsHeader sets a signed header listing the tools the caller may use,
	// for MCP servers behind proxies without a response filter
	// (docs/tools-header.md).
	ToolsHeader *ToolsHeader `yaml:"tools_header"`
}

// ToolsHeader is a route's signed list of the tools its caller may use: a
// compact JWT signed with the lineage key (lineage.signing), verifiable
// with the lineage JWK set.
type ToolsHeader struct {
	// Tools are the names of the tools the route's server offers: the
	// service never sees the server's list, so it evaluates these.
	Tools []string `yaml:"tools"`
	// Header carries the token (default x-extauthz-tools).
	Header string `yaml:"header"`
	// TTL is the token's lifetime (default 5m), never beyond the caller's
	// token.
	TTL Duration `yaml:"ttl"`
}

// plainHTTP is the route protocol that reads no JSON-RPC; the names are
// jsonrpc.Protocol's.
var plainHTTP = jsonrpc.ProtocolHTTP.String()

// Route request_body values.
const (
	RequestBodySent = "sent"
	RequestBodyNone = "none"
)

// MCP tunes MCP awareness on a route.
type MCP struct {
	// SessionBinding binds each Mcp-Session-Id to its first user (default on).
	SessionBinding *bool `yaml:"session_binding"`
	// TokenInMeta accepts the bearer token from params._meta.authorization or
	// params.arguments._metadata.authorization when no header carries one.
	TokenInMeta bool `yaml:"token_in_meta"`
}

// Rule is one authorization rule for JSON-RPC calls.
type Rule struct {
	Name string `yaml:"name"`
	// Methods are JSON-RPC method globs ("tools/call", "tools/*"); A2A names
	// match in either protocol version's spelling. Empty: every method.
	Methods []string `yaml:"methods"`
	// Names are globs on the tool or prompt name or the resource URI.
	// Empty: any (including none).
	Names []string `yaml:"names"`
	// Scopes must all be held; Claims must each contain one of the values.
	Scopes []string            `yaml:"scopes"`
	Claims map[string][]string `yaml:"claims"`
	// When is a CEL expression (see docs/policies.md): on an allow rule a
	// requirement like Scopes and Claims, on a deny rule a narrowing of
	// what the rule matches.
	When string `yaml:"when"`
	// AuthZEN delegates the decision to an AuthZEN 1.0 policy decision
	// point (allow rules only): the call is allowed when it says so.
	AuthZEN *RuleAuthZEN `yaml:"authzen"`
	// Action is allow (default: allow when the requirements hold) or deny.
	Action string `yaml:"action"`
	// Limits count the calls this rule allowed.
	Limits []RateLimit `yaml:"limits"`
}

// RuleAuthZEN is a rule's policy decision point.
type RuleAuthZEN struct {
	// Endpoint is the Access Evaluation URL (.../access/v1/evaluation).
	Endpoint string `yaml:"endpoint"`
	// ClientAuth: client_secret_basic or none (AuthZEN requests are JSON).
	ClientAuth ExchangeClient `yaml:"client_auth"`
	Timeout    Duration       `yaml:"timeout"`
	CacheTTL   Duration       `yaml:"cache_ttl"`
	// Arguments are the tool arguments sent in the request's context.
	Arguments []string `yaml:"arguments"`
}

// ProtectedResource is the route's RFC 9728 metadata document, served at
// /.well-known/oauth-protected-resource[path] without a token.
type ProtectedResource struct {
	Disabled              bool     `yaml:"disabled"`
	Resource              string   `yaml:"resource"`
	AuthorizationServers  []string `yaml:"authorization_servers"`
	ScopesSupported       []string `yaml:"scopes_supported"`
	ResourceName          string   `yaml:"resource_name"`
	ResourceDocumentation string   `yaml:"resource_documentation"`
}

// Values of Route.SenderConstrained.
const (
	SenderDPoP = "dpop"
	SenderMTLS = "mtls"
)

// Credentials names where else than Authorization: Bearer a token may come from.
type Credentials struct {
	Header string `yaml:"header"`
	Cookie string `yaml:"cookie"`
}

// ClaimHeader copies a claim into an upstream request header.
type ClaimHeader struct {
	Claim  string `yaml:"claim"`
	Header string `yaml:"header"`
}

// Cache bounds the verdict cache.
type Cache struct {
	MaxEntries  int      `yaml:"max_entries"`
	NegativeTTL Duration `yaml:"negative_ttl"`
}

// Identity names the claims and headers that carry who the caller is.
type Identity struct {
	UserClaim     string `yaml:"user_claim"`
	SessionClaim  string `yaml:"session_claim"`
	UserHeader    string `yaml:"user_header"`
	SessionHeader string `yaml:"session_header"`
	// SessionSources is where the session comes from, in order, the first
	// that names one winning (docs/sessions.md): "claim:<name>",
	// "mcp-session-id", "a2a-context-id", "default". The request's ids are
	// used only once session binding accepted them. Default: claim
	// session_claim, claim sid, mcp-session-id, a2a-context-id, default.
	SessionSources []string `yaml:"session_sources"`
	// DefaultSession is the session of a request no other source names
	// (the "default" source); empty: none.
	DefaultSession string `yaml:"default_session"`
	// MaxHeaderValue bounds a header value built from a claim.
	MaxHeaderValue int `yaml:"max_header_value"`
	// SafeValues: "path-segment" makes the user and session header values
	// safe single path segments (docs/identity.md); "any" (the default with
	// a configuration file) sets them as the claims say.
	SafeValues string `yaml:"safe_values"`
	// UnsafeValues is what path-segment does with a value that is not
	// one: "refuse" (401, the default) or "encode" (reversibly, "~" and
	// base64url).
	UnsafeValues string `yaml:"unsafe_values"`
}

// Session sources (Identity.SessionSources).
const (
	SessionSourceClaim   = "claim:" // followed by the claim's name
	SessionSourceMCP     = "mcp-session-id"
	SessionSourceA2A     = "a2a-context-id"
	SessionSourceDefault = "default"
)

// Identity value policies.
const (
	SafeValuesAny         = "any"
	SafeValuesPathSegment = "path-segment"
	UnsafeRefuse          = "refuse"
	UnsafeEncode          = "encode"
)

// DefaultElicitationsPerSubject bounds one user's pending elicitations
// (and completed consents) where elicitations.max_per_subject is left
// empty.
const DefaultElicitationsPerSubject = 100

// Defaults applied where a field is left empty.
const (
	DefaultMaxEntries     = 100_000
	DefaultNegativeTTL    = 10 * time.Second
	DefaultUserClaim      = "sub"
	DefaultSessionClaim   = "session_id"
	DefaultUserHeader     = "x-user-id"
	DefaultSessionHeader  = "x-session-id"
	DefaultMaxHeaderValue = 1024
	DefaultLeeway         = 30 * time.Second
	DefaultSessions       = 100_000
	DefaultSessionIdle    = time.Hour
	DefaultPerSubject     = 256
	DefaultMaxDepth       = 8
	DefaultMaxConcurrent  = 1024
	DefaultCheckDeadline  = time.Second
	DefaultMaxWaiting     = 64
	DefaultToolsHeader    = "x-extauthz-tools"
	DefaultToolsHeaderTTL = 5 * time.Minute
	// MaxToolsHeaderTools bounds tools_header.tools: the token travels in a
	// header, and forward-auth proxies keep the authorization answer's
	// headers in one buffer (nginx proxy_buffer_size, 4 or 8 KiB).
	MaxToolsHeaderTools = 256
)

// Duration is a time.Duration written as "30s", "5m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		// A TypeError lets the decoder go on and report every other
		// problem in the file too.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %q (want a number with a unit, such as 30s or 5m)", n.Line, s)}}
	}
	*d = Duration(v)
	return nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Parse strictly decodes, defaults and validates a YAML document. Every
// problem found is returned at once, joined.
func Parse(b []byte) (*File, error) {
	f, err := ParseAll(b)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// ParseAll is Parse, but when the document decodes and only validation
// fails it returns the decoded file with the error, so that a caller can
// go on looking for more problems (validate checks the files it names).
func ParseAll(b []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			errs := make([]error, 0, len(te.Errors))
			for _, e := range te.Errors {
				errs = append(errs, typeError(e))
			}
			return nil, errors.Join(errs...)
		}
		return nil, syntaxError(b, err)
	}
	var src yaml.Node
	if yaml.Unmarshal(b, &src) == nil {
		f.src = &src
	}
	f.applyDefaults()
	if err := f.Validate(); err != nil {
		return &f, withLines(b, err)
	}
	return &f, nil
}

func (f *File) applyDefaults() {
	if f.Cache.MaxEntries == 0 {
		f.Cache.MaxEntries = DefaultMaxEntries
	}
	if f.Cache.NegativeTTL == 0 {
		f.Cache.NegativeTTL = Duration(DefaultNegativeTTL)
	}
	if f.Sessions.MaxEntries == 0 {
		f.Sessions.MaxEntries = DefaultSessions
	}
	if f.Sessions.MaxPerSubject == 0 {
		f.Sessions.MaxPerSubject = min(DefaultPerSubject, f.Sessions.MaxEntries)
	}
	if f.Sessions.IdleTimeout == 0 {
		f.Sessions.IdleTimeout = Duration(DefaultSessionIdle)
	}
	if f.Limits.MaxConcurrentChecks == 0 {
		f.Limits.MaxConcurrentChecks = DefaultMaxConcurrent
	}
	if f.Limits.OverloadStatus == 0 {
		f.Limits.OverloadStatus = 503
	}
	if f.Limits.CheckDeadline == 0 {
		f.Limits.CheckDeadline = Duration(DefaultCheckDeadline)
	}
	if f.Limits.MaxWaitingPerDependency == 0 {
		f.Limits.MaxWaitingPerDependency = DefaultMaxWaiting
	}
	if f.Elicitations.MaxEntries == 0 {
		f.Elicitations.MaxEntries = 10_000
	}
	if f.Elicitations.MaxPerSubject == 0 {
		f.Elicitations.MaxPerSubject = min(DefaultElicitationsPerSubject, f.Elicitations.MaxEntries)
	}
	if f.Elicitations.TTL == 0 {
		f.Elicitations.TTL = Duration(10 * time.Minute)
	}
	setDefault(&f.Lineage.Preset, "default")
	if f.Lineage.MaxDepth == 0 {
		f.Lineage.MaxDepth = DefaultMaxDepth
	}
	id := &f.Identity
	setDefault(&id.UserClaim, DefaultUserClaim)
	setDefault(&id.SessionClaim, DefaultSessionClaim)
	setDefault(&id.UserHeader, DefaultUserHeader)
	setDefault(&id.SessionHeader, DefaultSessionHeader)
	id.UserHeader = strings.ToLower(id.UserHeader)
	id.SessionHeader = strings.ToLower(id.SessionHeader)
	if len(id.SessionSources) == 0 {
		id.SessionSources = []string{SessionSourceClaim + id.SessionClaim}
		if id.SessionClaim != "sid" {
			id.SessionSources = append(id.SessionSources, SessionSourceClaim+"sid")
		}
		id.SessionSources = append(id.SessionSources, SessionSourceMCP, SessionSourceA2A, SessionSourceDefault)
	}
	if id.MaxHeaderValue == 0 {
		id.MaxHeaderValue = DefaultMaxHeaderValue
	}
	setDefault(&id.SafeValues, SafeValuesAny)
	setDefault(&id.UnsafeValues, UnsafeRefuse)
	for i := range f.Issuers {
		if f.Issuers[i].Leeway == 0 {
			f.Issuers[i].Leeway = Duration(DefaultLeeway)
		}
	}
	for i := range f.Routes {
		r := &f.Routes[i]
		for j := range r.ClaimHeaders {
			r.ClaimHeaders[j].Header = strings.ToLower(r.ClaimHeaders[j].Header)
		}
		r.Credentials.Header = strings.ToLower(r.Credentials.Header)
		if th := r.ToolsHeader; th != nil {
			setDefault(&th.Header, DefaultToolsHeader)
			th.Header = strings.ToLower(th.Header)
			if th.TTL == 0 {
				th.TTL = Duration(DefaultToolsHeaderTTL)
			}
		}
		setDefault(&r.Protocol, jsonrpc.ProtocolUnknown.String())
		setDefault(&r.DefaultAction, "allow")
		for j := range r.Rules {
			setDefault(&r.Rules[j].Action, "allow")
		}
		for j := range r.Hosts {
			r.Hosts[j] = strings.ToLower(r.Hosts[j])
		}
	}
}

// line returns the line of the value at path in the source document (keys
// of mappings and indexes of sequences), 0 when unknown.
func (f *File) line(path ...any) int {
	if f.src == nil || len(f.src.Content) == 0 {
		return 0
	}
	n := f.src.Content[0]
	for _, step := range path {
		var next *yaml.Node
		switch k := step.(type) {
		case string:
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
					}
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				next = n.Content[k]
			}
		}
		if next == nil {
			return 0
		}
		n = next
	}
	return n.Line
}

func setDefault(s *string, v string) {
	if *s == "" {
		*s = v
	}
}
