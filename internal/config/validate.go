package config

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Algorithms the service verifies.
var (
	hmacAlgorithms       = []string{"HS256", "HS384", "HS512"}
	asymmetricAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// IsHMAC reports whether alg is one of the HMAC algorithms.
func IsHMAC(alg string) bool { return contains(hmacAlgorithms, alg) }

// Validate reports every problem in f at once.
func (f *File) Validate() error {
	var v validator
	if len(f.Issuers) == 0 {
		v.add("issuers: at least one issuer is required")
	}
	if len(f.Routes) == 0 {
		v.add("routes: at least one route is required")
	}
	issuers := map[string]bool{}
	for i, is := range f.Issuers {
		p := fmt.Sprintf("issuers[%d]", i)
		if is.Name != "" {
			p = fmt.Sprintf("issuers[%d] (%s)", i, is.Name)
		}
		v.issuer(p, is)
		if is.Name != "" {
			if issuers[is.Name] {
				v.add("%s: duplicate issuer name", p)
			}
			issuers[is.Name] = true
		}
	}
	routes := map[string]bool{}
	defaults := 0
	for i, r := range f.Routes {
		p := fmt.Sprintf("routes[%d]", i)
		if r.Name != "" {
			p = fmt.Sprintf("routes[%d] (%s)", i, r.Name)
		}
		v.route(p, r, issuers, f.Identity)
		if r.Protocol == plainHTTP && len(r.Rules) > 0 {
			// protocol: http is the one way to opt out of reading bodies, so
			// a rule there could never apply.
			v.add("line %d: %s.protocol: http reads no JSON-RPC body, so its rules could never apply: remove them or the protocol", f.line("routes", i, "protocol"), p)
		}
		if r.Name != "" {
			if routes[r.Name] {
				v.add("%s: duplicate route name", p)
			}
			routes[r.Name] = true
		}
		if r.Default {
			defaults++
		}
	}
	if defaults > 1 {
		v.add("routes: at most one route may be the default")
	}
	id := f.Identity
	v.headerName("identity.user_header", id.UserHeader)
	v.headerName("identity.session_header", id.SessionHeader)
	if id.UserHeader == id.SessionHeader {
		v.add("identity: user_header and session_header must differ")
	}
	if id.MaxHeaderValue < 0 || id.MaxHeaderValue > 8192 {
		v.add("identity.max_header_value: must be between 1 and 8192")
	}
	if f.Sessions.MaxEntries < 0 || f.Sessions.IdleTimeout < 0 {
		v.add("sessions: max_entries and idle_timeout must not be negative")
	}
	v.identity(f)
	v.lineage(f.Lineage, f.Routes)
	if rd := f.Redis; len(rd.Addrs) > 0 {
		if len(f.Exchanges) > 0 && rd.EncryptionKeyEnv == "" {
			v.add("redis.encryption_key_env: required with exchanges: Redis never holds a usable token in clear")
		}
		if f.Elicitations.StateKeyEnv == "" && f.Elicitations.StateKeyFile == "" && elicits(f.Routes) {
			v.add("elicitations.state_key_env or state_key_file: required with redis and an authorize_url: every replica must verify the states the others sign")
		}
		if rd.Cluster && rd.MasterName != "" {
			v.add("redis: cluster and master_name (Sentinel) exclude each other")
		}
	}
	if f.Elicitations.StateKeyEnv != "" && f.Elicitations.StateKeyFile != "" {
		v.add("elicitations: state_key_env and state_key_file exclude each other")
	}
	stss := map[string]bool{}
	for i, x := range f.Exchanges {
		p := fmt.Sprintf("exchanges[%d]", i)
		if x.Name == "" {
			v.add("%s: name is required", p)
		} else if stss[x.Name] {
			v.add("%s: duplicate name %q", p, x.Name)
		}
		stss[x.Name] = true
		if (x.TokenEndpoint == "") == (x.Issuer == "") {
			v.add("%s: exactly one of token_endpoint and issuer (discovery) is required", p)
		}
		if x.TokenEndpoint != "" {
			v.url(p+".token_endpoint", x.TokenEndpoint)
		}
		if x.Issuer != "" {
			v.url(p+".issuer", x.Issuer)
		}
		c := x.ClientAuth
		switch c.Method {
		case "", "client_secret_basic", "client_secret_post", "private_key_jwt", "none":
		default:
			v.add("%s.client_auth.method: %q is not client_secret_basic, client_secret_post, private_key_jwt or none", p, c.Method)
		}
		if c.Method == "private_key_jwt" && c.PrivateKeyFile == "" {
			v.add("%s.client_auth: private_key_jwt needs private_key_file", p)
		}
		if (c.Method == "client_secret_basic" || c.Method == "client_secret_post") && c.ClientSecretEnv == "" && c.ClientSecretFile == "" {
			v.add("%s.client_auth: %s needs client_secret_env or client_secret_file", p, c.Method)
		}
	}
	for i, r := range f.Routes {
		if r.Exchange == nil {
			continue
		}
		p := fmt.Sprintf("routes[%d] (%s).exchange", i, r.Name)
		if !stss[r.Exchange.STS] {
			v.add("%s.sts: unknown exchange %q", p, r.Exchange.STS)
		}
		if len(r.Exchange.Audience) == 0 && len(r.Exchange.Resource) == 0 {
			v.add("%s: audience or resource is required", p)
		}
		consent := false
		for _, t := range r.Exchange.Tools {
			consent = consent || t.Consent
			if len(t.Names) == 0 {
				v.add("%s.tools: each override needs names", p)
			}
		}
		if r.Exchange.AuthorizeURL != "" {
			v.url(p+".authorize_url", r.Exchange.AuthorizeURL)
		} else if consent {
			v.add("%s.authorize_url: required when a tool needs consent", p)
		}
		if r.ForwardAuthorization {
			v.add("routes[%d] (%s): forward_authorization cannot be combined with exchange: the inbound token never reaches the upstream", i, r.Name)
		}
	}
	if r := f.Tracing.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		v.add("tracing.sample_ratio: must be between 0 and 1")
	}
	if f.Limits.MaxConcurrentChecks < 0 {
		v.add("limits.max_concurrent_checks: must not be negative")
	}
	if d := f.Limits.CheckDeadline.D(); d < 0 || d > time.Minute {
		v.add("limits.check_deadline: %s is not between 0 and 1m", d)
	}
	if f.Limits.MaxWaitingPerDependency < 0 {
		v.add("limits.max_waiting_per_dependency: must not be negative")
	}
	if s := f.Limits.OverloadStatus; s != 429 && (s < 500 || s > 599) && s != 403 {
		v.add("limits.overload_status: %d is not 403, 429 or 5xx", s)
	}
	if f.Cache.MaxEntries < 0 {
		v.add("cache.max_entries: must be positive")
	}
	if f.Cache.NegativeTTL < 0 {
		v.add("cache.negative_ttl: must not be negative")
	}
	return v.err()
}

