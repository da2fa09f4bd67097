package config

import (
	"fmt"
	"strings"

	"github.com/extauthz/extauthz/internal/segment"
)

// SubjectNamespace is the namespace of issuer name's subjects: the prefix
// that makes its user "alice" differ from another issuer's "alice", in the
// user header and in every key the service holds state under. It is the
// issuer's subject_prefix, "" with shared_subjects, "" when the file has
// one issuer (nobody else can say "alice"), and "<name>:" otherwise.
func (f *File) SubjectNamespace(name string) string {
	for _, is := range f.Issuers {
		if is.Name != name {
			continue
		}
		switch {
		case is.SubjectPrefix != nil:
			return *is.SubjectPrefix
		case is.SharedSubjects, len(f.Issuers) == 1:
			return ""
		}
		return name + ":"
	}
	return name + ":"
}

// identity checks the identity value policy and that the issuers' subject
// namespaces keep users apart.
func (v *validator) identity(f *File) {
	id := f.Identity
	switch id.SafeValues {
	case SafeValuesAny, SafeValuesPathSegment:
	default:
		v.add("identity.safe_values: %q is not %s or %s", id.SafeValues, SafeValuesAny, SafeValuesPathSegment)
	}
	switch id.UnsafeValues {
	case UnsafeRefuse, UnsafeEncode:
	default:
		v.add("identity.unsafe_values: %q is not %s or %s", id.UnsafeValues, UnsafeRefuse, UnsafeEncode)
	}
	if f.Sessions.MaxPerSubject < 0 || f.Sessions.MaxPerSubject > max(f.Sessions.MaxEntries, 1) {
		v.add("sessions.max_per_subject: must be between 1 and max_entries")
	}
	for _, src := range id.SessionSources {
		switch {
		case src == SessionSourceMCP, src == SessionSourceA2A, src == SessionSourceDefault:
		case strings.HasPrefix(src, SessionSourceClaim) && len(src) > len(SessionSourceClaim):
		default:
			v.add("identity.session_sources: %q is not claim:<name>, %s, %s or %s", src, SessionSourceMCP, SessionSourceA2A, SessionSourceDefault)
		}
	}
	for i, d := range f.Sessions.Delegates {
		if len(d.ClientIDs) == 0 && len(d.ActSubjects) == 0 {
			v.add("sessions.delegates[%d]: name client_ids or act_subjects", i)
		}
	}
	v.callerNames(f)
	type named struct{ ns, issuer string }
	var seen []named
	for _, is := range f.Issuers {
		if is.SubjectPrefix != nil && is.SharedSubjects && *is.SubjectPrefix != "" {
			v.add("issuers (%s): subject_prefix %q and shared_subjects exclude each other", is.Name, *is.SubjectPrefix)
		}
		ns := f.SubjectNamespace(is.Name)
		if ns != "" && id.SafeValues == SafeValuesPathSegment {
			if strings.HasPrefix(ns, segment.Marker) || !segment.Safe(ns) {
				v.add("issuers (%s): subject_prefix %q is not a safe path segment (identity.safe_values)", is.Name, ns)
			}
		}
		for _, o := range seen {
			if ns != "" && o.ns != "" && ns != o.ns && (strings.HasPrefix(ns, o.ns) || strings.HasPrefix(o.ns, ns)) {
				v.add("issuers (%s): subject namespace %q overlaps %q of issuer %s: one issuer's user could read as another's", is.Name, ns, o.ns, o.issuer)
			}
		}
		seen = append(seen, named{ns, is.Name})
	}
}

// callerNames checks that every client id and act subject naming a trusted
// caller (lineage trust, session delegates, exchange agents) can name one.
// Those are read in their issuer's subject namespace, as users are: with
// several issuers, "corp:planner" is corp's client planner, and a bare
// "planner" would name no client of any of them (nothing would match, and
// a caller thought trusted would silently not be).
func (v *validator) callerNames(f *File) {
	if len(f.Issuers) == 0 {
		return // required says so
	}
	check := func(p, what string, names []string) {
		for i, n := range names {
			if n != "" && !f.namesCaller(n) {
				v.add("%s[%d]: %q names no issuer's %s: with several issuers it is written in its issuer's subject namespace, as users are (e.g. %q)",
					p, i, n, what, f.SubjectNamespace(f.Issuers[0].Name)+n)
			}
		}
	}
	check("lineage.trust.client_ids", "client", f.Lineage.Trust.ClientIDs)
	for i, d := range f.Sessions.Delegates {
		p := fmt.Sprintf("sessions.delegates[%d]", i)
		check(p+".client_ids", "client", d.ClientIDs)
		check(p+".act_subjects", "subject", d.ActSubjects)
	}
	for _, r := range f.Routes {
		p := "routes (" + r.Name + ")"
		if r.Lineage.Trust != nil {
			check(p+".lineage.trust.client_ids", "client", r.Lineage.Trust.ClientIDs)
		}
		if r.Exchange == nil {
			continue
		}
		for i, a := range r.Exchange.Agents {
			ap := fmt.Sprintf("%s.exchange.agents[%d]", p, i)
			check(ap+".client_ids", "client", a.ClientIDs)
			check(ap+".act_subjects", "subject", a.ActSubjects)
		}
	}
}

// namesCaller reports whether name can be a caller's client id or act
// subject read in its issuer's namespace: some issuer has no namespace, or
// name is more than one's namespace.
func (f *File) namesCaller(name string) bool {
	for _, is := range f.Issuers {
		if ns := f.SubjectNamespace(is.Name); ns == "" || len(name) > len(ns) && strings.HasPrefix(name, ns) {
			return true
		}
	}
	return false
}
