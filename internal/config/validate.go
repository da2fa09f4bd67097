package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/extauthz/extauthz/internal/authzen"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/oauthclient"
	"github.com/extauthz/extauthz/internal/policy"
)

// policyEnv compiles rule expressions for validation; the pipeline compiles
// them again in its own environment with the same declarations.
var policyEnv = sync.OnceValue(func() *policy.Env {
	env, err := policy.NewEnv(policy.Options{})
	if err != nil {
		panic("policy environment: " + err.Error()) // declarations are static
	}
	return env
})

// Algorithms the service verifies.
var (
	hmacAlgorithms       = []string{"HS256", "HS384", "HS512"}
	asymmetricAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)

// IsHMAC reports whether alg is one of the HMAC algorithms.
func IsHMAC(alg string) bool { return contains(hmacAlgorithms, alg) }

// Validate reports every problem in f at once, section by section.
func (f *File) Validate() error {
	var v validator
	v.required(f)
	issuers := v.issuers(f.Issuers)
	v.routes(f, issuers)
	v.routeIssuerKinds(f)
	v.identityHeaders(f.Identity)
	v.sessions(f.Sessions)
	v.routeTasks(f)
	v.identity(f)
	v.lineage(f.Lineage, f.Routes)
	v.redis(f)
	v.elicitations(f.Elicitations)
	stss := v.exchanges(f.Exchanges)
	v.routeExchanges(f.Routes, stss)
	v.tracing(f.Tracing)
	v.limits(f.Limits)
	v.cache(f.Cache)
	v.audit(f.Audit)
	v.dpop(f.DPoP)
	return v.err()
}

// required checks the sections no file can do without.
func (v *validator) required(f *File) {
	if len(f.Issuers) == 0 {
		v.add("issuers: at least one issuer is required")
	}
	if len(f.Routes) == 0 {
		v.add("routes: at least one route is required")
	}
}

// issuers checks each issuer and returns the set of their names.
func (v *validator) issuers(list []Issuer) map[string]bool {
	names := map[string]bool{}
	for i, is := range list {
		p := fmt.Sprintf("issuers[%d]", i)
		if is.Name != "" {
			p = fmt.Sprintf("issuers[%d] (%s)", i, is.Name)
		}
		v.issuer(p, is)
		if is.Name != "" {
			if names[is.Name] {
				v.add("%s: duplicate issuer name", p)
			}
			names[is.Name] = true
		}
	}
	return names
}

// routes checks each route against the issuers, names and the default.
func (v *validator) routes(f *File, issuers map[string]bool) {
	names := map[string]bool{}
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
			if names[r.Name] {
				v.add("%s: duplicate route name", p)
			}
			names[r.Name] = true
		}
		if r.Default {
			defaults++
		}
	}
	if defaults > 1 {
		v.add("routes: at most one route may be the default")
	}
}

// identityHeaders checks the headers that carry the identity upstream.
func (v *validator) identityHeaders(id Identity) {
	v.headerName("identity.user_header", id.UserHeader)
	v.headerName("identity.session_header", id.SessionHeader)
	if id.UserHeader == id.SessionHeader {
		v.add("identity: user_header and session_header must differ")
	}
	if id.MaxHeaderValue < 0 || id.MaxHeaderValue > 8192 {
		v.add("identity.max_header_value: must be between 1 and 8192")
	}
}

func (v *validator) sessions(s Sessions) {
	if s.MaxEntries < 0 || s.IdleTimeout < 0 {
		v.add("sessions: max_entries and idle_timeout must not be negative")
	}
}

// routeTasks refuses task ownership where it cannot work: on a route
// whose front end withholds the body, a task operation is read only from
// Mcp-Method, which A2A clients never send. Their tasks would be bound to
// nobody and served to anybody holding the id, while the operator believes
// them bound to their creator. An mcp route is only warned about
// (configcheck): MCP 2026-07-28 clients name their task operations in
// Mcp-Method, which is then refused without the body.
func (v *validator) routeTasks(f *File) {
	if !f.Sessions.OwnsTasks() {
		return
	}
	for i, r := range f.Routes {
		if r.RequestBody != RequestBodyNone || r.Protocol == plainHTTP || r.Protocol == jsonrpc.ProtocolMCP.String() {
			continue
		}
		v.add("routes[%d] (%s): sessions.task_ownership binds A2A tasks to their creator by reading the task id from the body, but request_body is none "+
			"and A2A clients send no Mcp-Method, so their tasks would be bound to nobody. "+
			"Send the body to the service (Envoy http_service with_request_body, Traefik forwardBody, nginx with the njs recipe of docs/forward-auth.md) and drop request_body, "+
			"set protocol: mcp (or http) if the route carries no A2A, or set sessions.task_ownership: false to leave tasks unbound on every route", i, r.Name)
	}
}