type validator struct{ errs []error }

func (v *validator) add(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

func (v *validator) err() error { return errors.Join(v.errs...) }

func (v *validator) issuer(p string, is Issuer) {
	if is.Name == "" {
		v.add("%s: name is required", p)
	}
	sources := 0
	for _, set := range []bool{is.SecretEnv != "" || is.SecretFile != "" || is.Secret != "", is.JWKSURL != "", is.JWKSFile != "", is.Discovery} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		v.add("%s: exactly one key source is required (secret_env, secret_file or secret; jwks_url; jwks_file; discovery)", p)
	}
	if n := btoi(is.SecretEnv != "") + btoi(is.SecretFile != "") + btoi(is.Secret != ""); n > 1 {
		v.add("%s: give the HMAC secret once (secret_env, secret_file or secret)", p)
	}
	hmac := is.SecretEnv != "" || is.SecretFile != "" || is.Secret != ""
	for _, alg := range is.Algorithms {
		switch {
		case strings.EqualFold(alg, "none"):
			v.add("%s: algorithm none is never accepted", p)
		case contains(hmacAlgorithms, alg):
			if !hmac {
				v.add("%s: HMAC algorithm %s needs an HMAC secret, not a public key source", p, alg)
			}
		case contains(asymmetricAlgorithms, alg):
			if hmac {
				v.add("%s: algorithm %s needs a public key source (jwks_url, jwks_file or discovery), not a secret", p, alg)
			}
		default:
			v.add("%s: unknown algorithm %q", p, alg)
		}
	}
	if is.JWKSURL != "" {
		v.url(p+".jwks_url", is.JWKSURL)
	}
	if is.Discovery {
		if is.Issuer == "" {
			v.add("%s: discovery needs issuer (the URL discovery starts from)", p)
		} else {
			v.url(p+".issuer", is.Issuer)
		}
	}
	if is.Leeway < 0 || is.Leeway.D().Hours() > 1 {
		v.add("%s.leeway: must be between 0 and 1h", p)
	}
	if is.RefreshInterval < 0 || is.UnknownKIDInterval < 0 {
		v.add("%s: intervals must not be negative", p)
	}
}

