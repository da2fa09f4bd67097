package toolsheader_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocumentedSnippet: the Go middleware docs/tools-header.md shows is
// filter.go after its package clause, so the documented code is the tested
// code.
func TestDocumentedSnippet(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/tools-header.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("filter.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, ok := strings.Cut(string(src), "package toolsheader\n\n")
	if !ok {
		t.Fatal("filter.go does not start with its package clause")
	}
	_, block, ok := strings.Cut(string(doc), "```go\nimport (\n")
	if !ok {
		t.Fatal("docs/tools-header.md shows no Go block starting with the imports")
	}
	block, _, ok = strings.Cut("import (\n"+block, "```\n")
	if !ok {
		t.Fatal("the Go block does not end")
	}
	if block != code {
		t.Errorf("docs/tools-header.md's Go middleware differs from filter.go:\n--- doc\n%s\n--- filter.go\n%s", block, code)
	}
}
