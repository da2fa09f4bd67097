package deploy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestIstioExtProc: the EnvoyFilter that adds the response path decodes
// strictly into Envoy's v3 HttpFilter with an ExternalProcessor that passes
// the API's validation, follows ext_authz on the workloads a CUSTOM
// AuthorizationPolicy sends to extauthz, calls the extauthz Service's
// cluster, fails closed and is set up as docs/extproc.md says; and that it
// gives the session's GET stream a route of its own whose answer goes to
// the processor in full duplex, as envoy/extproc.yaml does.
func TestIstioExtProc(t *testing.T) {
	docs := loadDocs(t)
	svc := one(t, docs, "Service").meta.Metadata
	cluster := fmt.Sprintf("outbound|%d||%s.%s.svc.cluster.local", servicePort(t, docs, "grpc").Port, svc.Name, svc.Namespace)
	selected := map[string]bool{} // namespace/label=value of CUSTOM extauthz policies
	for _, d := range find(docs, "AuthorizationPolicy") {
		var ap struct {
			Spec struct {
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
				Action   string                `yaml:"action"`
				Provider struct{ Name string } `yaml:"provider"`
			} `yaml:"spec"`
		}
		d.decode(t, &ap)
		for k, v := range ap.Spec.Selector.MatchLabels {
			if ap.Spec.Action == "CUSTOM" {
				selected[d.meta.Metadata.Namespace+"/"+k+"="+v] = true
			}
		}
	}
	filters := find(docs, "EnvoyFilter")
	if len(filters) == 0 {
		t.Fatal("no EnvoyFilter adds the response path")
	}
	for _, d := range filters {
		var ef struct {
			Spec struct {
				WorkloadSelector struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"workloadSelector"`
				ConfigPatches []struct {
					ApplyTo string `yaml:"applyTo"`
					Match   struct {
						Context            string `yaml:"context"`
						RouteConfiguration struct {
							Vhost struct {
								Name string `yaml:"name"`
							} `yaml:"vhost"`
						} `yaml:"routeConfiguration"`
						Listener struct {
							FilterChain struct {
								Filter struct {
									Name      string `yaml:"name"`
									SubFilter struct {
										Name string `yaml:"name"`
									} `yaml:"subFilter"`
								} `yaml:"filter"`
							} `yaml:"filterChain"`
						} `yaml:"listener"`
					} `yaml:"match"`
					Patch struct {
						Operation string         `yaml:"operation"`
						Value     map[string]any `yaml:"value"`
					} `yaml:"patch"`
				} `yaml:"configPatches"`
			} `yaml:"spec"`
		}
		d.decode(t, &ef)
		name, ns := d.meta.Metadata.Name, d.meta.Metadata.Namespace
		if len(ef.Spec.WorkloadSelector.Labels) == 0 {
			t.Errorf("EnvoyFilter %s applies to every workload of %s", name, ns)
		}
		for k, v := range ef.Spec.WorkloadSelector.Labels {
			if !selected[ns+"/"+k+"="+v] {
				t.Errorf("EnvoyFilter %s selects %s=%s, which no CUSTOM AuthorizationPolicy sends to extauthz: ext_proc would have no identity", name, k, v)
			}
		}
		if len(ef.Spec.ConfigPatches) != 2 {
			t.Fatalf("EnvoyFilter %s: %d patches, want the filter and the stream's route", name, len(ef.Spec.ConfigPatches))
		}
		p := ef.Spec.ConfigPatches[0]
		if p.ApplyTo != "HTTP_FILTER" || p.Match.Context != "SIDECAR_INBOUND" || p.Patch.Operation != "INSERT_AFTER" ||
			p.Match.Listener.FilterChain.Filter.Name != "envoy.filters.network.http_connection_manager" ||
			p.Match.Listener.FilterChain.Filter.SubFilter.Name != "envoy.filters.http.ext_authz" {
			t.Errorf("EnvoyFilter %s must insert the filter right after ext_authz in the inbound connection manager: %+v", name, p)
		}
		raw, err := json.Marshal(p.Patch.Value)
		if err != nil {
			t.Fatal(err)
		}
		var hf hcmv3.HttpFilter
		if err := protojson.Unmarshal(raw, &hf); err != nil {
			t.Fatalf("EnvoyFilter %s: the filter is not an Envoy v3 HttpFilter: %v", name, err)
		}
		var ep extprocv3.ExternalProcessor
		if err := hf.GetTypedConfig().UnmarshalTo(&ep); err != nil {
			t.Fatalf("EnvoyFilter %s: typed_config is not an ExternalProcessor: %v", name, err)
		}
		if err := hf.ValidateAll(); err != nil {
			t.Errorf("EnvoyFilter %s: %v", name, err)
		}
		if err := ep.ValidateAll(); err != nil {
			t.Errorf("EnvoyFilter %s: %v", name, err)
		}
		if got := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got != cluster {
			t.Errorf("EnvoyFilter %s calls cluster %q, the extauthz Service's is %q", name, got, cluster)
		}
		m := ep.GetProcessingMode()
		if ep.GetFailureModeAllow() || m.GetRequestBodyMode() != extprocv3.ProcessingMode_BUFFERED ||
			m.GetResponseBodyMode() != extprocv3.ProcessingMode_NONE || !ep.GetAllowModeOverride() ||
			!slices.Contains(ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(), "envoy.filters.http.ext_authz") ||
			ep.GetMessageTimeout().AsDuration() <= 0 {
			t.Errorf("EnvoyFilter %s: must fail closed, buffer the request body, ask for responses by mode override, forward ext_authz's metadata and set message_timeout", name)
		}

		sp := ef.Spec.ConfigPatches[1]
		if sp.ApplyTo != "HTTP_ROUTE" || sp.Match.Context != "SIDECAR_INBOUND" || sp.Patch.Operation != "INSERT_FIRST" ||
			!strings.HasPrefix(sp.Match.RouteConfiguration.Vhost.Name, "inbound|http|") {
			t.Errorf("EnvoyFilter %s: the stream's route must come first in the workload's inbound virtual host: %+v", name, sp)
		}
		raw, err = json.Marshal(sp.Patch.Value)
		if err != nil {
			t.Fatal(err)
		}
		var rt routev3.Route
		if err := protojson.Unmarshal(raw, &rt); err != nil {
			t.Fatalf("EnvoyFilter %s: the stream's route is not an Envoy v3 Route: %v", name, err)
		}
		if err := rt.ValidateAll(); err != nil {
			t.Errorf("EnvoyFilter %s: %v", name, err)
		}
		port := strings.TrimPrefix(sp.Match.RouteConfiguration.Vhost.Name, "inbound|http|")
		if got := rt.GetRoute().GetCluster(); got != "inbound|"+port+"||" {
			t.Errorf("EnvoyFilter %s: the stream's route goes to %q, want the workload's inbound cluster inbound|%s||", name, got, port)
		}
		if rt.GetMatch().GetPathSeparatedPrefix() != "/mcp" || !matchesGET(rt.GetMatch().GetHeaders()) {
			t.Errorf("EnvoyFilter %s: the stream's route must match GET on /mcp: %v", name, rt.GetMatch())
		}
		if rt.GetRoute().GetTimeout() == nil || rt.GetRoute().GetTimeout().AsDuration() != 0 {
			t.Errorf("EnvoyFilter %s: the stream's route must not time out (timeout: 0s)", name)
		}
		var per extprocv3.ExtProcPerRoute
		if err := rt.GetTypedPerFilterConfig()["envoy.filters.http.ext_proc"].UnmarshalTo(&per); err != nil {
			t.Fatalf("EnvoyFilter %s: the stream's route has no ExtProcPerRoute: %v", name, err)
		}
		sm := per.GetOverrides().GetProcessingMode()
		if sm.GetResponseBodyMode() != extprocv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
			sm.GetResponseTrailerMode() != extprocv3.ProcessingMode_SEND || sm.GetRequestBodyMode() != extprocv3.ProcessingMode_NONE ||
			per.GetDisabled() {
			t.Errorf("EnvoyFilter %s: the stream's answer must go to the processor in FULL_DUPLEX_STREAMED with its trailers: %v", name, sm)
		}
	}
}

// matchesGET reports whether the header matchers require :method GET.
func matchesGET(hs []*routev3.HeaderMatcher) bool {
	for _, h := range hs {
		if h.GetName() == ":method" && h.GetStringMatch().GetExact() == "GET" && !h.GetInvertMatch() {
			return true
		}
	}
	return false
}

// TestEnvoyGatewayExtProc: the EnvoyExtensionPolicies call the extauthz
// Service (granted across namespaces), on HTTPRoutes a SecurityPolicy
// already sends to extauthz, fail closed and are set up as
// docs/extproc.md says: one for the answers of the JSON-RPC calls (lists,
// 401s, initialize), one for the session's GET stream in full duplex, on
// an HTTPRoute that matches GET only.
func TestEnvoyGatewayExtProc(t *testing.T) {
	docs := loadDocs(t)
	svc := one(t, docs, "Service").meta.Metadata
	grpcPort := servicePort(t, docs, "grpc").Port
	authorized := map[string]bool{}
	for _, d := range find(docs, "SecurityPolicy") {
		var sp struct {
			Spec struct {
				TargetRefs []struct{ Kind, Name string } `yaml:"targetRefs"`
			} `yaml:"spec"`
		}
		d.decode(t, &sp)
		for _, tr := range sp.Spec.TargetRefs {
			authorized[d.meta.Metadata.Namespace+"/"+tr.Kind+"/"+tr.Name] = true
		}
	}
	getOnly := map[string]bool{} // namespace/name of HTTPRoutes whose every match is a GET
	for _, d := range find(docs, "HTTPRoute") {
		var hr struct {
			Spec struct {
				Rules []struct {
					Matches []struct {
						Method string `yaml:"method"`
					} `yaml:"matches"`
				} `yaml:"rules"`
			} `yaml:"spec"`
		}
		d.decode(t, &hr)
		get := len(hr.Spec.Rules) > 0
		for _, r := range hr.Spec.Rules {
			for _, m := range r.Matches {
				get = get && m.Method == "GET"
			}
			get = get && len(r.Matches) > 0
		}
		getOnly[d.meta.Metadata.Namespace+"/"+d.meta.Metadata.Name] = get
	}
	granted := false
	for _, d := range find(docs, "ReferenceGrant") {
		var rg struct {
			Spec struct {
				From []struct{ Group, Kind, Namespace string } `yaml:"from"`
			} `yaml:"spec"`
		}
		d.decode(t, &rg)
		for _, f := range rg.Spec.From {
			granted = granted || (d.meta.Metadata.Namespace == svc.Namespace && f.Group == "gateway.envoyproxy.io" && f.Kind == "EnvoyExtensionPolicy")
		}
	}
	policies := find(docs, "EnvoyExtensionPolicy")
	if len(policies) == 0 {
		t.Fatal("no EnvoyExtensionPolicy adds the response path")
	}
	streams := 0
	for _, d := range policies {
		var ep struct {
			Spec struct {
				TargetRefs []struct{ Group, Kind, Name string } `yaml:"targetRefs"`
				ExtProc    []struct {
					BackendRefs []struct {
						Name      string `yaml:"name"`
						Namespace string `yaml:"namespace"`
						Port      int    `yaml:"port"`
					} `yaml:"backendRefs"`
					FailOpen       *bool  `yaml:"failOpen"`
					MessageTimeout string `yaml:"messageTimeout"`
					ProcessingMode struct {
						Request *struct {
							Body string `yaml:"body"`
						} `yaml:"request"`
						Response *struct {
							Body string `yaml:"body"`
						} `yaml:"response"`
						AllowModeOverride bool `yaml:"allowModeOverride"`
					} `yaml:"processingMode"`
					Metadata struct {
						AccessibleNamespaces []string `yaml:"accessibleNamespaces"`
					} `yaml:"metadata"`
				} `yaml:"extProc"`
			} `yaml:"spec"`
		}
		d.decode(t, &ep)
		name, ns := d.meta.Metadata.Name, d.meta.Metadata.Namespace
		for _, tr := range ep.Spec.TargetRefs {
			if !authorized[ns+"/"+tr.Kind+"/"+tr.Name] {
				t.Errorf("EnvoyExtensionPolicy %s targets %s %s, which no SecurityPolicy sends to extauthz: ext_proc would have no identity", name, tr.Kind, tr.Name)
			}
		}
		if len(ep.Spec.ExtProc) != 1 || len(ep.Spec.ExtProc[0].BackendRefs) != 1 {
			t.Fatalf("EnvoyExtensionPolicy %s: want one processor with one backend", name)
		}
		x := ep.Spec.ExtProc[0]
		b := x.BackendRefs[0]
		if b.Name != svc.Name || b.Namespace != svc.Namespace || b.Port != grpcPort {
			t.Errorf("EnvoyExtensionPolicy %s calls %s/%s:%d, the Service is %s/%s:%d", name, b.Namespace, b.Name, b.Port, svc.Namespace, svc.Name, grpcPort)
		}
		if b.Namespace != ns && !granted {
			t.Errorf("EnvoyExtensionPolicy %s references Service %s/%s without a ReferenceGrant", name, b.Namespace, b.Name)
		}
		pm := x.ProcessingMode
		if x.FailOpen == nil || *x.FailOpen || x.MessageTimeout == "" || pm.Request == nil || pm.Response == nil ||
			!slices.Contains(x.Metadata.AccessibleNamespaces, "envoy.filters.http.ext_authz") {
			t.Errorf("EnvoyExtensionPolicy %s: must fail closed, send request and response headers, let the processor read ext_authz's metadata and set messageTimeout", name)
			continue
		}
		if pm.Response.Body == "FullDuplexStreamed" {
			// The session's GET stream: only on routes that match GET alone,
			// so that no JSON-RPC answer is streamed instead of filtered.
			streams++
			for _, tr := range ep.Spec.TargetRefs {
				if !getOnly[ns+"/"+tr.Name] {
					t.Errorf("EnvoyExtensionPolicy %s streams in full duplex on HTTPRoute %s, which does not match GET only", name, tr.Name)
				}
			}
			if pm.Request.Body != "" {
				t.Errorf("EnvoyExtensionPolicy %s: a GET stream's request has no body to send (%s)", name, pm.Request.Body)
			}
			continue
		}
		if pm.Request.Body != "Buffered" || pm.Response.Body != "" || !pm.AllowModeOverride {
			t.Errorf("EnvoyExtensionPolicy %s: must buffer the request body, send response headers only and allow mode override", name)
		}
	}
	if streams == 0 {
		t.Error("no EnvoyExtensionPolicy sends the session's GET stream in FullDuplexStreamed: completions are never injected")
	}
}
