package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/lineage"
	"github.com/extauthz/extauthz/internal/segment"
)

// Grant is a verified caller on one route: what the cache holds instead of
// the token. It is immutable once built.
//
// A replica holds one grant per live token, a million of them, so a grant
// keeps only what is its own: the user, the session, the token's times, the
// identity headers (their values packed in one allocation, compact.go). All
// it has in common with other grants of its route, issuer, client and rule
// claims is one shared grantShape, whose fields read as the grant's own.
type Grant struct {
	*grantShape
	// Subject is the user: the issuer's subject namespace followed by the
	// token's user claim (see identity.go). It keys everything the service
	// holds per user.
	Subject string
	Session string
	// exp and iat are the token's times in unix seconds (see Expires and
	// IssuedAt); iat is 0 when the token has none.
	exp, iat int64
	// set are the upstream header mutations this grant always makes on
	// its route (remove, the other half, is the shape's).
	set []Header

	// memos, while the grant is in use, hold what repeated checks of it
	// share (memo.go); nil otherwise.
	memos atomic.Pointer[grantMemos]
}

// grantShape is what a grant shares with every grant made on the same
// route, from the same issuer, key and client, with the same rule claims
// and results: one copy for all of them (compact.go). Never modified once
// shared.
type grantShape struct {
	Route string // the route this grant was made on
	// routeKey is the route's cache key prefix, to drop the grants of
	// routes a reload changed.
	routeKey string
	Issuer   string // the configured issuer's name
	ClientID string // azp or client_id
	Scopes   []string
	// KeyID identifies the key the token was verified with (its
	// thumbprint, whether or not the token named a kid; "" for a secret):
	// when the issuer drops that key, the grant is dropped with it.
	KeyID string
	// APIKeyID is the id of the API key the grant was made from, "" when
	// the credential was not an API key: revoking the key (RevokeAPIKey)
	// refuses the grant.
	APIKeyID string
	// Claims holds only the claims the route's rules look at: a grant can
	// sit in the cache for the token's lifetime.
	Claims RuleClaims
	// Actors is the RFC 8693 act chain, outermost first: the signed truth
	// about who is acting for the subject.
	Actors []string
	// boundKey and boundCert are what a sender-constrained token is bound
	// to (binding.go): its cnf's jkt and x5t#S256, "" for a bearer token.
	// A client keeps its key across tokens, so grants share them.
	boundKey, boundCert string

	// whenResults are the results of the route's identity-only rule
	// expressions, by rule index (celrules.go); jwt is Claims as a map for
	// the per-request ones. Both nil when the route needs none.
	whenResults []uint8
	jwt         map[string]any

	// sessionSource is the index in Policy.sessionSources of the source
	// that named the session header for every request of this grant, -1
	// when none did; sessionPerRequest says a request's own ids decide it
	// (sessionFor); sessionClaimIdx is the source Session came from.
	sessionSource, sessionClaimIdx int
	sessionPerRequest              bool

	// scopeOK records whether the route's required scopes are all held; a
	// grant is per route, so this is decided once.
	scopeOK bool
	// remove are the headers this grant always strips upstream.
	remove []string

	// rendered is a front end's rendering of the shape (RenderedShape),
	// kept only when shared says the shape is in the shape table: a shape
	// of one grant renders into the grant's memos, which are bounded.
	rendered atomic.Pointer[any]
	shared   bool
	// lineageRemove is remove followed by the lineage headers a request
	// strips, as the last request of the shape made it (withLineageRemoved);
	// kept only on a shared shape.
	lineageRemove atomic.Pointer[lineageRemoveMemo]
}

// lineageRemoveMemo is one list withLineageRemoved made.
type lineageRemoveMemo struct {
	extra []string // the lineage headers stripped
	list  []string // remove, then extra
}

// withLineageRemoved returns the headers g strips followed by extra, the
// lineage headers a request strips. Requests of a shape nearly always
// strip the same ones: a shared shape keeps the list, so that a miss does
// not make it again. The list is shared: callers must never modify it.
func (g *Grant) withLineageRemoved(extra []string) []string {
	if len(extra) == 0 {
		return g.remove
	}
	if g.shared {
		if m := g.lineageRemove.Load(); m != nil && slices.Equal(m.extra, extra) {
			return m.list
		}
	}
	list := make([]string, 0, len(g.remove)+len(extra))
	list = append(append(list, g.remove...), extra...)
	if g.shared {
		g.lineageRemove.Store(&lineageRemoveMemo{extra: list[len(g.remove):], list: list})
	}
	return list
}

