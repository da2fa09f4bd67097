package envoyconfig

import (
	"slices"
	"testing"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestShippedExtProc: a shipped configuration with the response path
// (ext_proc) runs it after ext_authz and before the router, on the
// extauthz cluster, failing closed, with the request body buffered, the
// responses asked for by mode override and ext_authz's metadata
// forwarded (docs/extproc.md). envoy/extproc.yaml is one.
func TestShippedExtProc(t *testing.T) {
	seen := false
	for name, doc := range shippedConfigs(t) {
		b, err := Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, hcm := range connectionManagers(t, b) {
			authzAt, procAt, routerAt := -1, -1, -1
			var ea extauthzv3.ExtAuthz
			var ep extprocv3.ExternalProcessor
			for i, f := range hcm.GetHttpFilters() {
				tc := f.GetTypedConfig()
				switch {
				case tc.MessageIs(&ea):
					authzAt = i
					if err := tc.UnmarshalTo(&ea); err != nil {
						t.Fatal(err)
					}
				case tc.MessageIs(&ep):
					if procAt >= 0 {
						t.Fatalf("%s: two ext_proc filters (Envoy before 1.38 truncates duplex streams with two)", name)
					}
					procAt = i
					if err := tc.UnmarshalTo(&ep); err != nil {
						t.Fatal(err)
					}
				case tc.MessageIs(&routerv3.Router{}):
					routerAt = i
				}
			}
			if procAt < 0 {
				continue
			}
			seen = seen || name == "envoy/extproc.yaml"
			t.Run(name, func(t *testing.T) {
				if !(authzAt >= 0 && authzAt < procAt && procAt < routerAt) {
					t.Fatalf("filter order ext_authz %d, ext_proc %d, router %d: ext_proc must follow ext_authz and precede the router", authzAt, procAt, routerAt)
				}
				if ep.GetFailureModeAllow() {
					t.Error("failure_mode_allow: an unreachable processor would let lists through unfiltered")
				}
				if got, want := ep.GetGrpcService().GetEnvoyGrpc().GetClusterName(), ea.GetGrpcService().GetEnvoyGrpc().GetClusterName(); got == "" || got != want {
					t.Errorf("ext_proc calls cluster %q, ext_authz %q: the service serves both on one listener", got, want)
				}
				m := ep.GetProcessingMode()
				if m.GetRequestBodyMode() != extprocv3.ProcessingMode_BUFFERED {
					t.Errorf("request_body_mode %v: the processor reads the JSON-RPC call from the buffered body", m.GetRequestBodyMode())
				}
				if m.GetResponseBodyMode() != extprocv3.ProcessingMode_NONE || !ep.GetAllowModeOverride() {
					t.Errorf("response_body_mode %v, allow_mode_override %v: responses are asked for by mode override", m.GetResponseBodyMode(), ep.GetAllowModeOverride())
				}
				if ep.GetSendBodyWithoutWaitingForHeaderResponse() {
					t.Error("send_body_without_waiting_for_header_response disables mode_override")
				}
				if !slices.Contains(ep.GetMetadataOptions().GetForwardingNamespaces().GetUntyped(), "envoy.filters.http.ext_authz") {
					t.Error("ext_authz's metadata is not forwarded: the processor cannot tell who the caller is")
				}
				if ep.GetMessageTimeout().AsDuration() <= 0 {
					t.Error("message_timeout unset: Envoy's 200ms default is too short for a large list")
				}
				// A route that reaches an upstream may carry any call to it
				// (a server may serve one on every path, the well-known ones
				// included): its answer is the processor's to filter.
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					if extProcDisabled(t, vh.GetTypedPerFilterConfig()) {
						t.Errorf("%s: ext_proc disabled on the whole virtual host", vh.GetName())
					}
					for _, r := range vh.GetRoutes() {
						if r.GetRoute() != nil && extProcDisabled(t, r.GetTypedPerFilterConfig()) {
							t.Errorf("%s: route %s reaches an upstream without the response path", vh.GetName(), r.GetName())
						}
					}
				}
			})
		}
	}
	if !seen {
		t.Fatal("envoy/extproc.yaml has no ext_proc filter")
	}
}

// extProcDisabled reports whether the per-filter configs disable ext_proc.
func extProcDisabled(t *testing.T, configs map[string]*anypb.Any) bool {
	t.Helper()
	for _, c := range configs {
		var pr extprocv3.ExtProcPerRoute
		if !c.MessageIs(&pr) {
			continue
		}
		if err := c.UnmarshalTo(&pr); err != nil {
			t.Fatal(err)
		}
		if pr.GetDisabled() {
			return true
		}
	}
	return false
}
