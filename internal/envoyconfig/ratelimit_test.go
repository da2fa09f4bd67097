package envoyconfig

// envoy/ratelimit/envoy.yaml feeds Envoy's global rate limit filter with
// descriptors built from extauthz's dynamic metadata; the limits live in the
// envoyproxy/ratelimit service's configuration beside it. Both are checked
// here offline: the bootstrap passes Check (repo_test.go finds it), the
// filter sits between ext_authz and the router, every descriptor value is a
// metadata key extauthz really returns, and every descriptor the filter
// sends has a limit in the service configuration, decoded strictly into the
// service's own RateLimitConfig message.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/lineage"
)

const (
	rateLimitBootstrap  = "envoy/ratelimit/envoy.yaml"
	rateLimitServiceDir = "envoy/ratelimit/config"
	extAuthzNamespace   = "envoy.filters.http.ext_authz"
)

// allowedMetadata is the dynamic metadata extauthz returns for an allowed
// tools/call with lineage: what the descriptors may be built from.
func allowedMetadata(t *testing.T) map[string]*structpb.Value {
	t.Helper()
	v := &check.Verdict{
		Outcome: check.Allowed, Route: "mcp",
		Grant:   check.NewGrant(check.Identity{Route: "mcp", Subject: "corp|alice", Issuer: "corp"}),
		Call:    check.Call{Protocol: jsonrpc.ProtocolMCP, Method: "tools/call", Name: "search"},
		Lineage: lineage.Result{Root: "conv-1", Depth: 0},
	}
	return envoyauthz.Response(v).GetDynamicMetadata().GetFields()
}

func rateLimitFilter(t *testing.T, hcm *hcmv3.HttpConnectionManager) *ratelimitv3.RateLimit {
	t.Helper()
	var names []string
	var rl *ratelimitv3.RateLimit
	for _, f := range hcm.GetHttpFilters() {
		names = append(names, f.GetName())
		var m ratelimitv3.RateLimit
		if f.GetTypedConfig().MessageIs(&m) {
			if err := f.GetTypedConfig().UnmarshalTo(&m); err != nil {
				t.Fatal(err)
			}
			rl = &m
		}
	}
	want := []string{"envoy.filters.http.ext_authz", "envoy.filters.http.ratelimit", "envoy.filters.http.router"}
	if !slices.Equal(names, want) {
		t.Fatalf("http filters %v, want %v: the rate limit filter reads what ext_authz decided", names, want)
	}
	return rl
}

