package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDependencyTableIsExact: README.md's section "Dependencies" names
// every module go.mod requires directly and every tool it pins, and names
// no Go module go.mod does not know.
func TestDependencyTableIsExact(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	direct, known := requirements(string(b))
	if len(direct) < 10 {
		t.Fatalf("only %d direct requirements read from go.mod: %v", len(direct), direct)
	}

	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Dependencies\n")
	if !ok {
		t.Fatal("README.md has no section Dependencies")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var named []string
	code := regexp.MustCompile("`([^`]+)`")
	for row := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[1]), "npm") || strings.HasPrefix(strings.TrimSpace(cells[1]), "Debian") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			named = append(named, m[1])
		}
	}
	for _, p := range direct {
		if !slices.Contains(named, p) {
			t.Errorf("README.md's dependency table does not name %s (a direct requirement or tool of go.mod): add a row saying why", p)
		}
	}
	for _, p := range named {
		if !slices.Contains(known, p) {
			t.Errorf("README.md's dependency table names %s, which go.mod does not require", p)
		}
	}
}

// requirements reads go.mod's require and tool directives (one-line and
// block forms): direct are the modules required without "// indirect" and
// the tools, known every module and tool it names.
func requirements(gomod string) (direct, known []string) {
	block := ""
	for raw := range strings.SplitSeq(gomod, "\n") {
		line, comment, _ := strings.Cut(raw, "//")
		f := strings.Fields(line)
		kind := block
		switch {
		case len(f) == 0:
			continue
		case f[0] == ")":
			block = ""
			continue
		case len(f) == 2 && f[1] == "(":
			block = f[0]
			continue
		case block == "":
			kind, f = f[0], f[1:] // a one-line directive
		}
		if len(f) == 0 {
			continue
		}
		switch kind {
		case "require":
			known = append(known, f[0])
			if strings.TrimSpace(comment) != "indirect" {
				direct = append(direct, f[0])
			}
		case "tool":
			known = append(known, f[0])
			direct = append(direct, f[0])
		}
	}
	return direct, known
}
