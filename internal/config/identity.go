package config

import (
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