func (v *validator) route(p string, r Route, issuers map[string]bool, id Identity) {
	if r.Name == "" {
		v.add("%s: name is required", p)
	}
	if len(r.Issuers) == 0 {
		v.add("%s.issuers: at least one issuer is required", p)
	}
	for _, name := range r.Issuers {
		if !issuers[name] {
			v.add("%s.issuers: unknown issuer %q", p, name)
		}
	}
	for _, h := range r.Hosts {
		host := strings.TrimPrefix(h, "*.")
		if host == "" || strings.ContainsAny(host, "*/ ") {
			v.add("%s.hosts: %q is neither a host name nor *.suffix", p, h)
		}
	}
	if r.PathPrefix != "" && !strings.HasPrefix(r.PathPrefix, "/") {
		v.add("%s.path_prefix: must start with /", p)
	}
	for _, pp := range r.PublicPaths {
		if !strings.HasPrefix(pp, "/") || strings.Contains(strings.TrimSuffix(pp, "*"), "*") {
			v.add("%s.public_paths: %q must start with / and may only end in *", p, pp)
		}
	}
	if r.ResourceMetadata != "" {
		v.url(p+".resource_metadata", r.ResourceMetadata)
	}
	if r.Credentials.Header != "" {
		v.headerName(p+".credentials.header", r.Credentials.Header)
	}
	if r.Credentials.Cookie != "" && !isToken(r.Credentials.Cookie) {
		v.add("%s.credentials.cookie: %q is not a valid cookie name", p, r.Credentials.Cookie)
	}
	if _, ok := jsonrpc.ParseProtocol(r.Protocol); !ok {
		v.add("%s.protocol: %q is not one of auto, mcp, a2a, http", p, r.Protocol)
	}
	if r.DefaultAction != "allow" && r.DefaultAction != "deny" {
		v.add("%s.default_action: %q is neither allow nor deny", p, r.DefaultAction)
	}
	if r.Protocol == plainHTTP && r.MCP.TokenInMeta {
		v.add("%s: mcp settings need a JSON-RPC protocol, not http", p)
	}
	switch r.RequestBody {
	case "", RequestBodySent:
	case RequestBodyNone:
		if (len(r.Rules) > 0 || r.DefaultAction == "deny") && !r.UpstreamValidatesMCPHeaders {
			v.add("%s: rules need the call the upstream will execute, but request_body is none: send the body to the service "+
				"(Envoy http_service with_request_body, Traefik forwardBody, nginx with the njs recipe of docs/forward-auth.md) and drop request_body, "+
				"or set upstream_validates_mcp_headers: true if the upstream refuses calls whose Mcp-Method and Mcp-Name disagree with the body (MCP 2026-07-28 servers)", p)
		}
	default:
		v.add("%s.request_body: %q is neither sent nor none", p, r.RequestBody)
	}
	for i, rule := range r.Rules {
		q := fmt.Sprintf("%s.rules[%d]", p, i)
		if rule.Name != "" {
			q = fmt.Sprintf("%s.rules[%d] (%s)", p, i, rule.Name)
		}
		if rule.Action != "allow" && rule.Action != "deny" {
			v.add("%s.action: %q is neither allow nor deny", q, rule.Action)
		}
		for _, g := range append(append([]string{}, rule.Methods...), rule.Names...) {
			if _, err := path.Match(g, ""); err != nil {
				v.add("%s: bad glob %q", q, g)
			}
		}
		for claim, values := range rule.Claims {
			if claim == "" || len(values) == 0 {
				v.add("%s.claims: %q needs at least one value", q, claim)
			}
		}
	}
	pr := r.ProtectedResource
	if pr.Resource != "" {
		v.url(p+".protected_resource.resource", pr.Resource)
	}
	for _, as := range pr.AuthorizationServers {
		v.url(p+".protected_resource.authorization_servers", as)
	}
	seen := map[string]bool{id.UserHeader: true, id.SessionHeader: true}
	for i, ch := range r.ClaimHeaders {
		q := fmt.Sprintf("%s.claim_headers[%d]", p, i)
		if ch.Claim == "" {
			v.add("%s.claim: is required", q)
		}
		v.headerName(q+".header", ch.Header)
		if seen[ch.Header] {
			v.add("%s.header: %q is already set by the service", q, ch.Header)
		}
		seen[ch.Header] = true
	}
}