// Expires is when the token expires (to the second).
func (g *Grant) Expires() time.Time {
	if g.exp == 0 {
		return time.Time{}
	}
	return time.Unix(g.exp, 0)
}

// IssuedAt is when the token was issued (to the second), zero when it does
// not say.
func (g *Grant) IssuedAt() time.Time {
	if g.iat == 0 {
		return time.Time{}
	}
	return time.Unix(g.iat, 0)
}

// NewGrant returns the grant of a caller named by an identity (the response
// path's, from the check's metadata): who it is, with no headers of its
// own and shared with no other grant.
func NewGrant(id Identity) *Grant {
	return &Grant{grantShape: &grantShape{Route: id.Route, Issuer: id.Issuer, ClientID: id.ClientID, Scopes: id.Scopes,
		Claims: id.Claims, APIKeyID: id.APIKeyID},
		Subject: id.Subject, Session: id.Session, iat: unixSeconds(id.IssuedAt)}
}

// unixSeconds is t in unix seconds, 0 for the zero time.
func unixSeconds(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// lineageMemo is one lineage result with the header mutations it makes.
type lineageMemo struct {
	id     uint64 // the HeadersID of set and remove
	res    lineage.Result
	set    []Header
	remove []string
}

// Headers are the identity headers this grant sets upstream; every allowed
// verdict of the grant starts its Set with them.
func (g *Grant) Headers() []Header { return g.set }

// Rendered returns build(v.Grant), computed once per grant (of those
// holding memos in the pipeline that decided v) and shared by later calls.
// A front end keeps a value of its own type there; a value of another type
// (a second front end) is rebuilt on every call rather than shared. A
// verdict no check returned (an explained one) memoizes nothing.
func Rendered[T any](v *Verdict, build func(*Grant) T) T {
	if v.memos == nil {
		return build(v.Grant)
	}
	return rendered(v.memos, v.Grant, build)
}

func rendered[T any](ring *memoRing, g *Grant, build func(*Grant) T) T {
	if p := g.memo().rendered.Load(); p != nil {
		if v, ok := (*p).(T); ok {
			return v
		}
		return build(g)
	}
	var v any = build(g)
	g.memoForWrite(ring).rendered.CompareAndSwap(nil, &v)
	return v.(T)
}

// RenderedShape returns build(g), computed once for every grant sharing
// g's shape and shared by them (a grant whose shape is its own gets build(g)
// every call: the caller keeps it in the grant's memos): build may read only what grants of one
// shape have in common (Route, Issuer, ClientID, Scopes, KeyID, APIKeyID,
// Claims, Actors), never Subject, Session, the times or the headers. As
// with Rendered, a value of another front end's type is rebuilt each call.
func RenderedShape[T any](g *Grant, build func(*Grant) T) T {
	if !g.shared {
		return build(g)
	}
	if p := g.grantShape.rendered.Load(); p != nil {
		if v, ok := (*p).(T); ok {
			return v
		}
		return build(g)
	}
	var v any = build(g)
	g.grantShape.rendered.CompareAndSwap(nil, &v)
	return v.(T)
}

// claimError is a denial found while turning claims into headers.
type claimError struct{ msg string }

func (e *claimError) Error() string { return e.msg }

// newGrant turns verified claims into a grant for route r.
func (p *Policy) newGrant(r *Route, c *jwtauth.Claims) (*Grant, error) {
	// The grant is drafted on the stack, its shape in a pooled draft: a
	// shape equal to one already shared then costs nothing, and the grant
	// is made (share) only once it is complete. Nothing keeps a pointer
	// into the draft: share copies what it keeps (grantShape.own).
	d := drafts.Get().(*grantDraft)
	defer d.release()
	d.shape = grantShape{
		Route:    r.Name,
		routeKey: r.keyPrefix,
		Issuer:   c.IssuerName,
		Scopes:   scopes(c),
		Actors:   actChain(c),
		KeyID:    c.KeyID,
	}
	var err error
	if d.shape.boundKey, d.shape.boundCert, err = confirmation(c); err != nil {
		return nil, err
	}
	draft := Grant{grantShape: &d.shape, exp: unixSeconds(c.ExpiresAt), iat: unixSeconds(c.IssuedAt)}
	g := &draft
	if p.verifier != nil && p.verifier.kinds[c.IssuerName] == "api_keys" {
		// Only an API-key issuer's claims name a key: a JWT's jti is not one.
		g.APIKeyID = c.ID
	}
	id := &p.identity
	sub, ok, err := p.claimValue(c, id.UserClaim)
	if err != nil {
		return nil, err
	}
	if !ok || sub == "" {
		return nil, &claimError{fmt.Sprintf("token has no %s claim", id.UserClaim)}
	}
	// The user is the namespace followed by sub: pack makes that one
	// string, with the other values the grant keeps.
	ns, err := p.ident.namespace(c.IssuerName, sub)
	if err != nil {
		return nil, err
	}
	if err = p.grantSession(g, c); err != nil {
		return nil, err
	}
	// The namespace is a safe segment (config validation); the subject
	// after it must be one too.
	userValue, err := p.ident.headerValue("user", sub)
	if err != nil {
		return nil, err
	}
	sessionValue := g.Session
	if g.sessionSource >= 0 && p.sessionSources[g.sessionSource].kind == srcDefault {
		sessionValue = p.defaultSession
	} else if g.Session != "" {
		if sessionValue, err = p.ident.headerValue("session", g.Session); err != nil {
			return nil, err
		}
	}
	if len(ns)+len(userValue) > id.MaxHeaderValue || len(sessionValue) > id.MaxHeaderValue {
		return nil, &claimError{"the user or session is too long for a header"}
	}
	// The headers are drafted in the pooled draft too: share copies them
	// into the grant's own allocation. The user header's value is pack's.
	g.set = d.set[:0]
	if n := 2 + len(r.claimHeaders); n > len(d.set) {
		g.set = make([]Header, 0, n)
	}
	g.set = append(g.set, Header{Name: id.UserHeader})
	if g.sessionSource >= 0 {
		g.set = append(g.set, Header{Name: id.SessionHeader, Value: sessionValue})
	}
	for _, ch := range r.claimHeaders {
		v, ok, err := p.claimValue(c, ch.Claim)
		if err != nil {
			return nil, err
		}
		if ok {
			g.set = append(g.set, Header{Name: ch.Header, Value: v})
		}
	}
	g.pack(ns, sub, userValue)

	g.ClientID = stringClaim(c, "azp")
	if g.ClientID == "" {
		g.ClientID = stringClaim(c, "client_id")
	}
	g.scopeOK = hasAll(g.Scopes, r.scopes)
	for _, name := range r.ruleClaims {
		var v any
		if s, ok := c.ClaimString(name); ok {
			v = internClaimString(s) // the usual case: no boxing
		} else if raw, ok := c.Claim(name); ok {
			v = internClaim(raw)
		} else {
			continue
		}
		if g.Claims == nil {
			g.Claims = d.claims[:0:min(len(r.ruleClaims), len(d.claims))]
		}
		g.Claims = append(g.Claims, RuleClaim{Name: name, Value: v})
	}

	if len(r.identityRules) > 0 || r.jwtPerRequest || r.allClaims {
		p.grantPolicy(g, r, c)
	}

	// Grants of a route almost always strip the same headers: the list is
	// built on the stack and shared (internList copies it when it is new).
	var removeBuf [8]string
	remove := removeBuf[:0]
	for _, name := range r.identityOwned {
		if !isSet(g.set, name) {
			remove = append(remove, name)
		}
	}
	remove = append(remove, r.credentialRemove...)
	g.remove = internList(remove)
	return g.share(r), nil
}

// grantDraft is the shape of a grant being made, with room for its rule
// claims; pooled, since the shape is nearly always one already shared.
type grantDraft struct {
	shape  grantShape
	claims [4]RuleClaim
	set    [maxInlineHeaders]Header
}

var drafts = sync.Pool{New: func() any { return new(grantDraft) }}

// release clears the draft, keeping nothing of a token, and pools it.
func (d *grantDraft) release() {
	d.shape = grantShape{}
	d.claims = [4]RuleClaim{}
	d.set = [maxInlineHeaders]Header{}
	drafts.Put(d)
}

// claimValue renders a claim as a header value: strings, numbers and
// booleans as they are, arrays of those joined with ",". A value that could
// smuggle header syntax (control bytes), that the upstream would read as
// another value (HTTP trims the spaces around a field value: " bob" reaches
// it as "bob"; a workload may trim Unicode white space too: segment.Padded)
// or is too long is refused: the caller denies the request
// rather than drop or mangle an identity.
func (p *Policy) claimValue(claims *jwtauth.Claims, name string) (string, bool, error) {
	s, ok := claims.ClaimString(name) // nearly always a string: no boxing
	if !ok {
		var err error
		if s, ok, err = p.nonStringClaimValue(claims, name); !ok || err != nil {
			return "", false, err
		}
	}
	if len(s) > p.identity.MaxHeaderValue {
		return "", false, &claimError{fmt.Sprintf("claim %s is too long for a header", name)}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return "", false, &claimError{fmt.Sprintf("claim %s contains control characters", name)}
		}
	}
	if segment.Padded(s) {
		return "", false, &claimError{fmt.Sprintf("claim %s starts or ends with white space", name)}
	}
	return s, true, nil
}

