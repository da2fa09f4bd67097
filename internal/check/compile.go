package check

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/credential"
	"github.com/extauthz/extauthz/internal/dpop"
	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/lineage"
	"github.com/extauthz/extauthz/internal/policy"
	"github.com/extauthz/extauthz/internal/ratelimit"
	"github.com/extauthz/extauthz/internal/route"
	"github.com/extauthz/extauthz/internal/secrets"
	"github.com/extauthz/extauthz/internal/shared"
)

// TokenVerifier verifies a bearer token for a route's issuers and audiences.
// *jwtauth.Verifier is the implementation; tests substitute counting ones.
type TokenVerifier interface {
	Verify(ctx context.Context, token string, issuers, audiences []string) (*jwtauth.Claims, error)
}

// Policy is a compiled configuration: immutable, safe for concurrent use, and
// swapped whole on reload.
type Policy struct {
	routes    *route.Table[*Route]
	policyEnv *policy.Env         // compiles rule expressions; nil when no rule has one
	verifier  *credentialVerifier // every kind of credential; its jwt verifies JWTs
	ready     func() bool
	close     func()
	retire    func() // stops background work that in-flight checks can do without
	identity  config.Identity
	ident     identityPolicy
	// issuerNames maps an issuer's iss to its configured name.
	issuerNames map[string]string
	// secretSums maps an HMAC issuer's name to a digest of its secret as
	// read at compile time: a secret file or variable that changes under
	// an unchanged configuration changes the routes' cache keys too.
	secretSums  map[string]string
	negativeTTL time.Duration
	cacheSize   int
	// dpopWindow is how recent a DPoP proof must be; dpopReplay bounds
	// the proofs a replica remembers (config.DPoP).
	dpopWindow  dpop.Window
	dpopReplay  int
	sessionsMax int
	perSubject  int
	sessionIdle time.Duration
	limits      config.Limits
	// delegates may join the sessions and tasks of the users they act for.
	delegates []delegate
	// taskOwnership binds tasks to their creator.
	taskOwnership bool
	// sessionSources is where the session id comes from, in order;
	// defaultSession the id of the "default" source.
	sessionSources []sessionSource
	defaultSession string
	// lineageNoMint: no lineage headers when nothing names the
	// conversation (the kagent preset), instead of a new root.
	lineageNoMint bool

	exchangers     map[string]*exchange.Exchanger
	elicitMax      int
	elicitPerUser  int
	elicitTTL      time.Duration
	lineageNames   lineage.Names
	signer         *lineage.Signer         // nil unless configured
	signedVerifier *lineage.SignedVerifier // nil unless peers or a signer
	// singleValued are the headers read as one value whatever the route
	// (see headers.go).
	singleValued []string
}

