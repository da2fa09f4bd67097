package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// notYetWritten are pages the README links to that are being written
// alongside: a link to one of them is not checked while the file is
// missing. Once it exists its links are checked like any other.
var notYetWritten = []string{
	"docs/audit.md",
	"docs/credentials.md",
	"docs/policies.md",
	"docs/rate-limits.md",
}

// documents are the Markdown files whose links are checked.
func documents(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(repoRoot, "README.md"), filepath.Join(repoRoot, "CONTRIBUTING.md"))
	slices.Sort(files)
	return files
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	inlineCode = regexp.MustCompile("`[^`]*`")
	link       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// line is one line of a Markdown file and its number, from 1.
type line struct {
	n    int
	text string
}

// prose returns the lines of a Markdown file outside code blocks, with
// inline code removed.
func prose(t *testing.T, path string) []line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []line
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if fence.MatchString(text) {
			in = !in
			continue
		}
		if !in {
			out = append(out, line{n, inlineCode.ReplaceAllString(text, "")})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// file: lower case, punctuation dropped, spaces as hyphens, a repeated
// anchor numbered -1, -2, ...
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	in := false
	for text := range strings.SplitSeq(string(b), "\n") {
		if fence.MatchString(text) {
			in = !in
			continue
		}
		m := heading.FindStringSubmatch(text)
		if in || m == nil {
			continue
		}
		a := slug(m[2])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRelativeLinks: every relative link in the documentation names a file
// or directory of the repository, and every anchor a heading of the file
// it points into.
func TestRelativeLinks(t *testing.T) {
	checked := 0
	for _, doc := range documents(t) {
		rel, _ := filepath.Rel(repoRoot, doc)
		for _, l := range prose(t, doc) {
			n := l.n
			for _, m := range link.FindAllStringSubmatch(l.text, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.Join(filepath.Dir(doc), file)
				}
				where, _ := filepath.Rel(repoRoot, path)
				if _, err := os.Stat(path); err != nil {
					if slices.Contains(notYetWritten, filepath.ToSlash(where)) {
						t.Logf("%s:%d: %s is not written yet", rel, n, where)
						continue
					}
					t.Errorf("%s:%d: link %q: no file %s", rel, n, target, where)
					continue
				}
				if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel, n, target, where, anchor)
				}
			}
		}
	}
	t.Logf("%d relative links checked", checked)
	if checked < 50 {
		t.Errorf("only %d relative links found: is the link pattern broken?", checked)
	}
}

// TestSlug: anchors as GitHub computes them.
func TestSlug(t *testing.T) {
	tests := []struct{ title, want string }{
		{"Quick start", "quick-start"},
		{"More than one replica: Redis (shared tier)", "more-than-one-replica-redis-shared-tier"},
		{"1. Canonical form", "1-canonical-form"},
		{"Behind nginx, Caddy, Traefik or Envoy's http_service", "behind-nginx-caddy-traefik-or-envoys-http_service"},
		{"`routes[]` keys", "routes-keys"},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			if got := slug(tt.title); got != tt.want {
				t.Errorf("slug(%q) = %q, want %q", tt.title, got, tt.want)
			}
		})
	}
}
