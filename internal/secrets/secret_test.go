package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{"SET": "from-env", "EMPTY": ""}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		name      string
		env, file string
		want      string
		wantErr   string
	}{
		{name: "environment", env: "SET", want: "from-env"},
		{name: "environment wins over file", env: "SET", file: write("f1", "from-file"), want: "from-env"},
		{name: "empty variable", env: "EMPTY", wantErr: "environment variable EMPTY is empty"},
		{name: "unset variable", env: "UNSET", wantErr: "environment variable UNSET is empty"},
		{name: "file with trailing newlines", file: write("f2", "s3cret\r\n\n"), want: "s3cret"},
		{name: "inner newline kept", file: write("f3", "a\nb\n"), want: "a\nb"},
		{name: "missing file", file: filepath.Join(dir, "missing"), wantErr: "no such file"},
		{name: "file over the limit", file: write("big", strings.Repeat("x", MaxFileBytes+1)), wantErr: "larger than the limit"},
		{name: "nothing named"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(getenv, tc.env, tc.file)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load() = %q, %v; want an error containing %q", got, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "x"+"xxxxxxx") {
					t.Fatal("error shows the file's content")
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Load() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
