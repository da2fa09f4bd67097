package envoyconfig

// The Envoy configurations this repository ships (envoy/, examples/) are
// checked here: each must pass Check, follow the repository's rules for the
// ext_authz filter and its routes, and every broken copy made from it in
// memory must fail with an error that names the broken thing and its line.

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

const repoRoot = "../.."

// shippedConfigs returns every Envoy bootstrap under envoy/ and examples/,
// found by content (a top-level static_resources or dynamic_resources), so
// that a new file is checked without being listed here.
func shippedConfigs(t *testing.T) map[string][]byte {
	t.Helper()
	found := make(map[string][]byte)
	for _, dir := range []string{"envoy", "examples"} {
		root := filepath.Join(repoRoot, dir)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && filepath.ToSlash(path) == repoRoot+"/"+rateLimitServiceDir {
				return filepath.SkipDir // the rate limit service's own configuration (ratelimit_test.go)
			}
			if d.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(path)) {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var top map[string]any
			if err := yaml.Unmarshal(b, &top); err != nil {
				if dir == "envoy" {
					return fmt.Errorf("%s: %w", path, err)
				}
				return nil // not ours to judge here
			}
			if _, ok := top["static_resources"]; ok {
				found[filepath.ToSlash(strings.TrimPrefix(path, repoRoot+string(filepath.Separator)))] = b
			} else if _, ok := top["dynamic_resources"]; ok {
				found[filepath.ToSlash(strings.TrimPrefix(path, repoRoot+string(filepath.Separator)))] = b
			} else if dir == "envoy" {
				return fmt.Errorf("%s is in envoy/ but is not an Envoy bootstrap", path)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"envoy/envoy.yaml", "envoy/sidecar.yaml"} {
		if _, ok := found[want]; !ok {
			t.Fatalf("%s was not found among the shipped configurations %v", want, slices.Sorted(maps.Keys(found)))
		}
	}
	return found
}

func TestShippedConfigsPass(t *testing.T) {
	for name, doc := range shippedConfigs(t) {
		t.Run(name, func(t *testing.T) {
			if err := Check(doc); err != nil {
				t.Fatalf("Check:\n%v", err)
			}
		})
	}
}

// ownedHeaders are the headers the service sets or strips upstream.
var ownedHeaders = []string{
	"authorization", "x-user-id", "x-session-id", "x-root-context-id",
	"x-parent-context-id", "x-lineage-depth", "x-actor-chain", "x-lineage-token", "x-user-email",
	"x-user-name", "x-kagent-root-context-id", "x-kagent-parent-context-id", "x-extauthz-dry-run",
}

// foreignHeaders are headers the service must never be allowed to change.
var foreignHeaders = []string{":authority", ":path", ":method", "host", "x-envoy-original-path", "cookie", "x-forwarded-for", "x-request-id"}

// TestShippedConfigsFollowRules checks what the repository promises about
// its Envoy configurations beyond Envoy's own validity.
func TestShippedConfigsFollowRules(t *testing.T) {
	for name, doc := range shippedConfigs(t) {
		t.Run(name, func(t *testing.T) {
			b, err := Parse(doc)
			if err != nil {
				t.Fatal(err)
			}
			hcms := connectionManagers(t, b)
			if len(hcms) == 0 {
				t.Fatal("no HTTP connection manager")
			}
			for _, hcm := range hcms {
				authz := extAuthzFilters(t, hcm)
				if len(authz) != 1 {
					t.Fatalf("connection manager %q has %d ext_authz filters, want 1", hcm.GetStatPrefix(), len(authz))
				}
				checkExtAuthz(t, authz[0])
				checkRoutes(t, hcm)
			}
		})
	}
}

func connectionManagers(t *testing.T, b *bootstrapv3.Bootstrap) []*hcmv3.HttpConnectionManager {
	t.Helper()
	var out []*hcmv3.HttpConnectionManager
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig().MessageIs(&hcm) {
					if err := f.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
						t.Fatal(err)
					}
					out = append(out, &hcm)
				}
			}
		}
	}
	return out
}

