package extprocauthz_test

import (
	"os"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/extauthz/extauthz/internal/envoyconfig"
	"github.com/extauthz/extauthz/internal/envoytest"
)

// shippedFilter is the ext_proc filter of envoy/extproc.yaml.
func shippedFilter(t *testing.T) *extprocfilterv3.ExternalProcessor {
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
				for _, hf := range hcm.GetHttpFilters() {
					var ep extprocfilterv3.ExternalProcessor
					if hf.GetTypedConfig().MessageIs(&ep) {
						if err := hf.GetTypedConfig().UnmarshalTo(&ep); err != nil {
							t.Fatal(err)
						}
						return &ep
					}
				}
			}
		}
	}
	t.Fatal("envoy/extproc.yaml has no ext_proc filter")
	return nil
}

// TestShippedConfiguration: with the filter configuration envoy/extproc.yaml
// ships, lists are filtered (JSON and SSE) and an upstream 401 becomes the
// re-authorization answer, without a protocol violation.
func TestShippedConfiguration(t *testing.T) {
	ep := shippedFilter(t)
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
