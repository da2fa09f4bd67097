package envoyconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// CheckFile checks one file a user deploys extauthz with: an Envoy
// bootstrap (YAML or JSON, checked as [Check] does), or YAML documents of the
// kinds that wire extauthz into Istio and Envoy Gateway: an Istio mesh
// config (an IstioOperator's spec.meshConfig, the istio ConfigMap's mesh key,
// or a bare mesh config with extensionProviders), EnvoyFilter,
// AuthorizationPolicy and Envoy Gateway's SecurityPolicy. It reports every
// problem found, with its document's line, and refuses a file it does not
// recognise.
func CheckFile(doc []byte) error {
	if len(doc) > MaxSize {
		return fmt.Errorf("file is %d bytes, more than the %d accepted", len(doc), MaxSize)
	}
	var docs []*yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("YAML: %w", err)
		}
		if len(n.Content) == 1 && n.Content[0].Kind == yaml.MappingNode {
			docs = append(docs, n.Content[0])
		}
	}
	if len(docs) == 0 {
		return errors.New("no YAML or JSON document found")
	}
	if len(docs) == 1 && (field(docs[0], "static_resources") != nil || field(docs[0], "dynamic_resources") != nil) {
		if err := Check(doc); err != nil {
			return err
		}
		// Valid for Envoy; now the rules for the filter that calls extauthz.
		r := &resourceChecker{}
		r.extAuthzFilters(docs[0], "")
		return r.err()
	}
	r := &resourceChecker{}
	for _, d := range docs {
		r.document(d)
	}
	if r.checked == 0 && len(r.problems) == 0 {
		return errors.New("nothing to check: no Envoy bootstrap, mesh config, EnvoyFilter, AuthorizationPolicy or SecurityPolicy")
	}
	return r.err()
}

type resourceChecker struct {
	problems []*Problem
	checked  int // documents of a kind this checker knows
	visits   int // nodes walked, bounded like the schema walk's
}