func extAuthzFilters(t *testing.T, hcm *hcmv3.HttpConnectionManager) []*extauthzv3.ExtAuthz {
	t.Helper()
	var out []*extauthzv3.ExtAuthz
	for _, f := range hcm.GetHttpFilters() {
		var ea extauthzv3.ExtAuthz
		if f.GetTypedConfig().MessageIs(&ea) {
			if err := f.GetTypedConfig().UnmarshalTo(&ea); err != nil {
				t.Fatal(err)
			}
			out = append(out, &ea)
		}
	}
	return out
}

func checkExtAuthz(t *testing.T, ea *extauthzv3.ExtAuthz) {
	t.Helper()
	if ea.GetFailureModeAllow() {
		t.Error("failure_mode_allow is true: an unreachable extauthz would let everyone in")
	}
	if got := ea.GetStatusOnError().GetCode(); got != 503 {
		t.Errorf("status_on_error = %d, want 503", got)
	}
	if ea.GetGrpcService().GetEnvoyGrpc().GetClusterName() == "" {
		t.Error("the filter does not call extauthz over gRPC through an Envoy cluster")
	}
	body := ea.GetWithRequestBody()
	if body.GetMaxRequestBytes() == 0 || body.GetAllowPartialMessage() || !body.GetPackAsBytes() {
		t.Errorf("with_request_body = %v, want a limit, no partial bodies, raw bytes", body)
	}
	if !ea.GetIncludePeerCertificate() || !ea.GetValidateMutations() {
		t.Error("include_peer_certificate and validate_mutations must be on")
	}
	rules := ea.GetDecoderHeaderMutationRules()
	if !rules.GetDisallowAll().GetValue() || !rules.GetDisallowIsError().GetValue() || rules.GetAllowExpression() == nil {
		t.Fatalf("decoder_header_mutation_rules = %v, want an allow-list that fails closed", rules)
	}
	re, err := regexp.Compile(rules.GetAllowExpression().GetRegex())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range ownedHeaders {
		if !re.MatchString(h) {
			t.Errorf("the service may not change %q, a header it owns", h)
		}
	}
	for _, h := range foreignHeaders {
		if re.MatchString(h) {
			t.Errorf("the service may change %q, which it does not own", h)
		}
	}
}

// checkRoutes checks, on every virtual host, that no route manipulates an
// owned header (the router would apply it after ext_authz) and that the
// well-known and JSON-RPC paths are sent to extauthz the right way.
func checkRoutes(t *testing.T, hcm *hcmv3.HttpConnectionManager) {
	t.Helper()
	rc := hcm.GetRouteConfig()
	touchesOwned(t, "route_config", rc.GetRequestHeadersToAdd(), rc.GetRequestHeadersToRemove())
	for _, vh := range rc.GetVirtualHosts() {
		touchesOwned(t, vh.GetName(), vh.GetRequestHeadersToAdd(), vh.GetRequestHeadersToRemove())
		for _, r := range vh.GetRoutes() {
			touchesOwned(t, r.GetName(), r.GetRequestHeadersToAdd(), r.GetRequestHeadersToRemove())
		}

		// Metadata and the agent card: checked, with their body too. Their
		// GETs have none (Envoy buffers only a body that is there), but a
		// POST to them reaches the same upstream, which may serve a call on
		// every path: a body the service is not given is a call it cannot
		// name, and task and context ownership would not see it.
		for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/.well-known/agent-card.json"} {
			r := matchRoute(vh, path)
			if r == nil || r.GetDirectResponse() != nil {
				t.Errorf("%s: %s reaches no upstream", vh.GetName(), path)
				continue
			}
			cs, disabled := perRoute(t, vh, r)
			if disabled {
				t.Errorf("%s: %s bypasses extauthz", vh.GetName(), path)
			}
			if cs.GetDisableRequestBodyBuffering() {
				t.Errorf("%s: %s is checked without the body its upstream reads", vh.GetName(), path)
			}
		}
		// JSON-RPC endpoints: checked with their body, under a named route.
		for _, path := range []string{"/mcp", "/a2a", "/"} {
			r := matchRoute(vh, path)
			if r == nil || r.GetDirectResponse() != nil {
				continue // not served by this configuration
			}
			cs, disabled := perRoute(t, vh, r)
			if disabled || cs.GetDisableRequestBodyBuffering() {
				t.Errorf("%s: %s is not checked with its body", vh.GetName(), path)
			}
			if cs.GetContextExtensions()["route"] == "" {
				t.Errorf("%s: %s names no extauthz route", vh.GetName(), path)
			}
		}
	}
}