// redis checks what sharing state between replicas requires of the rest
// of the file.
func (v *validator) redis(f *File) {
	rd := f.Redis
	if len(rd.Addrs) == 0 {
		return
	}
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

func (v *validator) elicitations(e Elicitations) {
	if e.MaxPerSubject < 0 || e.MaxPerSubject > max(e.MaxEntries, 1) {
		v.add("elicitations.max_per_subject: must be between 1 and max_entries")
	}
	if e.StateKeyEnv != "" && e.StateKeyFile != "" {
		v.add("elicitations: state_key_env and state_key_file exclude each other")
	}
}

// exchanges checks each token exchange and returns the set of their names.
func (v *validator) exchanges(list []Exchange) map[string]bool {
	names := map[string]bool{}
	for i, x := range list {
		p := fmt.Sprintf("exchanges[%d]", i)
		if x.Name == "" {
			v.add("%s: name is required", p)
		} else if names[x.Name] {
			v.add("%s: duplicate name %q", p, x.Name)
		}
		names[x.Name] = true
		if (x.TokenEndpoint == "") == (x.Issuer == "") {
			v.add("%s: exactly one of token_endpoint and issuer (discovery) is required", p)
		}
		if x.CachePerSubject < 0 {
			v.add("%s.cache_per_subject: must not be negative", p)
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
	return names
}

// routeExchanges checks the routes' use of the exchanges.
func (v *validator) routeExchanges(routes []Route, stss map[string]bool) {
	for i, r := range routes {
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
		if r.MCP.TokenInMeta {
			// The token in the body goes upstream as sent: the service
			// cannot swap it for the exchanged one.
			v.add("routes[%d] (%s): mcp.token_in_meta cannot be combined with exchange: the inbound token never reaches the upstream, and one in the body would", i, r.Name)
		}
	}
}

func (v *validator) tracing(t Tracing) {
	if r := t.SampleRatio; r != nil && (*r < 0 || *r > 1) {
		v.add("tracing.sample_ratio: must be between 0 and 1")
	}
}

func (v *validator) limits(l Limits) {
	if l.MaxConcurrentChecks < 0 {
		v.add("limits.max_concurrent_checks: must not be negative")
	}
	if d := l.CheckDeadline.D(); d < 0 || d > time.Minute {
		v.add("limits.check_deadline: %s is not between 0 and 1m", d)
	}
	if l.MaxWaitingPerDependency < 0 {
		v.add("limits.max_waiting_per_dependency: must not be negative")
	}
	if s := l.OverloadStatus; s != 429 && (s < 500 || s > 599) && s != 403 {
		v.add("limits.overload_status: %d is not 403, 429 or 5xx", s)
	}
}

func (v *validator) dpop(d DPoP) {
	if a := d.MaxAge.D(); a < 0 || a > 10*time.Minute {
		v.add("dpop.max_age: %s is not between 0 and 10m", a)
	}
	if l := d.Leeway.D(); l < 0 || l > time.Minute {
		v.add("dpop.leeway: %s is not between 0 and 1m", l)
	}
	if d.ReplayEntries < 0 {
		v.add("dpop.replay_entries: must not be negative")
	}
}

func (v *validator) cache(c Cache) {
	if c.MaxEntries < 0 {
		v.add("cache.max_entries: must be positive")
	}
	if c.NegativeTTL < 0 {
		v.add("cache.negative_ttl: must not be negative")
	}
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
	if n := btoi(is.Introspection != nil) + btoi(is.APIKeys != nil) + btoi(is.Peer != nil); n > 1 {
		v.add("%s: give at most one of introspection, api_keys and peer", p)
		return
	}
	sources := 0
	for _, set := range []bool{is.SecretEnv != "" || is.SecretFile != "" || is.Secret != "", is.JWKSURL != "", is.JWKSFile != "", is.Discovery} {
		if set {
			sources++
		}
	}
	switch is.Kind() {
	case "introspection":
		v.introspection(p, is, sources)
		return
	case "api_keys", "peer":
		if sources > 0 || len(is.Algorithms) > 0 {
			v.add("%s: a %s issuer has no key source or algorithms", p, strings.ReplaceAll(is.Kind(), "_", " "))
		}
		if is.APIKeys != nil {
			v.apiKeys(p+".api_keys", *is.APIKeys)
		} else {
			v.peer(p+".peer", *is.Peer)
		}
		return
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

// introspection checks an introspection issuer; sources counts its JWT key
// sources, used only to verify RFC 9701 answers.
func (v *validator) introspection(p string, is Issuer, sources int) {
	in := is.Introspection
	q := p + ".introspection"
	if in.Endpoint != "" {
		v.url(q+".endpoint", in.Endpoint)
	} else if is.Issuer == "" {
		v.add("%s: endpoint, or issuer to discover it from, is required", q)
	}
	if is.Issuer != "" {
		v.url(p+".issuer", is.Issuer)
	}
	c := in.ClientAuth
	switch c.Method {
	case "", "client_secret_basic", "client_secret_post", "private_key_jwt", "none":
	default:
		v.add("%s.client_auth.method: %q is not client_secret_basic, client_secret_post, private_key_jwt or none", q, c.Method)
	}
	if c.Method == "private_key_jwt" && c.PrivateKeyFile == "" {
		v.add("%s.client_auth: private_key_jwt needs private_key_file", q)
	}
	if (c.Method == "client_secret_basic" || c.Method == "client_secret_post") && c.ClientSecretEnv == "" && c.ClientSecretFile == "" {
		v.add("%s.client_auth: %s needs client_secret_env or client_secret_file", q, c.Method)
	}
	if in.Timeout < 0 || in.CacheTTL < 0 {
		v.add("%s: timeout and cache_ttl must not be negative", q)
	}
	if in.JWTResponse {
		if is.Issuer == "" || c.ClientID == "" {
			v.add("%s.jwt_response: needs issuer and client_auth.client_id (the answer's iss and aud)", q)
		}
		if is.JWKSURL == "" && !is.Discovery {
			v.add("%s.jwt_response: needs jwks_url or discovery for the server's keys", q)
		}
	}
	if sources > 0 && !in.JWTResponse {
		v.add("%s: a key source is only used with jwt_response", q)
	}
	if is.SecretEnv != "" || is.SecretFile != "" || is.Secret != "" || is.JWKSFile != "" {
		v.add("%s: only jwks_url or discovery can verify JWT answers", q)
	}
}

func (v *validator) apiKeys(p string, k APIKeys) {
	if k.File == "" {
		v.add("%s.file: required", p)
	}
	if k.Header != "" {
		v.headerName(p+".header", k.Header)
	}
}

func (v *validator) peer(p string, pc Peer) {
	if len(pc.TrustDomains) == 0 {
		v.add("%s.trust_domains: at least one is required", p)
	}
	for i, n := range pc.XFCCFrom {
		if _, err := netip.ParsePrefix(n); err != nil {
			if _, err := netip.ParseAddr(n); err != nil {
				v.add("%s.xfcc_from[%d]: %q is not an address or CIDR", p, i, n)
			}
		}
	}
}

// routeIssuerKinds: a route sends an opaque token to at most one
// introspection endpoint.
func (v *validator) routeIssuerKinds(f *File) {
	kinds := map[string]string{}
	for _, is := range f.Issuers {
		kinds[is.Name] = is.Kind()
	}
	for i, r := range f.Routes {
		n := 0
		for _, name := range r.Issuers {
			if kinds[name] == "introspection" {
				n++
			}
		}
		if n > 1 {
			v.add("routes[%d] (%s).issuers: at most one introspection issuer (an opaque token is sent to one server only)", i, r.Name)
		}
	}
}

func (v *validator) route(p string, r Route, issuers map[string]bool, id Identity) {
	v.routeMatch(p, r, issuers)
	v.routeCredentials(p, r)
	v.routeProtocol(p, r)
	v.routeRules(p, r.Rules)
	v.routeResource(p, r.ProtectedResource)
	v.routeClaimHeaders(p, r.ClaimHeaders, id)
	for i, l := range r.Limits {
		v.rateLimit(fmt.Sprintf("%s.limits[%d]", p, i), l)
	}
	if r.ToolsHeader != nil {
		v.toolsHeader(p, r, id)
	}
}

// toolsHeader checks a route's signed tools header: exact tool names (a
// glob names no tool), a header nobody else sets, a short lifetime.
func (v *validator) toolsHeader(p string, r Route, id Identity) {
	th := r.ToolsHeader
	q := p + ".tools_header"
	if r.Protocol == plainHTTP || r.Protocol == jsonrpc.ProtocolA2A.String() {
		v.add("%s: tools are MCP's: the route's protocol must be mcp or auto, not %s", q, r.Protocol)
	}
	switch n := len(th.Tools); {
	case n == 0:
		v.add("%s.tools: list the names of the tools the route's server offers", q)
	case n > MaxToolsHeaderTools:
		v.add("%s.tools: %d names, at most %d (the token travels in a header)", q, n, MaxToolsHeaderTools)
	}
	seen := make(map[string]bool, len(th.Tools))
	for i, name := range th.Tools {
		switch {
		case !ValidToolName(name):
			v.add("%s.tools[%d]: %q is not a tool name (1 to 128 of A-Z a-z 0-9 _ - .; globs name no tool)", q, i, name)
		case seen[name]:
			v.add("%s.tools[%d]: %q is listed twice", q, i, name)
		}
		seen[name] = true
	}
	v.headerName(q+".header", th.Header)
	if th.Header == id.UserHeader || th.Header == id.SessionHeader || th.Header == strings.ToLower(r.Credentials.Header) {
		v.add("%s.header: %q is already set or read by the service", q, th.Header)
	}
	for _, ch := range r.ClaimHeaders {
		if th.Header == ch.Header {
			v.add("%s.header: %q is already a claim header", q, th.Header)
		}
	}
	if d := time.Duration(th.TTL); d < 10*time.Second || d > time.Hour {
		v.add("%s.ttl: must be between 10s and 1h", q)
	}
}

// ValidToolName reports whether name is an MCP tool name (MCP 2025-11-25:
// 1 to 128 characters of A-Z, a-z, 0-9, underscore, hyphen and dot).
func ValidToolName(name string) bool {
	if len(name) == 0 || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// routeMatch checks the route's name, issuers and what requests it matches.
func (v *validator) routeMatch(p string, r Route, issuers map[string]bool) {
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
}

// routeCredentials checks where the route finds credentials and announces
// its metadata.
func (v *validator) routeCredentials(p string, r Route) {
	if r.ResourceMetadata != "" {
		v.url(p+".resource_metadata", r.ResourceMetadata)
	}
	if r.Credentials.Header != "" {
		v.headerName(p+".credentials.header", r.Credentials.Header)
	}
	if r.Credentials.Cookie != "" && !isToken(r.Credentials.Cookie) {
		v.add("%s.credentials.cookie: %q is not a valid cookie name", p, r.Credentials.Cookie)
	}
}

// routeProtocol checks the protocol and what it needs of the body.
func (v *validator) routeProtocol(p string, r Route) {
	if _, ok := jsonrpc.ParseProtocol(r.Protocol); !ok {
		v.add("%s.protocol: %q is not one of auto, mcp, a2a, http", p, r.Protocol)
	}
	if s := r.SenderConstrained; s != "" && s != SenderDPoP && s != SenderMTLS {
		v.add("%s.sender_constrained: %q is neither dpop nor mtls", p, s)
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
}

func (v *validator) routeRules(p string, rules []Rule) {
	for i, rule := range rules {
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
		if rule.When != "" {
			if _, err := policyEnv().Compile(rule.When); err != nil {
				v.add("%s.when: %v", q, err)
			}
		}
		if z := rule.AuthZEN; z != nil {
			if rule.Action == "deny" {
				v.add("%s.authzen: a deny rule denies without asking; use authzen on an allow rule", q)
			}
			ca := oauthclient.Config{Method: z.ClientAuth.Method, ClientID: z.ClientAuth.ClientID, PrivateKeyFile: z.ClientAuth.PrivateKeyFile}
			if z.ClientAuth.ClientSecretEnv != "" || z.ClientAuth.ClientSecretFile != "" {
				ca.ClientSecret = "set"
			}
			if _, err := (authzen.Config{Endpoint: z.Endpoint, ClientAuth: ca, Timeout: z.Timeout.D()}).Validate(); err != nil {
				v.add("%s.authzen: %v", q, err)
			}
			if z.CacheTTL < 0 {
				v.add("%s.authzen.cache_ttl: must not be negative", q)
			}
		}
		for j, l := range rule.Limits {
			v.rateLimit(fmt.Sprintf("%s.limits[%d]", q, j), l)
		}
	}
}

func (v *validator) routeResource(p string, pr ProtectedResource) {
	if pr.Resource != "" {
		v.url(p+".protected_resource.resource", pr.Resource)
	}
	for _, as := range pr.AuthorizationServers {
		v.url(p+".protected_resource.authorization_servers", as)
	}
}

// routeClaimHeaders checks the headers claims are copied into: none may be
// one the service already sets.
func (v *validator) routeClaimHeaders(p string, headers []ClaimHeader, id Identity) {
	seen := map[string]bool{id.UserHeader: true, id.SessionHeader: true}
	for i, ch := range headers {
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

// RateLimitKeys are the kinds of key a limit counts by.
var RateLimitKeys = []string{"subject", "subject_tool", "client", "root", "principal"}

// rateLimit checks one limit of a route or rule.
func (v *validator) rateLimit(p string, l RateLimit) {
	if !contains(RateLimitKeys, l.Key) {
		v.add("%s.key: %q is not one of %s", p, l.Key, strings.Join(RateLimitKeys, ", "))
	}
	if l.Requests <= 0 {
		v.add("%s.requests: must be at least 1", p)
	}
	switch per := time.Duration(l.Per); {
	case per <= 0:
		v.add("%s.per: a positive interval is required", p)
	case l.Requests > 0 && per/time.Duration(l.Requests) < time.Microsecond:
		v.add("%s: %d requests per %s is more than one a microsecond", p, l.Requests, per)
	case per > 24*time.Hour:
		v.add("%s.per: %s is longer than 24h", p, per)
	}
	if l.Burst < 0 {
		v.add("%s.burst: must not be negative", p)
	}
	if l.Action != "" && l.Action != "deny" {
		v.add("%s.action: %q is not deny", p, l.Action)
	}
}

// audit checks the audit section; an empty sink turns the log off and
// leaves nothing else to set.
func (v *validator) audit(a Audit) {
	if a.Sink == "" {
		if a.Decisions != "" || a.SampleAllowed != nil || len(a.LogArguments) > 0 || a.File.Path != "" || a.QueueSize != 0 {
			v.add("audit.sink: required when any other audit key is set (stdout, file or otlp)")
		}
		return
	}
	switch a.Sink {
	case "stdout", "otlp":
	case "file":
		if a.File.Path == "" {
			v.add("audit.file.path: required with sink: file")
		}
	default:
		v.add("audit.sink: %q is not one of stdout, file, otlp", a.Sink)
	}
	if a.Decisions != "" && a.Decisions != "all" && a.Decisions != "denied" {
		v.add("audit.decisions: %q is neither all nor denied", a.Decisions)
	}
	if s := a.SampleAllowed; s != nil && !(*s >= 0 && *s <= 1) {
		v.add("audit.sample_allowed: must be between 0 and 1")
	}
	if len(a.LogArguments) > 64 {
		v.add("audit.log_arguments: %d paths, at most 64", len(a.LogArguments))
	}
	for i, path := range a.LogArguments {
		if path == "" || strings.HasPrefix(path, ".") || strings.HasSuffix(path, ".") || strings.Contains(path, "..") {
			v.add("audit.log_arguments[%d]: %q is not a dotted path of argument names", i, path)
		}
	}
	if a.QueueSize < 0 || a.File.MaxSize < 0 || a.File.MaxBackups < 0 {
		v.add("audit: queue_size, file.max_size and file.max_backups must not be negative")
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
	for i, r := range routes {
		if r.ToolsHeader != nil && l.Signing.KeyFile == "" {
			v.add("routes[%d] (%s).tools_header: needs lineage.signing.key_file: the header is signed with the lineage key", i, r.Name)
		}
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
