package envoyconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func readShipped(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCheckFileShipped(t *testing.T) {
	for _, path := range []string{
		"envoy/envoy.yaml", "envoy/sidecar.yaml", "envoy/ratelimit/envoy.yaml",
		"deploy/istio/meshconfig.yaml", "deploy/istio/authorizationpolicy-mesh.yaml", "deploy/istio/authorizationpolicy-workload.yaml",
		"deploy/istio/envoyfilter-extproc.yaml", "deploy/envoy-gateway/securitypolicies.yaml",
	} {
		t.Run(path, func(t *testing.T) {
			if err := CheckFile([]byte(readShipped(t, path))); err != nil {
				t.Fatalf("CheckFile:\n%v", err)
			}
		})
	}
}

const envoyFilter = `apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata:
  name: extauthz
spec:
  configPatches:
    - applyTo: HTTP_FILTER
      match:
        context: SIDECAR_INBOUND
      patch:
        operation: INSERT_BEFORE
        value:
          name: envoy.filters.http.ext_authz
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
            transport_api_version: V3
            failure_mode_allow: false
            status_on_error:
              code: ServiceUnavailable
            with_request_body:
              max_request_bytes: 1048576
              allow_partial_message: false
              pack_as_bytes: true
            grpc_service:
              envoy_grpc:
                cluster_name: outbound|9191||extauthz.extauthz.svc.cluster.local
`

const meshConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: istio
  namespace: istio-system
data:
  mesh: |
    extensionProviders:
      - name: extauthz
        envoyExtAuthzGrpc:
          service: extauthz.extauthz.svc.cluster.local
          port: 9191
          timeout: 2s
          failOpen: false
          statusOnError: "503"
          includeRequestBodyInCheck:
            maxRequestBytes: 1048576
            packAsBytes: true
`

func TestCheckFileFindsProblems(t *testing.T) {
	mesh := readShipped(t, "deploy/istio/meshconfig.yaml")
	policy := readShipped(t, "deploy/istio/authorizationpolicy-mesh.yaml")
	sp := readShipped(t, "deploy/envoy-gateway/securitypolicies.yaml")
	tests := []struct {
		name string
		doc  string
		want string // in the error, with its line
	}{
		{"valid EnvoyFilter", envoyFilter, ""},
		{"valid istio ConfigMap", meshConfigMap, ""},
		{"EnvoyFilter failing open", strings.Replace(envoyFilter, "failure_mode_allow: false", "failure_mode_allow: true", 1), "line 17: EnvoyFilter extauthz: configPatches[0].patch.value: failure_mode_allow is true"},
		{"EnvoyFilter with a misspelled field", strings.Replace(envoyFilter, "pack_as_bytes", "pack_as_byte", 1), "line 23: EnvoyFilter extauthz: configPatches[0].patch.value.typed_config<ExtAuthz>.with_request_body: unknown field \"pack_as_byte\""},
		{"EnvoyFilter with partial bodies", strings.Replace(envoyFilter, "allow_partial_message: false", "allow_partial_message: true", 1), "allow_partial_message: true sends cut bodies"},
		{"mesh config failing open", strings.Replace(mesh, "failOpen: false", "failOpen: true", 1), "failOpen: true lets every request through"},
		{"mesh config without 503", strings.Replace(mesh, `statusOnError: "503"`, `statusOnError: "403"`, 1), `statusOnError "403": want "503"`},
		{"istio ConfigMap body as string", strings.Replace(meshConfigMap, "packAsBytes: true", "packAsBytes: false", 1), "line 17: ConfigMap istio: data.mesh.extensionProviders[extauthz]: packAsBytes must be true"},
		{"CUSTOM policy without provider", strings.Replace(policy, "name: extauthz\n", "name: \"\"\n", 1), "action CUSTOM needs provider.name"},
		{"CUSTOM policy without paths", strings.Replace(policy, "paths:", "hosts:", 1), "a rule without paths"},
		{"SecurityPolicy failing open", strings.Replace(sp, "failOpen: false", "failOpen: true", 1), "line 28: SecurityPolicy files-mcp-extauthz: spec.extAuth: failOpen: true"},
		{"SecurityPolicy without body", strings.Replace(sp, "maxRequestBytes: 1048576", "maxRequestBytes: 0", 1), "bodyToExtAuth.maxRequestBytes must be set"},
		{"nothing to check", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n", "nothing to check"},
		{"Envoy bootstrap failing open", strings.Replace(readShipped(t, "envoy/envoy.yaml"), "failure_mode_allow: false", "failure_mode_allow: true", 1), "static_resources.listeners[ingress].filter_chains[0].filters[envoy.filters.network.http_connection_manager].typed_config.http_filters[envoy.filters.http.ext_authz].typed_config: failure_mode_allow is true"},
		{"Envoy bootstrap sending cut bodies", strings.Replace(readShipped(t, "envoy/envoy.yaml"), "allow_partial_message: false", "allow_partial_message: true", 1), "allow_partial_message: true sends cut bodies"},
		{"broken Envoy bootstrap", strings.Replace(readShipped(t, "envoy/envoy.yaml"), "failure_mode_allow", "failure_mode_alow", 1), "unknown field \"failure_mode_alow\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckFile([]byte(tt.doc))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckFile:\n%v", err)
			case tt.want != "" && err == nil:
				t.Fatal("CheckFile passed a broken file")
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error lacks %q:\n%v", tt.want, err)
			}
		})
	}
}

// TestCheckFileDocSnippets: every Istio and Envoy Gateway snippet the
// documentation shows passes envoy-check.
func TestCheckFileDocSnippets(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	files = append(files, filepath.Join(repoRoot, "README.md"))
	fence := regexp.MustCompile("(?ms)^```ya?ml\\n(.*?)^```")
	kinds := regexp.MustCompile(`(?m)^(kind: (AuthorizationPolicy|SecurityPolicy|EnvoyFilter|IstioOperator)|meshConfig:|extensionProviders:)`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllSubmatch(b, -1) {
			if !kinds.Match(m[1]) {
				continue
			}
			checked++
			if err := CheckFile(m[1]); err != nil {
				t.Errorf("%s: a snippet fails envoy-check:\n%v\n%s", f, err, m[1])
			}
		}
	}
	if checked < 4 {
		t.Errorf("only %d snippets checked", checked)
	}
}

// FuzzCheckFile: any file gets an answer, never a crash, and problems carry
// lines inside the file.
func FuzzCheckFile(f *testing.F) {
	f.Add([]byte(envoyFilter))
	f.Add([]byte(meshConfigMap))
	f.Add([]byte("apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nspec: {action: CUSTOM, rules: [{to: []}]}\n"))
	f.Add([]byte("kind: SecurityPolicy\nspec: {extAuth: {grpc: {}, failOpen: true}}\n---\nkind: ConfigMap\ndata: {mesh: \"extensionProviders: [{name: x, envoyExtAuthzGrpc: {}}]\"}\n"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	line := regexp.MustCompile(`(?m)^line (\d+): `)
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 1<<16 {
			return
		}
		err := CheckFile(doc)
		if err == nil {
			return
		}
		lines := strings.Count(string(doc), "\n") + strings.Count(string(doc), "\r") + 1
		for _, m := range line.FindAllStringSubmatch(err.Error(), -1) {
			if n, _ := strconv.Atoi(m[1]); n < 1 || n > lines {
				t.Fatalf("line %d outside the file's %d lines: %v", n, lines, err)
			}
		}
	})
}