// Route is one compiled route.
type Route struct {
	Name string
	// limits count the route's authenticated requests (limits.go).
	limits []ratelimit.Limit
	// keyPrefix makes cache keys of this route differ from every other
	// route's and from this route's under a changed configuration.
	keyPrefix            string
	issuers              []string
	audiences            []string
	scopes               []string
	scopeParam           string // scopes space-joined, for challenges
	public               []string
	pathPrefix           string
	resourceMetadata     string
	forwardAuthorization bool
	credentials          credential.Source
	// ruleHeaders are the request headers the route's rule expressions
	// read by name (policy.Program.Headers): each is refused when sent
	// more than once (repeatedRuleHeader).
	ruleHeaders []string
	// keyHeader: credentials.Header is an API-key issuer's. What is read
	// there is an API key or a JWT verified here, never introspected: a
	// mistyped key is its owner's secret (credentialVerifier.verify).
	keyHeader bool
	// senderConstrained is config.SenderDPoP or SenderMTLS when the route
	// takes only tokens bound that way (binding.go).
	senderConstrained string
	claimHeaders      []config.ClaimHeader
	owned             []string // every header the service sets on this route
	identityOwned     []string // owned headers a grant sets or strips (lineage does its own)
	// unauthenticatedRemove is owned plus authorization unless forwarded.
	unauthenticatedRemove []string
	// credentialRemove are the headers carrying a credential that never go
	// upstream: Authorization and the configured credential header, unless
	// the route forwards credentials.
	credentialRemove []string

	protocol   jsonrpc.Protocol // as configured; ProtocolUnknown is auto
	rules      []rule
	ruleClaims []string // claims the rules look at
	// allClaims: some expression reads jwt as a whole, so grants keep
	// every claim; identityRules are the rules whose expression reads only
	// the token (evaluated once per grant); jwtPerRequest: a per-request
	// expression reads jwt.
	allClaims      bool
	identityRules  []int
	jwtPerRequest  bool
	defaultDeny    bool
	sessionBinding bool
	tokenInMeta    bool
	// upstreamValidatesMCPHeaders: the upstream refuses a call whose
	// Mcp-Method and Mcp-Name disagree with its body, so rules may allow
	// on those headers when the body is not sent.
	upstreamValidatesMCPHeaders bool
	// upstreamScopesTaskLists: the agent lists only the caller's tasks
	// (checkUnscopedList lets a list nothing scopes through).
	upstreamScopesTaskLists bool
	// bindsTasks: task ownership is on and the front end sends the body,
	// so a task operation is read from it (readCall refuses a cut one).
	bindsTasks bool
	resource   config.ProtectedResource
	issuerURLs []string // iss of the route's issuers, for authorization_servers
	allScopes  []string // route and rule scopes, for scopes_supported

	dryRun      bool
	lineageOff  bool
	maxDepth    int
	trust       *lineage.Trust
	signLineage bool
	exchange    *routeExchange // nil: the inbound token is not exchanged

	// responsePath and filterLists: see response.go.
	responsePath, filterLists bool
	// tools is the signed tools header (toolsheader.go); nil: none.
	tools *routeTools

	// lastShape is the shared shape the route's last new grant was given
	// (shapeTable.get): the grants of a route nearly always have the same
	// one, which is then found by comparing fields, without encoding a key
	// or taking the table's lock.
	lastShape atomic.Pointer[grantShape]
}

// Deps are the outside world a policy is compiled against.
type Deps struct {
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	Getenv     func(string) string
	// Verifier replaces the JWT verifier built from the issuers (tests).
	Verifier TokenVerifier
	// OnJWKSFetch is told about every key set load (metrics).
	OnJWKSFetch func(issuer string, err error)
	// OnSTSCall is told about every token exchange call (metrics).
	OnSTSCall func(result string, took time.Duration)
	// OnCredential is told about every credential verified (verdict cache
	// misses): the issuer kind (jwt, introspection, api_keys, peer) and
	// the outcome (ok, denied, unavailable), for metrics.
	OnCredential func(kind, outcome string)
	// Shared is the cross-replica tier for exchanged tokens; nil for none.
	Shared *shared.Store
	// KeySources, when set, keeps issuers' key sources across compiled
	// policies (reloads); nil gives each policy sources of its own.
	KeySources *jwtauth.Sources
	// APIKeyRevocations, when set, are the revoked API keys, kept across
	// compiled policies (reloads): the pipeline built on the first policy
	// revokes into it (Pipeline.RevokeAPIKey) and every policy's key stores
	// refuse what it holds. nil gives each policy a set of its own, which
	// the pipeline still checks every grant against.
	APIKeyRevocations *apikey.Revocations
}

// Exchangers returns the policy's token exchangers by name.
func (p *Policy) Exchangers() map[string]*exchange.Exchanger { return p.exchangers }

