package envoyconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckMinimal(t *testing.T) {
	if err := Check(readFile(t, "testdata/minimal.yaml")); err != nil {
		t.Fatalf("Check(minimal.yaml) = %v, want nil", err)
	}
}

// Each case breaks testdata/minimal.yaml in one way by replacing old with
// new (old must occur exactly once); the whole error Check returns is
// compared with testdata/bad/<name>.golden (go test -update rewrites them).
var brokenCases = []struct {
	name, old, new string
}{
	{"unknown-top-level-field", "static_resources:", "static_resource:"},
	{"unknown-field-inside-any", "max_request_bytes: 65536", "max_request_byte: 65536"},
	{"unknown-field-inside-per-route-any", "context_extensions: { route: app }", "context_extension: { route: app }"},
	{"bad-enum", "lb_policy: ROUND_ROBIN", "lb_policy: ROUND_ROBINN"},
	{"bad-enum-inside-any", "stat_prefix: ingress", "stat_prefix: ingress\n          codec_type: HTTP5"},
	{"unknown-type-url", "ext_authz.v3.ExtAuthz\n", "ext_authz.v3.ExtAuthZ\n"},
	{"any-without-type", `"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router`, "{}"},
	{"duplicate-key", "type: STATIC\n    lb_policy", "type: STATIC\n    type: STRICT_DNS\n    lb_policy"},
	{"deprecated-field", "lb_policy: ROUND_ROBIN", "lb_policy: ROUND_ROBIN\n    http2_protocol_options: {}"},
	{"missing-route-cluster", "route: { cluster: app }", "route: { cluster: ap }"},
	{"missing-grpc-cluster", "cluster_name: extauthz }", "cluster_name: ext-authz }"},
	{"grpc-cluster-without-http2", "          http2_protocol_options: {}\n", "          http_protocol_options: {}\n"},
	{"router-not-last", "          - name: envoy.filters.http.router\n            typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\n",
		"          - name: envoy.filters.http.router\n            typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\n          - name: late\n            typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors\n"},
	{"duplicate-http-filter", "- name: envoy.filters.http.router", "- name: envoy.filters.http.ext_authz"},
	{"port-out-of-range", "port_value: 8000", "port_value: 70000"},
	{"required-field-inside-any", "stat_prefix: ingress", "stat_prefix: \"\""},
	{"per-route-config-names-no-filter", "envoy.filters.http.ext_authz:\n                    \"@type\"", "envoy.filters.http.ext_auth:\n                    \"@type\""},
	{"per-route-config-wrong-type", "ext_authz.v3.ExtAuthzPerRoute\n                    check_settings:\n                      context_extensions: { route: app }",
		"ext_authz.v3.ExtAuthz\n                    grpc_service:\n                      envoy_grpc: { cluster_name: extauthz }"},
	{"duplicate-cluster", "  - name: app\n", "  - name: extauthz\n"},
	{"duplicate-listener-address", "  clusters:\n", "  - name: again\n    address:\n      socket_address: { address: 0.0.0.0, port_value: 8080 }\n  clusters:\n"},
	{"two-documents", "  clusters:\n", "---\nnode: {}\n  clusters:\n"},
	{"not-yaml", "  clusters:\n", "  clusters: [\n"},
}

