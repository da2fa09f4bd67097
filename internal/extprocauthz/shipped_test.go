package extprocauthz_test

import (
	"net/http"
	"os"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/extauthz/extauthz/internal/envoyconfig"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// shippedFilter is the ext_proc filter of envoy/extproc.yaml, and the
// processing mode its GET stream route overrides it with.
func shippedFilter(t *testing.T) (*extprocfilterv3.ExternalProcessor, *extprocfilterv3.ProcessingMode) {
	t.Helper()
	doc, err := os.ReadFile("../../envoy/extproc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := envoyconfig.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig().UnmarshalTo(&hcm) != nil {
					continue
				}
				var stream *extprocfilterv3.ProcessingMode
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					for _, r := range vh.GetRoutes() {
						var pr extprocfilterv3.ExtProcPerRoute
						if c := r.GetTypedPerFilterConfig()["envoy.filters.http.ext_proc"]; r.GetName() == "mcp-stream" && c.UnmarshalTo(&pr) == nil {
							stream = pr.GetOverrides().GetProcessingMode()
						}
					}
				}
				for _, hf := range hcm.GetHttpFilters() {
					var ep extprocfilterv3.ExternalProcessor
					if hf.GetTypedConfig().MessageIs(&ep) {
						if err := hf.GetTypedConfig().UnmarshalTo(&ep); err != nil {
							t.Fatal(err)
						}
						if stream == nil {
							t.Fatal("envoy/extproc.yaml has no mcp-stream route overriding the processing mode")
						}
						return &ep, stream
					}
				}
			}
		}
	}
	t.Fatal("envoy/extproc.yaml has no ext_proc filter")
	return nil, nil
}

// TestShippedConfiguration: with the filter configuration envoy/extproc.yaml
// ships, lists are filtered (JSON and SSE) and an upstream 401 becomes the
// re-authorization answer, without a protocol violation.
func TestShippedConfiguration(t *testing.T) {
	ep, streamMode := shippedFilter(t)
	f := newFixture(t)
	reader := token(t, "alice", nil)
	cfg := func(t *testing.T, host, body string) envoytest.ExtProcConfig {
		return envoytest.ExtProcConfig{
			Mode:                   ep.GetProcessingMode(),
			AllowModeOverride:      ep.GetAllowModeOverride(),
			SendBodyWithoutWaiting: ep.GetSendBodyWithoutWaitingForHeaderResponse(),
			MessageTimeout:         ep.GetMessageTimeout().AsDuration(),
			FailureModeAllow:       ep.GetFailureModeAllow(),
			Metadata:               f.authorize(t, host, reader, nil, body),
		}
	}
	event := "event: message\ndata: " + toolsResult + "\n\n"
	for name, resp := range map[string]envoytest.ExtProcMessage{"json": jsonResponse(toolsResult, nil), "sse": sseResponse(event[:40], event[40:])} {
		t.Run(name, func(t *testing.T) {
			res := envoytest.ExtProc(t, f.conn, cfg(t, "mcp.example.com", toolsList), envoytest.ExtProcExchange{Request: mcpRequest("mcp.example.com", toolsList, nil), Response: resp})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := string(res.Downstream.Body()); got != toolsFiltered && got != "event: message\ndata: "+toolsFiltered+"\n\n" {
				t.Fatalf("client got %s", got)
			}
		})
	}
	t.Run("GET stream", func(t *testing.T) {
		bornSession(t, f, reader, "sess-shipped")
		c := duplexGET(f, t, reader, "sess-shipped")
		c.Mode = streamMode
		events := "id: p0\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
		res := envoytest.ExtProc(t, f.conn, c, envoytest.ExtProcExchange{
			Request:  envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"sess-shipped"}}),
			Response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, events[:9], events[9:30], events[30:]),
		})
		if res.Err != nil || string(res.Downstream.Body()) != events {
			t.Fatalf("%v: %q", res.Err, res.Downstream.Body())
		}
	})
	t.Run("401", func(t *testing.T) {
		call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read_file"}}`
		res := envoytest.ExtProc(t, f.conn, cfg(t, "backend.example.com", call), envoytest.ExtProcExchange{
			Request:  mcpRequest("backend.example.com", call, nil),
			Response: envoytest.ExtProcResponse(401, nil, "expired"),
		})
		if res.Err != nil || res.Downstream.Status() != 200 {
			t.Fatalf("%v: %d %s", res.Err, res.Downstream.Status(), res.Downstream.Body())
		}
	})
}