func touchesOwned(t *testing.T, where string, add []*corev3.HeaderValueOption, remove []string) {
	t.Helper()
	for _, h := range add {
		if slices.Contains(ownedHeaders, strings.ToLower(h.GetHeader().GetKey())) {
			t.Errorf("%s adds %q, which extauthz owns", where, h.GetHeader().GetKey())
		}
	}
	for _, h := range remove {
		if slices.Contains(ownedHeaders, strings.ToLower(h)) {
			t.Errorf("%s removes %q, which extauthz owns", where, h)
		}
	}
}

// matchRoute returns the first route of vh whose path match selects path
// (prefix, exact path and path_separated_prefix; other matchers never
// match).
func matchRoute(vh *routev3.VirtualHost, path string) *routev3.Route {
	for _, r := range vh.GetRoutes() {
		m := r.GetMatch()
		switch {
		case m.GetPrefix() != "" && strings.HasPrefix(path, m.GetPrefix()):
			return r
		case m.GetPath() != "" && path == m.GetPath():
			return r
		case m.GetPathSeparatedPrefix() != "":
			p := m.GetPathSeparatedPrefix()
			if path == p || strings.HasPrefix(path, p+"/") {
				return r
			}
		}
	}
	return nil
}

// perRoute merges the ext_authz per-route configs of vh and r the way
// Envoy does: check settings merge, context extensions key by key with the
// route winning; disabled on the route wins.
func perRoute(t *testing.T, vh *routev3.VirtualHost, r *routev3.Route) (*extauthzv3.CheckSettings, bool) {
	t.Helper()
	merged := &extauthzv3.CheckSettings{ContextExtensions: map[string]string{}}
	disabled := false
	for _, cfg := range []*anypb.Any{vh.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"], r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"]} {
		if cfg == nil {
			continue
		}
		var pr extauthzv3.ExtAuthzPerRoute
		if err := cfg.UnmarshalTo(&pr); err != nil {
			t.Fatal(err)
		}
		if pr.GetDisabled() {
			disabled = true
			continue
		}
		cs := pr.GetCheckSettings()
		for k, v := range cs.GetContextExtensions() {
			merged.ContextExtensions[k] = v
		}
		if cs.GetDisableRequestBodyBuffering() {
			merged.DisableRequestBodyBuffering = true
		}
	}
	return merged, disabled
}

// TestBrokenCopiesFail breaks each shipped configuration in memory, one
// thing at a time, and requires Check to refuse every copy with an error
// that names what was broken (and, for schema errors, the line it is on).
func TestBrokenCopiesFail(t *testing.T) {
	for name, doc := range shippedConfigs(t) {
		t.Run(name, func(t *testing.T) {
			variants := brokenVariants(t, doc)
			if len(variants) < 6 {
				t.Fatalf("only %d broken variants generated", len(variants))
			}
			t.Logf("%d broken variants", len(variants))
			for _, v := range variants {
				err := Check(v.doc)
				if err == nil {
					t.Errorf("%s: Check passed", v.name)
					continue
				}
				if !strings.Contains(err.Error(), v.want) {
					t.Errorf("%s: error does not mention %q:\n%v", v.name, v.want, err)
					continue
				}
				if v.lineText != "" {
					line := lineOf(err.Error(), v.want)
					if line == 0 || !strings.Contains(lineText(v.doc, line), v.lineText) {
						t.Errorf("%s: error points at line %d (%q), want the line with %q:\n%v", v.name, line, lineText(v.doc, line), v.lineText, err)
					}
				}
			}
		})
	}
}

type variant struct {
	name string
	doc  []byte
	want string
	// lineText, when set, must be on the line the error names.
	lineText string
}

