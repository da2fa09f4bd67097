package envoyconfig

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A Requirement is the oldest release of a proxy or platform that knows a
// setting a file uses.
type Requirement struct {
	Product string // Envoy, Istio, Envoy Gateway
	Version string // the oldest release, such as "1.31"
	Because string // the setting
}

func (r Requirement) String() string {
	return fmt.Sprintf("%s %s or later (%s)", r.Product, r.Version, r.Because)
}

// requirements are the settings the checked kinds of file use whose
// support began after the oldest supported releases.
var requirements = []struct {
	kind string   // "" for an Envoy bootstrap
	path []string // keys from the document (or the ext_authz filter) down
	req  Requirement
}{
	{"", []string{"decoder_header_mutation_rules"}, Requirement{"Envoy", "1.31", "ext_authz decoder_header_mutation_rules"}},
	{"", []string{"validate_mutations"}, Requirement{"Envoy", "1.31", "ext_authz validate_mutations"}},
	{"", []string{"*=FULL_DUPLEX_STREAMED"}, Requirement{"Envoy", "1.34", "ext_proc FULL_DUPLEX_STREAMED"}},
	{"EnvoyExtensionPolicy", []string{"*=FullDuplexStreamed"}, Requirement{"Envoy Gateway", "1.5", "extProc body FullDuplexStreamed"}},
	{"SecurityPolicy", []string{"spec", "extAuth", "statusOnError"}, Requirement{"Envoy Gateway", "1.8", "extAuth.statusOnError"}},
	{"SecurityPolicy", []string{"spec", "extAuth", "contextExtensions"}, Requirement{"Envoy Gateway", "1.7", "extAuth.contextExtensions"}},
	{"AuthorizationPolicy", []string{"apiVersion=security.istio.io/v1"}, Requirement{"Istio", "1.22", "security.istio.io/v1"}},
}

// Requirements lists the releases a file's settings need, newest first per
// product; nil when nothing in it is recent.
func Requirements(doc []byte) []Requirement {
	var out []Requirement
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) || err != nil {
			break
		}
		if len(n.Content) != 1 {
			continue
		}
		d := n.Content[0]
		kind := str(field(d, "kind"))
		var filters []*yaml.Node
		if kind == "" || kind == "EnvoyFilter" {
			var r resourceChecker
			collectExtAuthz(&r, d, &filters)
		}
		for _, q := range requirements {
			if found(q.kind, q.path, kind, d, filters) && !slices.Contains(out, q.req) {
				out = append(out, q.req)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Requirement) int {
		if c := strings.Compare(a.Product, b.Product); c != 0 {
			return c
		}
		return -compareVersions(a.Version, b.Version)
	})
	return out
}

// compareVersions compares dotted release numbers ("1.8" < "1.31").
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return cmp.Compare(x, y)
		}
	}
	return 0
}

func found(wantKind string, path []string, kind string, d *yaml.Node, filters []*yaml.Node) bool {
	if v, ok := strings.CutPrefix(path[0], "*="); ok {
		// A value anywhere in the document (a processing mode, say).
		return (kind == wantKind || kind == "EnvoyFilter" && wantKind == "") && hasScalar(d, v, new(resourceChecker))
	}
	if wantKind == "" {
		for _, f := range filters {
			if field(f, path...) != nil {
				return true
			}
		}
		return false
	}
	if kind != wantKind {
		return false
	}
	if k, v, ok := strings.Cut(path[0], "="); ok {
		return str(field(d, k)) == v
	}
	return field(d, path...) != nil
}

// collectExtAuthz finds the ext_authz filter configurations under n.
func collectExtAuthz(r *resourceChecker, n *yaml.Node, out *[]*yaml.Node) {
	n = resolve(n)
	if r.visits++; n == nil || r.visits > maxVisits {
		return
	}
	if n.Kind == yaml.MappingNode && strings.HasSuffix(str(field(n, "@type")), "ext_authz.v3.ExtAuthz") {
		*out = append(*out, n)
		return
	}
	for _, c := range n.Content {
		collectExtAuthz(r, c, out)
	}
}

// hasScalar reports whether a scalar under n equals v.
func hasScalar(n *yaml.Node, v string, r *resourceChecker) bool {
	n = resolve(n)
	if r.visits++; n == nil || r.visits > maxVisits {
		return false
	}
	if n.Kind == yaml.ScalarNode {
		return n.Value == v
	}
	for _, c := range n.Content {
		if hasScalar(c, v, r) {
			return true
		}
	}
	return false
}