// Compile turns a validated configuration into a Policy. ctx bounds the
// lifetime of background key refreshes; Close the policy when replacing it.
func Compile(ctx context.Context, f *config.File, d Deps) (*Policy, error) {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Getenv == nil {
		d.Getenv = os.Getenv
	}
	if d.HTTPClient == nil {
		d.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	p := &Policy{
		identity:    f.Identity,
		negativeTTL: f.Cache.NegativeTTL.D(),
		cacheSize:   f.Cache.MaxEntries,
		dpopWindow:  dpop.Window{MaxAge: f.DPoP.MaxAge.D(), Leeway: f.DPoP.Leeway.D()},
		dpopReplay:  f.DPoP.ReplayEntries,
		sessionsMax: f.Sessions.MaxEntries,
		perSubject:  f.Sessions.MaxPerSubject,
		ident:       compileIdentity(f),
		issuerNames: issuerNames(f),
		sessionIdle: f.Sessions.IdleTimeout.D(),
		limits:      f.Limits,
		delegates:   compileDelegates(f.Sessions.Delegates),
		ready:       func() bool { return true },
		close:       func() {},
		retire:      func() {},
	}
	p.taskOwnership = f.Sessions.OwnsTasks()
	if err := p.compileSessionSources(f.Identity); err != nil {
		return nil, err
	}
	var jwtVerifier TokenVerifier
	if d.Verifier != nil {
		jwtVerifier = d.Verifier
	} else if jwtSpecs := jwtIssuers(f.Issuers); len(jwtSpecs) > 0 {
		specs, err := issuerSpecs(jwtSpecs, d.Getenv)
		if err != nil {
			return nil, err
		}
		p.secretSums = secretSums(specs)
		v, err := jwtauth.New(ctx, specs, jwtauth.Options{HTTPClient: d.HTTPClient, Logger: d.Logger, Now: d.Now, OnFetch: d.OnJWKSFetch,
			MaxWaiting: f.Limits.MaxWaitingPerDependency, Sources: d.KeySources})
		if err != nil {
			return nil, err
		}
		jwtVerifier, p.ready, p.close = v, v.Ready, v.Close
		p.retire = v.Close
	}
	creds, stopCreds, err := compileCredentials(ctx, f, d, jwtVerifier)
	if err != nil {
		p.close()
		return nil, err
	}
	p.verifier = creds
	closeJWT := p.close
	p.close = func() {
		stopCreds()
		closeJWT()
	}

	if err := p.compileLineage(f, d); err != nil {
		p.close()
		return nil, err
	}
	p.singleValued = singleValuedHeaders(p.lineageNames)
	exchangers, err := compileExchanges(f, d)
	if err != nil {
		p.close()
		return nil, err
	}
	p.exchangers = exchangers
	p.elicitMax, p.elicitPerUser, p.elicitTTL = f.Elicitations.MaxEntries, f.Elicitations.MaxPerSubject, f.Elicitations.TTL.D()
	closeRest := p.close
	p.close = func() {
		for _, ex := range exchangers {
			ex.Close()
		}
		closeRest()
	}
	issuerByName := map[string]config.Issuer{}
	for _, is := range f.Issuers {
		issuerByName[is.Name] = is
	}
	var (
		matchers []route.Matcher
		routes   []*Route
		fallback = -1
	)
	for _, rc := range f.Routes {
		r, err := p.compileRoute(rc, f, issuerByName)
		if err == nil {
			err = p.compileRulePolicies(r, rc, d)
		}
		if err != nil {
			p.close()
			return nil, err
		}
		matchers = append(matchers, route.Matcher{Name: rc.Name, Hosts: rc.Hosts, PathPrefix: rc.PathPrefix})
		routes = append(routes, r)
		if rc.Default {
			fallback = len(routes) - 1
		}
	}
	p.routes = route.NewTable(matchers, routes, fallback)
	return p, nil
}

func (p *Policy) compileRoute(rc config.Route, f *config.File, issuers map[string]config.Issuer) (*Route, error) {
	id := f.Identity
	r := &Route{
		Name:                        rc.Name,
		issuers:                     rc.Issuers,
		audiences:                   rc.Audiences,
		scopes:                      rc.Scopes,
		scopeParam:                  strings.Join(rc.Scopes, " "),
		pathPrefix:                  rc.PathPrefix,
		resourceMetadata:            rc.ResourceMetadata,
		forwardAuthorization:        rc.ForwardAuthorization,
		senderConstrained:           rc.SenderConstrained,
		credentials:                 credential.Source{Header: rc.Credentials.Header, Cookie: rc.Credentials.Cookie},
		claimHeaders:                rc.ClaimHeaders,
		rules:                       compileRules(rc.Name, rc.Rules),
		limits:                      compileLimits(rc.Name, rc.Limits),
		defaultDeny:                 rc.DefaultAction == "deny",
		sessionBinding:              rc.MCP.SessionBinding == nil || *rc.MCP.SessionBinding,
		tokenInMeta:                 rc.MCP.TokenInMeta,
		upstreamValidatesMCPHeaders: rc.UpstreamValidatesMCPHeaders,
		upstreamScopesTaskLists:     rc.UpstreamScopesTaskLists,
		bindsTasks:                  p.taskOwnership && rc.RequestBody != config.RequestBodyNone,
		resource:                    rc.ProtectedResource,
		issuerURLs:                  issuerURLs(rc.Issuers, issuers),
		allScopes:                   allScopes(rc),
		dryRun:                      rc.DryRun,
		lineageOff:                  rc.Lineage.Disabled,
		maxDepth:                    cmp.Or(rc.Lineage.MaxDepth, f.Lineage.MaxDepth),
		signLineage:                 rc.Lineage.Sign,
		responsePath:                rc.ResponsePath,
		filterLists:                 rc.ResponsePath && (rc.FilterLists == nil || *rc.FilterLists),
		tools:                       compileRouteTools(rc.ToolsHeader),
	}
	if r.tools != nil && p.signer == nil {
		return nil, fmt.Errorf("route %s: tools_header needs lineage.signing: the header is signed with the lineage key", rc.Name)
	}
	if err := compileURIPatterns(r.rules); err != nil {
		return nil, fmt.Errorf("route %s: %w", rc.Name, err)
	}
	if err := checkRoutePaths(rc.PathPrefix, rc.PublicPaths); err != nil {
		return nil, fmt.Errorf("route %s: %w", rc.Name, err)
	}
	r.protocol, _ = jsonrpc.ParseProtocol(rc.Protocol) // validated
	r.public = publicPaths(rc.PublicPaths, rc.PathPrefix, r.protocol)
	r.ruleClaims = ruleClaims(r.rules)
	if err := apiKeyHeader(r, rc, issuers); err != nil {
		return nil, err
	}
	if r.tools != nil && p.toolsHeaderClash(r, id) {
		return nil, fmt.Errorf("route %s: tools_header.header %s is a header the service already sets or reads", rc.Name, r.tools.header)
	}
	p.ownHeaders(r, id)
	var err error
	if r.trust, err = routeTrust(rc, f.Lineage); err != nil {
		return nil, fmt.Errorf("route %s: %w", rc.Name, err)
	}
	if r.exchange, err = compileRouteExchange(rc.Exchange, p.exchangers); err != nil {
		return nil, fmt.Errorf("route %s: exchange: %w", rc.Name, err)
	}
	r.keyPrefix = p.keyPrefix(rc, f, issuers)
	return r, nil
}

// publicPaths are the route's public paths, plus the A2A agent cards,
// public wherever an agent may be served (any protocol but http and mcp).
func publicPaths(paths []string, pathPrefix string, proto jsonrpc.Protocol) []string {
	public := slices.Clone(paths)
	if proto == jsonrpc.ProtocolHTTP || proto == jsonrpc.ProtocolMCP {
		return public
	}
	for _, card := range []string{"/.well-known/agent-card.json", "/.well-known/agent.json"} {
		public = append(public, card)
		if prefix := strings.TrimSuffix(pathPrefix, "/"); prefix != "" {
			public = append(public, prefix+card)
		}
	}
	return public
}

// apiKeyHeader makes an API-key issuer's header the route's alternative
// credential header: read there, and stripped before the upstream like it.
func apiKeyHeader(r *Route, rc config.Route, issuers map[string]config.Issuer) error {
	for _, name := range rc.Issuers {
		k := issuers[name].APIKeys
		if k == nil || k.Header == "" {
			continue
		}
		h := strings.ToLower(k.Header)
		if r.credentials.Header != "" && r.credentials.Header != h {
			return fmt.Errorf("route %s: credentials.header %s and the API-key header %s of issuer %s: a route reads one alternative header", rc.Name, r.credentials.Header, h, name)
		}
		r.credentials.Header, r.keyHeader = h, true
	}
	return nil
}

// issuerURLs are the iss of the route's issuers, once each, for the
// protected resource metadata's authorization_servers.
func issuerURLs(names []string, issuers map[string]config.Issuer) []string {
	var urls []string
	for _, name := range names {
		if u := issuers[name].Issuer; u != "" && !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	return urls
}

// ruleClaims are the claims the rules look at, once each.
func ruleClaims(rules []rule) []string {
	var claims []string
	for _, rule := range rules {
		for _, req := range rule.claims {
			if !slices.Contains(claims, req.claim) {
				claims = append(claims, req.claim)
			}
		}
	}
	return claims
}

// allScopes are the route's scopes, then its rules' ones, once each, for
// the metadata's scopes_supported.
func allScopes(rc config.Route) []string {
	scopes := append([]string(nil), rc.Scopes...)
	for _, rule := range rc.Rules {
		for _, sc := range rule.Scopes {
			if !slices.Contains(scopes, sc) {
				scopes = append(scopes, sc)
			}
		}
	}
	return scopes
}

// ownHeaders lists the headers the service sets on r, which no client may
// send upstream itself: the identity and claim headers, the dry-run one,
// the lineage headers, the tools header, and the credential headers that
// never go upstream.
func (p *Policy) ownHeaders(r *Route, id config.Identity) {
	r.owned = []string{id.UserHeader, id.SessionHeader}
	for _, ch := range r.claimHeaders {
		r.owned = append(r.owned, ch.Header)
	}
	if !r.dryRun {
		// Only a dry-run route sets it (on every request it passes).
		r.owned = append(r.owned, DryRunHeader)
	}
	// The decision id is the service's: a client's copy would point an
	// upstream at somebody else's audit record.
	r.owned = append(r.owned, DecisionIDHeader)
	if r.tools != nil {
		// Stripped unless the tools stage sets it.
		r.owned = append(r.owned, r.tools.header)
	}
	r.identityOwned = slices.Clone(r.owned)
	// Lineage headers are the service's too, set or stripped on every route.
	for _, name := range p.lineageNames.Owned() {
		if !slices.Contains(r.owned, name) {
			r.owned = append(r.owned, name)
			if r.lineageOff {
				r.identityOwned = append(r.identityOwned, name)
			}
		}
	}
	r.unauthenticatedRemove = slices.Clone(r.owned)
	if !r.forwardAuthorization {
		r.credentialRemove = []string{"authorization"}
		if h := r.credentials.Header; h != "" && h != "authorization" {
			r.credentialRemove = append(r.credentialRemove, h)
		}
		r.unauthenticatedRemove = append(r.unauthenticatedRemove, r.credentialRemove...)
	}
}

// routeTrust is whose lineage the route believes: its own trust, else the
// file's.
func routeTrust(rc config.Route, l config.Lineage) (*lineage.Trust, error) {
	trust := l.Trust
	if rc.Lineage.Trust != nil {
		trust = *rc.Lineage.Trust
	}
	return lineage.NewTrust(lineage.TrustConfig{All: trust.All, Issuers: trust.Issuers, ClientIDs: trust.ClientIDs, Principals: trust.Principals,
		IgnoreAct: trust.Act != nil && !*trust.Act})
}

// keyPrefix starts the route's cache keys. Everything a grant on this
// route depends on goes into the fingerprint, so a reload that changes any
// of it misses the old cache entries.
func (p *Policy) keyPrefix(rc config.Route, f *config.File, issuers map[string]config.Issuer) string {
	fp := []string{fingerprint(rc), fingerprint(f.Identity), fingerprint(f.Lineage)}
	for _, name := range rc.Issuers {
		fp = append(fp, fingerprint(issuers[name]), "namespace:"+p.ident.namespaces[name], "secret:"+p.secretSums[name])
	}
	k := cache.NewKey(fp...)
	return rc.Name + "/" + hex.EncodeToString(k[:8])
}

func issuerNames(f *config.File) map[string]string {
	m := make(map[string]string, len(f.Issuers))
	for _, is := range f.Issuers {
		if is.Issuer != "" {
			m[is.Issuer] = is.Name
		}
	}
	return m
}

// fingerprint renders a configuration value for hashing (JSON follows
// pointers, so equal configurations give equal fingerprints).
func fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// compileLineage sets the header names and builds the signer and the
// verifier of peers' signed lineage.
func (p *Policy) compileLineage(f *config.File, d Deps) error {
	l := f.Lineage
	n := lineage.DefaultNames()
	if l.Preset == "kagent" {
		n = lineage.KagentNames()
		p.lineageNoMint = true
	}
	n.User, n.Session = f.Identity.UserHeader, f.Identity.SessionHeader
	for _, o := range []struct {
		dst *string
		v   string
	}{{&n.Root, l.Headers.Root}, {&n.Parent, l.Headers.Parent}, {&n.Depth, l.Headers.Depth}, {&n.ActorChain, l.Headers.ActorChain}, {&n.Signed, l.Headers.Signed}} {
		if o.v != "" {
			*o.dst = strings.ToLower(o.v)
		}
	}
	if err := n.Validate(); err != nil {
		return err
	}
	p.lineageNames = n
	if l.Signing.KeyFile != "" {
		s, err := lineage.NewSigner(lineage.SignerOptions{KeyFile: l.Signing.KeyFile, Issuer: l.Signing.Issuer, TTL: l.Signing.TTL.D(), Now: d.Now, Logger: d.Logger})
		if err != nil {
			return err
		}
		p.signer = s
	}
	if len(l.Peers) > 0 || p.signer != nil {
		peers := make([]lineage.Peer, 0, len(l.Peers))
		for _, pc := range l.Peers {
			peers = append(peers, lineage.Peer{Issuer: pc.Issuer, JWKSURL: pc.JWKSURL, JWKSFile: pc.JWKSFile})
		}
		v, err := lineage.NewSignedVerifier(lineage.VerifierOptions{Peers: peers, Local: p.signer, Client: d.HTTPClient, Now: d.Now, Logger: d.Logger})
		if err != nil {
			return err
		}
		p.signedVerifier = v
		closeKeys := p.close
		p.close = func() { v.Close(); closeKeys() }
	}
	return nil
}

// Signer is the lineage token signer, nil unless configured; its JWKS is
// served on the admin listener.
func (p *Policy) Signer() *lineage.Signer { return p.signer }

// secretSums digests the HMAC secrets of specs by issuer name (see
// Policy.secretSums); a digest is only ever hashed again into a route's
// key prefix.
func secretSums(specs []jwtauth.IssuerSpec) map[string]string {
	out := make(map[string]string)
	for _, s := range specs {
		if len(s.Secret) > 0 {
			sum := sha256.Sum256(s.Secret)
			out[s.Name] = hex.EncodeToString(sum[:])
		}
	}
	return out
}

// issuerSpecs resolves secrets and maps config issuers to verifier specs.
func issuerSpecs(issuers []config.Issuer, getenv func(string) string) ([]jwtauth.IssuerSpec, error) {
	var errs []error
	specs := make([]jwtauth.IssuerSpec, 0, len(issuers))
	for _, is := range issuers {
		spec := jwtauth.IssuerSpec{
			Name:               is.Name,
			Issuer:             is.Issuer,
			Algorithms:         is.Algorithms,
			JWKSURL:            is.JWKSURL,
			JWKSFile:           is.JWKSFile,
			Discovery:          is.Discovery,
			Leeway:             is.Leeway.D(),
			Type:               is.Type,
			RefreshInterval:    is.RefreshInterval.D(),
			UnknownKIDInterval: is.UnknownKIDInterval.D(),
		}
		switch {
		case is.SecretEnv != "" || is.SecretFile != "":
			s, err := secrets.Load(getenv, is.SecretEnv, is.SecretFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("issuer %s: %w", is.Name, err))
			}
			spec.Secret = []byte(s)
		case is.Secret != "":
			spec.Secret = []byte(is.Secret)
		}
		specs = append(specs, spec)
	}
	return specs, errors.Join(errs...)
}

func (r *Route) hasRules() bool { return len(r.rules) > 0 || r.defaultDeny }

// errCutBody refuses a body cut short on a route that binds tasks.
const errCutBody = "the body was cut short at the proxy's limit, and this route reads task operations from the body: " +
	"send the body to the service whole (raise Envoy's max_request_bytes, or leave allow_partial_message off so that Envoy answers 413 itself; " +
	"a forward-auth or ext_proc check reads at most 1 MiB of it)"

// errUnknownMethod refuses a POST whose call nobody can name on a route
// with rules.
const errUnknownMethod = "the JSON-RPC method is unknown: send the body to the service (Envoy with_request_body, Traefik forwardBody, the nginx njs recipe), " +
	"or Mcp-Method and Mcp-Name to an upstream that checks them (upstream_validates_mcp_headers)"

// errA2AGRPC refuses a call of A2A's gRPC binding on an auto route with
// rules or task ownership.
const errA2AGRPC = "this is a call of A2A's gRPC binding, whose method and task the rules and task ownership cannot read: " +
	"call the agent over JSON-RPC, or give the route protocol: http if nothing is to be checked"

// errA2AWithheld refuses an A2A request whose body the front end did not
// send, on an a2a route that binds tasks.
const errA2AWithheld = "the front end did not send this A2A request's body, so task ownership cannot see its call: " +
	"send the body to the service (Envoy with_request_body, Traefik forwardBody, the nginx njs recipe), " +
	"or declare the route request_body: none with sessions.task_ownership: false"

// errNotA2AJSONRPC refuses a request on an a2a route that is not a
// JSON-RPC call.
const errNotA2AJSONRPC = "this A2A route takes JSON-RPC calls only: other A2A bindings (HTTP+JSON, gRPC) cannot be authorized here"

// errHeadersOnly refuses a call that rules would allow on its Mcp-Method and
// Mcp-Name headers alone.
const errHeadersOnly = "the call is named only by its Mcp-Method and Mcp-Name headers, which this route's upstream does not check: " +
	"send the body to the service (Envoy with_request_body, Traefik forwardBody, the nginx njs recipe) or set upstream_validates_mcp_headers"

// errHeadersOldVersion refuses a call that rules would allow on its
// Mcp-Method and Mcp-Name headers alone, from a client of a version whose
// requests the upstream does not check against them.
const errHeadersOldVersion = "the call is named only by its Mcp-Method and Mcp-Name headers, which MCP servers check against the body only " +
	"on requests whose MCP-Protocol-Version is " + mcpHeaderVersion + " or later: send that version, or send the body to the service"

// uncheckedHeaders says why the upstream may run another call than the one
// Mcp-Method and Mcp-Name name, for a call named by them alone: the route
// does not declare that its upstream checks them, or the request is of a
// version for which MCP servers do not (the go-sdk checks them only when
// MCP-Protocol-Version is 2026-07-28 or later, compared as strings like
// here). "" when the call was read from the body, or the upstream checks.
func (r *Route) uncheckedHeaders(call *Call) string {
	switch {
	case call.Body:
		return ""
	case !r.upstreamValidatesMCPHeaders:
		return errHeadersOnly
	case call.ProtocolVersion < mcpHeaderVersion:
		return errHeadersOldVersion
	}
	return ""
}

// Limits are the overload limits of this policy.
func (p *Policy) Limits() config.Limits { return p.limits }

// Ready reports whether every key set has loaded.
func (p *Policy) Ready() bool { return p.ready() }

// Close stops the policy's background work.
func (p *Policy) Close() { p.close() }

// Retire is called when a newer policy replaced this one: key sources the
// new policy does not share stop refreshing now, while checks still in
// flight keep the keys already loaded until Close.
func (p *Policy) Retire() { p.retire() }