func (r *resourceChecker) report(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	r.problems = append(r.problems, &Problem{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (r *resourceChecker) err() error {
	if len(r.problems) == 0 {
		return nil
	}
	return join(r.problems)
}

// field returns the value of key in the mapping n, nil when absent.
func field(n *yaml.Node, keys ...string) *yaml.Node {
	for _, key := range keys {
		n = resolve(n)
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return resolve(n)
}

func str(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

func (r *resourceChecker) document(d *yaml.Node) {
	kind := str(field(d, "kind"))
	name := str(field(d, "metadata", "name"))
	where := kind
	if name != "" {
		where = kind + " " + name
	}
	known := true
	defer func() {
		if known {
			r.checked++
		}
	}()
	switch kind {
	case "IstioOperator":
		mc := field(d, "spec", "meshConfig")
		if mc == nil {
			r.report(d, where, "no spec.meshConfig")
			return
		}
		r.meshConfig(mc, where+": spec.meshConfig")
	case "ConfigMap":
		mesh := field(d, "data", "mesh")
		if mesh == nil {
			known = false // not the istio ConfigMap
			return
		}
		var mc yaml.Node
		if err := yaml.Unmarshal([]byte(mesh.Value), &mc); err != nil || len(mc.Content) != 1 {
			r.report(mesh, where+": data.mesh", "not a YAML mesh config: %v", err)
			return
		}
		// Lines inside the embedded document count from its first line.
		shift(mc.Content[0], mesh.Line)
		r.meshConfig(mc.Content[0], where+": data.mesh")
	case "EnvoyFilter":
		r.envoyFilter(d, where)
	case "AuthorizationPolicy":
		r.authorizationPolicy(d, where)
	case "SecurityPolicy":
		r.securityPolicy(d, where)
	case "":
		if field(d, "extensionProviders") != nil {
			r.meshConfig(d, "meshConfig")
			return
		}
		if mc := field(d, "meshConfig"); mc != nil { // istiod Helm values
			r.meshConfig(mc, "meshConfig")
			return
		}
		r.report(d, "", "neither an Envoy bootstrap (static_resources, dynamic_resources), a mesh config (extensionProviders) nor a Kubernetes resource (kind)")
	default:
		known = false // Gateway, HTTPRoute, ...: nothing of extauthz's to check
	}
}

// shift moves the lines of an embedded document to the file's lines: a
// literal block starts on the line after its key.
func shift(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shift(c, by)
	}
}

// meshConfig checks the extauthz extension providers of an Istio mesh
// config: they must fail closed with 503 and a timeout, and send the body
// whole, as raw bytes.
func (r *resourceChecker) meshConfig(mc *yaml.Node, where string) {
	providers := items(field(mc, "extensionProviders"))
	if len(providers) == 0 {
		r.report(mc, where, "no extensionProviders")
		return
	}
	for i, p := range providers {
		name := str(field(p, "name"))
		at := fmt.Sprintf("%s.extensionProviders[%s]", where, nameOr(name, i))
		g := field(p, "envoyExtAuthzGrpc")
		if g == nil {
			if field(p, "envoyExtAuthzHttp") != nil {
				r.report(p, at, "envoyExtAuthzHttp: use envoyExtAuthzGrpc; extauthz's HTTP front end is for nginx, Traefik and Caddy")
			}
			continue
		}
		if str(field(g, "service")) == "" || str(field(g, "port")) == "" {
			r.report(g, at, "envoyExtAuthzGrpc needs service and port")
		}
		if str(field(g, "failOpen")) == "true" {
			r.report(field(g, "failOpen"), at, "failOpen: true lets every request through while extauthz is unreachable")
		}
		if s := str(field(g, "statusOnError")); s != "503" {
			r.report(g, at, "statusOnError %q: want \"503\", so clients retry instead of being told they are forbidden", s)
		}
		if str(field(g, "timeout")) == "" {
			r.report(g, at, "no timeout: a check would wait for Istio's default")
		}
		body := field(g, "includeRequestBodyInCheck")
		if body == nil {
			r.report(g, at, "no includeRequestBodyInCheck: rules on JSON-RPC methods and tools need the body")
			continue
		}
		if n, _ := strconv.Atoi(str(field(body, "maxRequestBytes"))); n <= 0 {
			r.report(body, at, "includeRequestBodyInCheck.maxRequestBytes must be set")
		}
		if str(field(body, "allowPartialMessage")) == "true" {
			r.report(field(body, "allowPartialMessage"), at, "allowPartialMessage: true sends cut bodies, which extauthz refuses")
		}
		if str(field(body, "packAsBytes")) != "true" {
			r.report(body, at, "packAsBytes must be true: extauthz reads the body as raw bytes")
		}
	}
}

func (r *resourceChecker) authorizationPolicy(d *yaml.Node, where string) {
	spec := field(d, "spec")
	if str(field(spec, "action")) != "CUSTOM" {
		return // not extauthz's business
	}
	if str(field(spec, "provider", "name")) == "" {
		r.report(spec, where, "action CUSTOM needs provider.name, an extension provider of the mesh config")
	}
	rules := items(field(spec, "rules"))
	if len(rules) == 0 {
		r.report(spec, where, "no rules: a CUSTOM policy without rules matches nothing")
	}
	for i, rule := range rules {
		to := items(field(rule, "to"))
		if len(to) == 0 {
			r.report(rule, fmt.Sprintf("%s: rules[%d]", where, i), "a rule without paths: it would also match TCP traffic, which extauthz cannot judge")
			continue
		}
		for _, t := range to {
			if len(items(field(t, "operation", "paths"))) == 0 {
				r.report(t, fmt.Sprintf("%s: rules[%d]", where, i), "a rule without paths: it would also match TCP traffic, which extauthz cannot judge")
			}
		}
	}
}

func (r *resourceChecker) securityPolicy(d *yaml.Node, where string) {
	ea := field(d, "spec", "extAuth")
	if ea == nil {
		return // not extauthz's business
	}
	at := where + ": spec.extAuth"
	if field(ea, "grpc") == nil {
		r.report(ea, at, "no grpc: extauthz speaks ext_authz over gRPC to Envoy Gateway")
	} else if len(items(field(ea, "grpc", "backendRefs"))) == 0 && field(ea, "grpc", "backendRef") == nil {
		r.report(field(ea, "grpc"), at, "grpc needs backendRefs naming the extauthz Service")
	}
	if str(field(ea, "failOpen")) == "true" {
		r.report(field(ea, "failOpen"), at, "failOpen: true lets every request through while extauthz is unreachable")
	}
	if s := str(field(ea, "statusOnError")); s != "" && s != "503" {
		r.report(field(ea, "statusOnError"), at, "statusOnError %s: want 503, so clients retry instead of being told they are forbidden", s)
	}
	if n, _ := strconv.Atoi(str(field(ea, "bodyToExtAuth", "maxRequestBytes"))); n <= 0 {
		r.report(ea, at, "bodyToExtAuth.maxRequestBytes must be set: rules on JSON-RPC methods and tools need the body")
	}
}

// envoyFilter checks the HTTP filters an EnvoyFilter inserts as Envoy
// configuration, and an ext_authz filter against the same rules as a
// bootstrap's.
func (r *resourceChecker) envoyFilter(d *yaml.Node, where string) {
	for i, p := range items(field(d, "spec", "configPatches")) {
		value := field(p, "patch", "value")
		tc := field(value, "typed_config")
		if tc == nil {
			tc = field(value, "typedConfig")
		}
		if tc == nil {
			continue
		}
		at := fmt.Sprintf("%s: configPatches[%d].patch.value", where, i)
		var w schemaWalker
		w.any(tc, at+".typed_config")
		r.problems = append(r.problems, w.problems...)
		if len(w.problems) > 0 || !strings.HasSuffix(str(field(tc, "@type")), "ext_authz.v3.ExtAuthz") {
			continue
		}
		name := str(field(value, "name"))
		if name == "" {
			r.report(value, at, "the filter needs a name (envoy.filters.http.ext_authz)")
		}
		r.extAuthz(tc, at)
	}
}

// extAuthzFilters applies the ext_authz rules to every ext_authz filter
// configuration under n.
func (r *resourceChecker) extAuthzFilters(n *yaml.Node, path string) {
	n = resolve(n)
	if r.visits++; n == nil || r.visits > maxVisits {
		return
	}
	if n.Kind == yaml.MappingNode && strings.HasSuffix(str(field(n, "@type")), "ext_authz.v3.ExtAuthz") {
		r.extAuthz(n, path)
		return
	}
	for i, c := range n.Content {
		p := path
		if n.Kind == yaml.MappingNode && i%2 == 1 {
			p = join2(path, n.Content[i-1].Value)
		} else if n.Kind == yaml.SequenceNode {
			p = fmt.Sprintf("%s[%s]", path, itemName(c, i))
		}
		r.extAuthzFilters(c, p)
	}
}

// extAuthz applies the repository's rules for the ext_authz filter to its
// typed_config node.
func (r *resourceChecker) extAuthz(tc *yaml.Node, at string) {
	get := func(keys ...string) *yaml.Node {
		if n := field(tc, keys...); n != nil {
			return n
		}
		camel := make([]string, len(keys))
		for i, k := range keys {
			camel[i] = camelCase(k)
		}
		return field(tc, camel...)
	}
	if str(get("failure_mode_allow")) == "true" {
		r.report(get("failure_mode_allow"), at, "failure_mode_allow is true: an unreachable extauthz would let everyone in")
	}
	if s := str(get("status_on_error", "code")); s != "503" && s != "ServiceUnavailable" {
		r.report(tc, at, "status_on_error.code %q: want 503 (ServiceUnavailable)", s)
	}
	if get("grpc_service") == nil {
		r.report(tc, at, "no grpc_service: extauthz speaks ext_authz over gRPC")
	}
	body := get("with_request_body")
	if n, _ := strconv.Atoi(str(get("with_request_body", "max_request_bytes"))); body == nil || n <= 0 {
		r.report(tc, at, "with_request_body.max_request_bytes must be set: rules on JSON-RPC methods and tools need the body")
	} else {
		if str(get("with_request_body", "allow_partial_message")) == "true" {
			r.report(body, at, "with_request_body.allow_partial_message: true sends cut bodies, which extauthz refuses")
		}
		if str(get("with_request_body", "pack_as_bytes")) != "true" {
			r.report(body, at, "with_request_body.pack_as_bytes must be true: extauthz reads the body as raw bytes")
		}
	}
}

func camelCase(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}