func TestCheckBroken(t *testing.T) {
	minimal := string(readFile(t, "testdata/minimal.yaml"))
	for _, tc := range brokenCases {
		t.Run(tc.name, func(t *testing.T) {
			if n := strings.Count(minimal, tc.old); n != 1 {
				t.Fatalf("%q occurs %d times in minimal.yaml, want once", tc.old, n)
			}
			err := Check([]byte(strings.Replace(minimal, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("Check passed a broken configuration")
			}
			golden.Check(t, filepath.Join("testdata", "bad", tc.name+".golden"), []byte(err.Error()+"\n"))
		})
	}
}

func TestCheckProblemsCarryLines(t *testing.T) {
	minimal := string(readFile(t, "testdata/minimal.yaml"))
	doc := strings.Replace(minimal, "max_request_bytes: 65536", "max_request_byte: 65536", 1)
	err := Check([]byte(doc))
	var p *Problem
	if !errors.As(err, &p) {
		t.Fatalf("Check error %v holds no *Problem", err)
	}
	wantLine := 1 + strings.Count(doc[:strings.Index(doc, "max_request_byte:")], "\n")
	if p.Line != wantLine {
		t.Errorf("Problem.Line = %d, want %d", p.Line, wantLine)
	}
}

func TestCheckBoundsProblems(t *testing.T) {
	var b strings.Builder
	for i := range maxProblems + 10 {
		b.WriteString("unknown_")
		b.WriteString(strings.Repeat("x", i+1))
		b.WriteString(": 1\n")
	}
	err := Check([]byte(b.String()))
	if err == nil {
		t.Fatal("Check passed a document of unknown fields")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxProblems+1 || !strings.Contains(lines[maxProblems], "10 more problems") {
		t.Errorf("got %d lines ending %q, want %d problems and a count of the rest", len(lines), lines[len(lines)-1], maxProblems)
	}
}

func TestCheckRejectsOversize(t *testing.T) {
	doc := make([]byte, MaxSize+1)
	if err := Check(doc); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Check(oversize) = %v, want a size error", err)
	}
}

func TestCheckEmpty(t *testing.T) {
	for _, doc := range []string{"", "# only a comment\n"} {
		if err := Check([]byte(doc)); err == nil || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Check(%q) = %v, want an empty-configuration error", doc, err)
		}
	}
}

func TestCheckAcceptsJSONAndMergeKeys(t *testing.T) {
	b, err := Parse(readFile(t, "testdata/minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(js); err != nil {
		t.Errorf("Check(minimal as protojson JSON) = %v", err)
	}

	merged := `
base: &base
  connect_timeout: 1s
static_resources:
  clusters:
  - <<: *base
    name: app
    type: STATIC
`
	// "base" is not a Bootstrap field: the anchor must live inside one.
	if err := Check([]byte(merged)); err == nil || !strings.Contains(err.Error(), `unknown field "base"`) {
		t.Errorf("Check(anchor outside the schema) = %v, want unknown field \"base\"", err)
	}
	merged = `
static_resources:
  clusters:
  - &app
    name: app
    type: STATIC
    connect_timeout: 1s
  - <<: *app
    name: app2
    lb_polic: ROUND_ROBIN
`
	err = Check([]byte(merged))
	if err == nil || !strings.Contains(err.Error(), `line 10: static_resources.clusters[app2]: unknown field "lb_polic"`) {
		t.Errorf("Check(merge key) = %v, want the misspelled field after the merge reported", err)
	}
}

func TestSuggest(t *testing.T) {
	tests := []struct {
		name, key, want string
	}{
		{"one letter off", "max_request_byte", `(did you mean "max_request_bytes"?)`},
		{"transposed", "allow_partail_message", `(did you mean "allow_partial_message"?)`},
		{"nothing close", "completely_different", ""},
	}
	md := (&extauthzv3.BufferSettings{}).ProtoReflect().Descriptor()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.TrimSpace(suggest(tc.key, md)); got != tc.want {
				t.Errorf("suggest(%q) = %q, want %q", tc.key, got, tc.want)
			}
		})
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"kitten", "sitting", 3},
		{"cluster", "clsuter", 2},
		{"same", "same", 0},
	}
	for _, tc := range tests {
		if got := distance(tc.a, tc.b); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	minimal := readFile(f, "testdata/minimal.yaml")
	f.Add(minimal)
	for _, tc := range brokenCases {
		f.Add([]byte(strings.Replace(string(minimal), tc.old, tc.new, 1)))
	}
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		b, err := Parse(doc)
		if err != nil {
			return
		}
		if Validate(b) != nil {
			return
		}
		// A configuration that passes passes again once protojson has
		// re-encoded it: the schema walk and protojson agree.
		js, err := protojson.Marshal(b)
		if err != nil {
			t.Fatalf("marshal a parsed configuration: %v", err)
		}
		if err := Check(js); err != nil {
			t.Fatalf("passing configuration fails after a JSON round trip: %v\n%s", err, js)
		}
	})
}

// BenchmarkCheck measures one offline check of the front-proxy
// configuration (not a hot path: it runs in tests and tools).
func BenchmarkCheck(b *testing.B) {
	doc := readFile(b, filepath.Join(repoRoot, "envoy", "envoy.yaml"))
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(doc); err != nil {
			b.Fatal(err)
		}
	}
}