// headerName refuses names Envoy would reject or that must not be set by
// this service: pseudo-headers, host, authorization and Envoy's own.
func (v *validator) headerName(p, name string) {
	switch {
	case name == "":
		v.add("%s: header name is required", p)
	case !isToken(name):
		v.add("%s: %q is not a valid header name", p, name)
	case name == "host" || name == "authorization" || name == "cookie" || strings.HasPrefix(name, "x-envoy-"):
		v.add("%s: %q cannot be used", p, name)
	}
}

func (v *validator) url(p, s string) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		v.add("%s: %q is not an http(s) URL", p, s)
	}
}

// isToken reports whether s is an RFC 9110 token (header and cookie names).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (v *validator) lineage(l Lineage, routes []Route) {
	if l.Preset != "default" && l.Preset != "kagent" {
		v.add("lineage.preset: %q is neither default nor kagent", l.Preset)
	}
	for name, h := range map[string]string{"root": l.Headers.Root, "parent": l.Headers.Parent, "depth": l.Headers.Depth, "actor_chain": l.Headers.ActorChain, "signed": l.Headers.Signed} {
		if h != "" {
			v.headerName("lineage.headers."+name, strings.ToLower(h))
		}
	}
	if l.MaxDepth < 0 || l.MaxDepth > 64 {
		v.add("lineage.max_depth: must be between 1 and 64")
	}
	signs := false
	for i, r := range routes {
		if r.Lineage.MaxDepth < 0 || r.Lineage.MaxDepth > 64 {
			v.add("routes[%d].lineage.max_depth: must be between 1 and 64", i)
		}
		signs = signs || r.Lineage.Sign
	}
	if signs && l.Signing.KeyFile == "" {
		v.add("lineage.signing.key_file: required when a route signs lineage")
	}
	if l.Signing.KeyFile != "" && l.Signing.Issuer == "" {
		v.add("lineage.signing.issuer: required with a key file")
	}
	for i, p := range l.Peers {
		if p.Issuer == "" || (p.JWKSURL == "") == (p.JWKSFile == "") {
			v.add("lineage.peers[%d]: needs issuer and exactly one of jwks_url, jwks_file", i)
		}
		if p.JWKSURL != "" {
			v.url(fmt.Sprintf("lineage.peers[%d].jwks_url", i), p.JWKSURL)
		}
	}
}

// elicits reports whether a route may begin elicitations.
func elicits(routes []Route) bool {
	for _, r := range routes {
		if r.Exchange != nil && r.Exchange.AuthorizeURL != "" {
			return true
		}
	}
	return false
}