// nonStringClaimValue renders a claim that is not a string: numbers and
// booleans as they are, arrays of scalars joined with ",". An element
// holding "," or spaced at either end is refused: an upstream that splits
// the list (and trims each part, as HTTP lists are read) would read
// ["eng,admins"] or [" admins"] as the group admins.
func (p *Policy) nonStringClaimValue(claims *jwtauth.Claims, name string) (string, bool, error) {
	raw, ok := claims.Claim(name)
	if !ok || raw == nil {
		return "", false, nil
	}
	var s string
	switch v := raw.(type) {
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			es, ok := scalar(e)
			if !ok || strings.Contains(es, ",") || segment.Padded(es) {
				return "", false, &claimError{fmt.Sprintf("claim %s cannot be carried in a header", name)}
			}
			parts = append(parts, es)
		}
		s = strings.Join(parts, ",")
	default:
		if s, ok = scalar(v); !ok {
			return "", false, &claimError{fmt.Sprintf("claim %s cannot be carried in a header", name)}
		}
	}
	return s, true, nil
}

func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// stringClaim is the claim name when it is a string, else "".
func stringClaim(c *jwtauth.Claims, name string) string {
	s, _ := c.ClaimString(name)
	return s
}

// actChain is the token's RFC 8693 act chain (lineage.ActChain).
func actChain(c *jwtauth.Claims) []string {
	act, ok := c.Claim("act")
	if !ok {
		return nil
	}
	return lineage.ActChainOf(act)
}

