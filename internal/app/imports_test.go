package app

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyTestsImportTestPackages: what lives under internal/testing/ is
// for tests only; no package's own (non-test) files import it, so no
// command can link it in.
func TestOnlyTestsImportTestPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 10 {
		t.Fatalf("go list listed %d packages: %s", len(lines), out)
	}
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, " ")
		if strings.Contains(pkg, "/internal/testing/") {
			continue // test helpers may build on each other
		}
		for _, imp := range strings.Fields(imports) {
			if strings.Contains(imp, "/internal/testing/") {
				t.Errorf("%s imports the test-only package %s", pkg, imp)
			}
		}
	}
}
