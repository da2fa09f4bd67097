package app

import (
	"bytes"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "help", name+".golden"), []byte(got))
}

// TestHelp: every command prints its help on -h and --help (exit 0), and
// the same help after the error on a usage error (exit 2).
func TestHelp(t *testing.T) {
	tests := []struct {
		golden string
		cmd    []string
		misuse []string // a usage error
	}{
		{"extauthz", nil, []string{"frobnicate"}},
		{"serve", []string{"serve"}, []string{"serve", "--bogus"}},
		{"validate", []string{"validate"}, []string{"validate"}},
		{"token", []string{"token"}, []string{"token", "--sub", "a", "--ttl", "soon"}},
		{"apikey", []string{"apikey", "new"}, []string{"apikey", "new"}},
		{"check", []string{"check"}, []string{"check"}},
		{"admin", []string{"admin"}, []string{"admin", "--bogus", "stats"}},
		{"envoy-check", []string{"envoy-check"}, []string{"envoy-check"}},
		{"version", []string{"version"}, []string{"version", "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var first string
			for _, h := range []string{"-h", "--help"} {
				code, out, errOut := runCmd(t, nil, append(append([]string{}, tt.cmd...), h)...)
				if code != 0 || errOut != "" {
					t.Fatalf("%s: exit %d, stderr %q", h, code, errOut)
				}
				if first == "" {
					first = out
					checkGolden(t, tt.golden, out)
				} else if out != first {
					t.Errorf("-h and --help print different help")
				}
				if !strings.Contains(out, "Example:") {
					t.Errorf("%s: no example:\n%s", h, out)
				}
			}
			code, out, errOut := runCmd(t, nil, tt.misuse...)
			if code != 2 || out != "" {
				t.Fatalf("%v: exit %d, stdout %q; want 2 and nothing on stdout", tt.misuse, code, out)
			}
			if !strings.HasPrefix(errOut, "extauthz: ") || !strings.HasSuffix(errOut, first) {
				t.Errorf("%v: stderr is not the error followed by the help:\n%s", tt.misuse, errOut)
			}
		})
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var o ServeOptions
	fs := serveFlags(&o)
	var out bytes.Buffer
	serveCmd.usage(&out, fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(out.String(), "--"+f.Name) {
			t.Errorf("serve help lacks --%s", f.Name)
		}
		if !zeroDefault(f.DefValue) && !strings.Contains(out.String(), "(default "+f.DefValue+")") {
			t.Errorf("serve help lacks the default of --%s", f.Name)
		}
	})
}

func TestUsageErrorsSayWhatIsValid(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"validate", "--confg", "x"}, "unknown flag --confg (valid flags: --config, --online, --timeout)"},
		{"unknown admin flag", []string{"admin", "--adr", "x", "stats"}, "unknown flag --adr (valid flags: --addr, --timeout, --tls-ca, --tls-cert, --tls-key, --tls-server-name, --token-file)"},
		{"bad log level", []string{"serve", "--log-level", "verbose", "--grpc-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, `--log-level: "verbose" is not one of debug, info, warn, error`},
		{"unknown command", []string{"servе"}, `unknown command "servе"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCmd(t, nil, tt.args...)
			if code != 2 || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d, stderr lacks %q:\n%s", code, tt.want, errOut)
			}
			if !strings.Contains(errOut, "\nUsage:") {
				t.Errorf("no help after the error:\n%s", errOut)
			}
		})
	}
}
