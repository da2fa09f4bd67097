package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps the failures instead of reporting
// them.
type recorder struct {
	testing.TB
	failures []string
	fatal    bool
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return "TestX" }
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
}

func TestCheck(t *testing.T) {
	if Update() {
		t.Skip("with -update every comparison passes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "out.golden")
	if err := os.WriteFile(path, []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, got string
		want            string // "" passes
	}{
		{"equal", path, "same\n", ""},
		{"different", path, "other\n", "out.golden differs"},
		{"a trailing newline counts", path, "same", "differs"},
		{"missing file", filepath.Join(dir, "none.golden"), "x", "-update creates it"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			Check(r, tc.path, []byte(tc.got))
			switch {
			case tc.want == "" && len(r.failures) > 0:
				t.Errorf("failed: %v", r.failures)
			case tc.want != "" && (len(r.failures) != 1 || !strings.Contains(r.failures[0], tc.want)):
				t.Errorf("failures %q, want one mentioning %q", r.failures, tc.want)
			}
		})
	}
}