// scopes reads OAuth scopes from "scope" (space-separated, RFC 8693/9068) or
// "scp" (a list or a string). The list is shared (interned): callers must
// never modify it.
func scopes(c *jwtauth.Claims) []string {
	s, isString := c.ClaimString("scope")
	scp, hasSCP := c.Claim("scp")
	if isString && !hasSCP {
		return internFields(s) // the usual case: no copy at all
	}
	// Each claim is decoded once: scp was above, scope too when a string.
	var scope any
	if isString {
		scope = s
	} else {
		scope, _ = c.Claim("scope")
	}
	var out []string
	for _, v := range [...]any{scope, scp} {
		switch v := v.(type) {
		case string:
			out = append(out, strings.Fields(v)...)
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return internList(out)
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func isSet(hs []Header, name string) bool {
	for _, h := range hs {
		if h.Name == name {
			return true
		}
	}
	return false
}

// tokenActors is the act chain the token itself names, outermost first:
// Actors without its outermost when peerActor says that one is the
// workload the peer stage named (withActor), which no token exchange put
// there.
func (g *Grant) tokenActors(peerActor bool) []string {
	if peerActor && len(g.Actors) > 0 {
		return g.Actors[1:]
	}
	return g.Actors
}

// currentActor is the token's current actor (RFC 8693 section 4.1), the
// first of tokenActors; "" when the token names none.
func (g *Grant) currentActor(peerActor bool) string {
	if a := g.tokenActors(peerActor); len(a) > 0 {
		return a[0]
	}
	return ""
}
