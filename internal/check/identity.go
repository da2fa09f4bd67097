package check

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/lineage"
	"github.com/extauthz/extauthz/internal/segment"
)

// A user is (issuer, subject), never a bare sub claim: two issuers can both
// say "alice". Each issuer has a subject namespace (config.SubjectNamespace:
// "<name>:" by default when several issuers are configured), and the
// service's user is the namespace followed by the subject. That one string
// is the Grant's Subject: the key of session bindings, revocations,
// consents, elicitations and exchanged tokens, locally and in Redis, and
// the value of the user header. Namespaces are prefix-free (config
// validation), and a subject of an issuer without a namespace that starts
// with another issuer's namespace is refused, so no two (issuer, subject)
// pairs of different subject spaces ever give the same user.

// identityPolicy is the compiled identity configuration.
type identityPolicy struct {
	// namespaces maps an issuer's configured name to its namespace.
	namespaces map[string]string
	// prefixes are the non-empty namespaces.
	prefixes []string
	// pathSegment makes user and session header values safe single path
	// segments; encode encodes unsafe ones instead of refusing them.
	pathSegment, encode bool
}

func compileIdentity(f *config.File) identityPolicy {
	ip := identityPolicy{
		namespaces:  make(map[string]string, len(f.Issuers)),
		pathSegment: f.Identity.SafeValues == config.SafeValuesPathSegment,
		encode:      f.Identity.UnsafeValues == config.UnsafeEncode,
	}
	for _, is := range f.Issuers {
		ns := f.SubjectNamespace(is.Name)
		ip.namespaces[is.Name] = ns
		if ns != "" {
			ip.prefixes = append(ip.prefixes, ns)
		}
	}
	return ip
}

// user is the service's user for subject sub of the issuer named issuer.
func (ip *identityPolicy) user(issuer, sub string) (string, error) {
	ns, err := ip.namespace(issuer, sub)
	if err != nil {
		return "", err
	}
	return ns + sub, nil
}

// names reports whether names holds id, a client id or act subject of the
// issuer named issuer, read in that issuer's namespace as a user is: with
// several issuers, corp's client planner is named "corp:planner", and
// another issuer's client planner is not named by it. An id that reads as
// another issuer's (an issuer without a namespace, id "corp:planner") is
// named by nothing.
func (ip *identityPolicy) names(names []string, issuer, id string) bool {
	if id == "" || len(names) == 0 {
		return false
	}
	ns, err := ip.namespace(issuer, id)
	return err == nil && lineage.InNamespace(names, ns, id)
}

// namespace is the namespace the user of subject sub of the issuer named
// issuer starts with (user without building the user: a new grant packs
// it with its other values).
func (ip *identityPolicy) namespace(issuer, sub string) (string, error) {
	ns, ok := ip.namespaces[issuer]
	if !ok {
		return "", &claimError{"the token's issuer is not configured"}
	}
	if ns == "" {
		for _, other := range ip.prefixes {
			if strings.HasPrefix(sub, other) {
				return "", &claimError{"the token's subject reads as a user of another issuer"}
			}
		}
	}
	return ns, nil
}

// renamesUsers refuses a policy next that gives an issuer cur has too
// (by configured name) another subject namespace: that renames its users
// ("alice" becomes "corp:alice" when a second issuer is added, and back
// when it is removed), while revocations, session, task and context
// bindings and consents stay keyed by the old names. A revoked user would
// be accepted again, and a subject spelling an old name ("corp:alice"
// once corp has no namespace) would own that user's sessions.
func renamesUsers(cur, next *Policy) error {
	var errs []string
	for name, ns := range cur.ident.namespaces {
		nns, ok := next.ident.namespaces[name]
		if !ok || nns == ns {
			continue
		}
		errs = append(errs, fmt.Sprintf("issuers (%s): the subject namespace would change from %s to %s, renaming its users (%q would become %q); "+
			"revocations, session bindings and consents are held under the current names. Keep the names with subject_prefix: %q on this issuer, "+
			"or restart the service to rename its users",
			name, describeNamespace(ns), describeNamespace(nns), ns+"alice", nns+"alice", ns))
	}
	if len(errs) == 0 {
		return nil
	}
	slices.Sort(errs)
	return errors.New(strings.Join(errs, "\n"))
}

func describeNamespace(ns string) string {
	if ns == "" {
		return "none"
	}
	return strconv.Quote(ns)
}

// User is the service's user for subject of the issuer named issuer (its
// configured name or its iss): the form revocation and the user header
// use.
func (p *Policy) User(issuer, subject string) (string, error) {
	if subject == "" {
		return "", fmt.Errorf("a subject is required")
	}
	name := issuer
	if _, ok := p.ident.namespaces[name]; !ok {
		name = p.issuerNames[issuer]
	}
	if name == "" {
		return "", fmt.Errorf("issuer %q is not configured", issuer)
	}
	u, err := p.ident.user(name, subject)
	if err != nil {
		return "", err
	}
	return u, nil
}

// headerValue applies identity.safe_values to a subject or session id
// (what names it, for the denial). The user header is the namespace, a
// safe segment itself, followed by the subject's value.
func (ip *identityPolicy) headerValue(what, v string) (string, error) {
	if !ip.pathSegment {
		return v, nil
	}
	if ip.encode {
		return segment.Encode(v), nil
	}
	if why := segment.Check(v); why != "" {
		return "", &claimError{fmt.Sprintf("the %s is not a safe path segment: %s (identity.safe_values)", what, why)}
	}
	return v, nil
}
