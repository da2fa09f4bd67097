// Package golden compares what a test produced with a file under the
// package's testdata/, the one place the expected output is written down.
// `go test ./internal/yourpkg -update` rewrites the files instead; review
// the diff before committing it.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is registered once here for every package that imports golden.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ instead of comparing with them")

// Update reports whether the test run was asked to rewrite golden files
// (call it from a test, after the flags are parsed).
func Update() bool { return *update }

// Check compares got with the file at path; with -update it first writes
// got there, creating the directories. A difference fails the test (it
// goes on) and shows both sides.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update creates it)", err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -run '%s' -update rewrites it after you checked the change):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}