func brokenVariants(t *testing.T, doc []byte) []variant {
	t.Helper()
	root, err := decodeYAML(doc)
	if err != nil {
		t.Fatal(err)
	}
	marshal := func() []byte {
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(root); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	var out []variant

	// Misspelled fields: at the top and as the first field of every Any,
	// which proves that typed_config contents are decoded strictly too.
	for _, n := range mappings(root) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Value == "@type" || (n != root && !hasKey(n, "@type")) {
				continue
			}
			old := k.Value
			k.Value = old + "x"
			out = append(out, variant{"misspelled " + old, marshal(), fmt.Sprintf("unknown field %q", k.Value), k.Value + ":"})
			k.Value = old
			break
		}
	}

	// Bad enum values, wherever the schema has an enum.
	var enums []*yaml.Node
	w := schemaWalker{onEnum: func(n *yaml.Node) { enums = append(enums, n) }}
	w.message(root, (&bootstrapv3.Bootstrap{}).ProtoReflect().Descriptor(), "")
	if len(enums) == 0 {
		t.Fatal("no enum values found to break")
	}
	for _, n := range enums {
		old := n.Value
		n.Value = "NOT_A_VALUE"
		out = append(out, variant{"bad enum " + old, marshal(), `invalid value "NOT_A_VALUE"`, "NOT_A_VALUE"})
		n.Value = old
	}

	// Missing clusters: rename each referenced cluster's definition.
	b, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	v := &validator{}
	v.bootstrap(b)
	grpc := make(map[string]bool)
	referenced := make(map[string]bool)
	for _, ref := range v.refs {
		referenced[ref.name] = true
		grpc[ref.name] = grpc[ref.name] || ref.grpc
	}
	for _, c := range seq(mapGet(mapGet(root, "static_resources"), "clusters")) {
		nameNode := mapGet(c, "name")
		if nameNode == nil || !referenced[nameNode.Value] {
			continue
		}
		old := nameNode.Value
		nameNode.Value = old + "-gone"
		out = append(out, variant{"missing cluster " + old, marshal(), fmt.Sprintf("names cluster %q, which is not defined", old), ""})
		nameNode.Value = old

		if grpc[old] {
			saved := c.Content
			c.Content = withoutKey(c.Content, "typed_extension_protocol_options")
			out = append(out, variant{"HTTP/1 gRPC cluster " + old, marshal(), fmt.Sprintf("gRPC cluster %q does not speak HTTP/2", old), ""})
			c.Content = saved
		}
	}

	// The router moved first.
	for _, n := range mappings(root) {
		filters := mapGet(n, "http_filters")
		if filters == nil || len(filters.Content) < 2 {
			continue
		}
		saved := filters.Content
		last := len(saved) - 1
		filters.Content = append([]*yaml.Node{saved[last]}, saved[:last]...)
		out = append(out, variant{"router first", marshal(), "the router is not the last HTTP filter", ""})
		filters.Content = saved
	}

	// A port out of range, which only the validation rules catch.
	for _, n := range mappings(root) {
		port := mapGet(n, "port_value")
		if port == nil {
			continue
		}
		old := port.Value
		port.Value = "70000"
		out = append(out, variant{"port 70000", marshal(), "value must be less than or equal to 65535", ""})
		port.Value = old
		break
	}

	// A per-route config under a name no filter has.
	for _, n := range mappings(root) {
		per := mapGet(n, "typed_per_filter_config")
		if per == nil || len(per.Content) < 2 {
			continue
		}
		k := per.Content[0]
		old := k.Value
		k.Value = old + "-typo"
		out = append(out, variant{"per-route config typo", marshal(), fmt.Sprintf("no HTTP filter is named %q", k.Value), ""})
		k.Value = old
		break
	}
	return out
}

// mappings lists every mapping node in the tree, in document order.
func mappings(n *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			out = append(out, n)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

func mapGet(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func hasKey(n *yaml.Node, key string) bool { return mapGet(n, key) != nil }

func seq(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

func withoutKey(content []*yaml.Node, key string) []*yaml.Node {
	out := make([]*yaml.Node, 0, len(content))
	for i := 0; i+1 < len(content); i += 2 {
		if content[i].Value != key {
			out = append(out, content[i], content[i+1])
		}
	}
	return out
}

var lineRE = regexp.MustCompile(`(?m)^line (\d+): .*`)

// lineOf returns the line number of the problem that mentions want.
func lineOf(errText, want string) int {
	for _, m := range lineRE.FindAllStringSubmatch(errText, -1) {
		if strings.Contains(m[0], want) {
			var n int
			fmt.Sscan(m[1], &n)
			return n
		}
	}
	return 0
}

func lineText(doc []byte, line int) string {
	lines := strings.Split(string(doc), "\n")
	if line < 1 || line > len(lines) {
		return ""
	}
	return lines[line-1]
}