// descriptorKeys turns a route's rate_limits into the descriptor key
// lists Envoy sends, checking that every value comes from a metadata key
// extauthz returns.
func descriptorKeys(t *testing.T, limits []*routev3.RateLimit, md map[string]*structpb.Value) [][]string {
	t.Helper()
	var out [][]string
	for i, rl := range limits {
		var keys []string
		for _, a := range rl.GetActions() {
			m := a.GetMetadata()
			if m == nil {
				t.Fatalf("rate_limits[%d]: action %v is not built from extauthz's dynamic metadata", i, a)
			}
			mk := m.GetMetadataKey()
			if m.GetSource() != routev3.RateLimit_Action_MetaData_DYNAMIC || mk.GetKey() != extAuthzNamespace || len(mk.GetPath()) != 1 {
				t.Fatalf("rate_limits[%d]: %s reads %v, want one key of the ext_authz dynamic metadata", i, m.GetDescriptorKey(), mk)
			}
			if _, ok := md[mk.GetPath()[0].GetKey()]; !ok {
				t.Errorf("rate_limits[%d]: %s reads metadata key %q, which extauthz does not return (it returns %v)",
					i, m.GetDescriptorKey(), mk.GetPath()[0].GetKey(), slices.Sorted(mapKeys(md)))
			}
			if m.GetDefaultValue() != "" {
				t.Errorf("rate_limits[%d]: %s has a default value: requests without it would share one budget", i, m.GetDescriptorKey())
			}
			keys = append(keys, m.GetDescriptorKey())
		}
		out = append(out, keys)
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// loadServiceConfig decodes a ratelimit service file strictly: YAML to
// JSON, the service's lower-case units to the proto's enum names.
func loadServiceConfig(doc []byte) (*rlsconfv3.RateLimitConfig, error) {
	j, err := k8syaml.YAMLToJSONStrict(doc)
	if err != nil {
		return nil, err
	}
	var raw any
	if err := k8syaml.Unmarshal(j, &raw); err != nil {
		return nil, err
	}
	upperUnits(raw)
	j, err = k8syaml.Marshal(raw)
	if err != nil {
		return nil, err
	}
	if j, err = k8syaml.YAMLToJSON(j); err != nil {
		return nil, err
	}
	var c rlsconfv3.RateLimitConfig
	if err := protojson.Unmarshal(j, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func upperUnits(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "unit" {
				v[k] = strings.ToUpper(s)
				continue
			}
			upperUnits(e)
		}
	case []any:
		for _, e := range v {
			upperUnits(e)
		}
	}
}

// limitFor finds the limit the service applies to a descriptor whose
// entries have these keys and values nobody configured by name (the
// service's rule: a keyed entry without a value matches every value).
func limitFor(ds []*rlsconfv3.RateLimitDescriptor, keys []string) *rlsconfv3.RateLimitPolicy {
	for _, d := range ds {
		if d.GetKey() != keys[0] || d.GetValue() != "" {
			continue
		}
		if len(keys) == 1 {
			return d.GetRateLimit()
		}
		return limitFor(d.GetDescriptors(), keys[1:])
	}
	return nil
}

// checkPolicies requires every limit in the tree to be a real one.
func checkPolicies(t *testing.T, path string, ds []*rlsconfv3.RateLimitDescriptor) {
	t.Helper()
	for _, d := range ds {
		p := fmt.Sprintf("%s/%s", path, d.GetKey())
		if d.GetValue() != "" {
			p += "=" + d.GetValue()
		}
		if d.GetKey() == "" {
			t.Errorf("%s: descriptor without a key", p)
		}
		if rl := d.GetRateLimit(); rl != nil {
			if rl.GetUnlimited() || rl.GetRequestsPerUnit() == 0 || rl.GetUnit() == rlsconfv3.RateLimitUnit_UNKNOWN {
				t.Errorf("%s: limit %v is no limit", p, rl)
			}
		}
		checkPolicies(t, p, d.GetDescriptors())
	}
}

func TestRateLimitConfigs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, rateLimitBootstrap))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	hcms := connectionManagers(t, b)
	if len(hcms) != 1 {
		t.Fatalf("%d connection managers, want 1", len(hcms))
	}
	rl := rateLimitFilter(t, hcms[0])
	if rl.GetFailureModeDeny() {
		t.Log("failure_mode_deny is on: an unreachable rate limit service refuses every request")
	}
	if rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() == "" {
		t.Error("the filter does not reach the rate limit service through an Envoy cluster")
	}
	// Route-level rate_limits work on every Envoy release (the filter's own
	// rate_limits need 1.35): the JSON-RPC routes carry them.
	if len(rl.GetRateLimits()) != 0 {
		t.Error("the filter has rate_limits of its own: they would override the routes'")
	}
	want := [][]string{{"subject"}, {"subject", "tool"}, {"root"}}
	var descriptors [][]string
	md := allowedMetadata(t)
	for _, vh := range hcms[0].GetRouteConfig().GetVirtualHosts() {
		for _, path := range []string{"/mcp", "/a2a"} {
			r := matchRoute(vh, path)
			if r == nil {
				t.Fatalf("%s: no route serves %s", vh.GetName(), path)
			}
			descriptors = descriptorKeys(t, r.GetRoute().GetRateLimits(), md)
			if !slices.EqualFunc(descriptors, want, slices.Equal) {
				t.Errorf("%s %s: descriptors %v, want %v", vh.GetName(), path, descriptors, want)
			}
		}
	}

	files, err := filepath.Glob(filepath.Join(repoRoot, rateLimitServiceDir, "*.yaml"))
	if err != nil || len(files) != 1 {
		t.Fatalf("service configurations %v (%v), want one", files, err)
	}
	sdoc, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	svc, err := loadServiceConfig(sdoc)
	if err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	if svc.GetDomain() != rl.GetDomain() {
		t.Errorf("service domain %q, filter domain %q", svc.GetDomain(), rl.GetDomain())
	}
	checkPolicies(t, "", svc.GetDescriptors())
	for _, keys := range descriptors {
		if limitFor(svc.GetDescriptors(), keys) == nil {
			t.Errorf("descriptor %v has no limit in the service configuration", keys)
		}
	}
}

// TestServiceConfigStrict: the service configuration's decoder refuses what
// the service would refuse or misread.
func TestServiceConfigStrict(t *testing.T) {
	tests := []struct {
		name, doc string
	}{
		{"unknown field", "domain: d\ndescriptors:\n- key: subject\n  rate_limt: {unit: minute, requests_per_unit: 1}\n"},
		{"bad unit", "domain: d\ndescriptors:\n- key: subject\n  rate_limit: {unit: fortnight, requests_per_unit: 1}\n"},
		{"duplicate key", "domain: d\ndomain: e\n"},
		{"negative requests", "domain: d\ndescriptors:\n- key: subject\n  rate_limit: {unit: minute, requests_per_unit: -1}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := loadServiceConfig([]byte(tc.doc)); err == nil {
				t.Error("accepted")
			}
		})
	}
	if _, err := loadServiceConfig([]byte("domain: d\ndescriptors:\n- key: subject\n  rate_limit: {unit: minute, requests_per_unit: 1}\n")); err != nil {
		t.Errorf("a valid configuration was refused: %v", err)
	}
}
