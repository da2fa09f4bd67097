package envoyconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{{"1.8", "1.31", -1}, {"1.31", "1.8", 1}, {"1.22", "1.22", 0}, {"1.7", "1.7.1", -1}} {
		if got := compareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestDeployVersionsDocumented: docs/deploy-versions.md names, for every
// shipped file, the newest release each of its settings needs.
func TestDeployVersionsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy-versions.md"))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		files []string
		needs string
	}
	var rows []row
	for _, m := range regexp.MustCompile("(?m)^\\| (`[^|]+) \\| ([^|]+) \\|").FindAllStringSubmatch(string(doc), -1) {
		var files []string
		for _, f := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(m[1], -1) {
			files = append(files, f[1])
		}
		rows = append(rows, row{files, m[2]})
	}
	shipped := []string{"envoy/envoy.yaml", "envoy/sidecar.yaml", "envoy/ratelimit/envoy.yaml", "envoy/extproc.yaml", "envoy/sidecar-extproc.yaml", "deploy/istio/meshconfig.yaml",
		"deploy/istio/authorizationpolicy-mesh.yaml", "deploy/istio/authorizationpolicy-workload.yaml",
		"deploy/envoy-gateway/securitypolicies.yaml", "deploy/istio/envoyfilter-extproc.yaml", "deploy/envoy-gateway/extensionpolicies.yaml"}
	for _, path := range shipped {
		reqs := Requirements([]byte(readShipped(t, path)))
		var needs string
		found := false
		for _, r := range rows {
			for _, f := range r.files {
				if ok, _ := filepath.Match(f, path); ok {
					needs, found = r.needs, true
				}
			}
		}
		if !found {
			t.Errorf("docs/deploy-versions.md has no row for %s", path)
			continue
		}
		newest := map[string]string{}
		for _, r := range reqs {
			if v, ok := newest[r.Product]; !ok || compareVersions(r.Version, v) > 0 {
				newest[r.Product] = r.Version
			}
		}
		for product, v := range newest {
			if !strings.Contains(needs, product+" "+v+" or later") {
				t.Errorf("%s needs %s %s (%v); the table says %q", path, product, v, reqs, needs)
			}
		}
	}
}
