package adminapi

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/testing/envoytest"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

func TestCLI(t *testing.T) {
	counts := Counts{Verdicts: 3, ExchangedTokens: 1, SessionBindings: 1}
	const request = "testdata/check-request.json"
	malformed := filepath.Join(t.TempDir(), "malformed.json")
	if err := os.WriteFile(malformed, []byte(`{"attributes": {"request": {"http": {"hedaers": {}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	noCalls := `sessions=[] subjects=[] keys=[] explains=0 stats=0`

	tests := []struct {
		name    string
		args    []string     // ADDR is replaced by the admin listener's address
		backend *fakeBackend // nil: one with nothing to say
		// wantErr is matched with errors.Is; wantCode with status.Code.
		wantErr   error
		wantCode  codes.Code
		golden    string // stdout's golden file; "" wants no output
		wantCalls string
	}{
		{
			name:      "invalidate-session",
			args:      []string{"--addr", "ADDR", "invalidate-session", "sess-42"},
			backend:   &fakeBackend{counts: counts},
			golden:    "invalidate-session",
			wantCalls: `sessions=["sess-42"] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "revoke-subject with flags after the command",
			args:      []string{"revoke-subject", "--addr", "ADDR", "--timeout", "5s", "--issuer", "hs", "alice"},
			backend:   &fakeBackend{counts: counts},
			golden:    "revoke-subject",
			wantCalls: `sessions=[] subjects=["hs alice"] keys=[] explains=0 stats=0`,
		},
		{
			name:      "revoke-api-key",
			args:      []string{"--addr", "ADDR", "revoke-api-key", "--issuer", "keys", "billing-1"},
			backend:   &fakeBackend{counts: Counts{Verdicts: 2}},
			golden:    "revoke-api-key",
			wantCalls: `sessions=[] subjects=[] keys=["keys billing-1"] explains=0 stats=0`,
		},
		{
			name:      "revoke-api-key of an id the replica does not have",
			args:      []string{"revoke-api-key", "--issuer", "keys", "--addr", "ADDR", "unknown-Billing-1"},
			golden:    "revoke-api-key-unknown",
			wantCalls: `sessions=[] subjects=[] keys=["keys unknown-Billing-1"] explains=0 stats=0`,
		},
		{
			name:      "revoke-api-key refused by the service",
			args:      []string{"--addr", "ADDR", "revoke-api-key", "--issuer", "hs", "billing-1"},
			backend:   &fakeBackend{err: status.Error(codes.InvalidArgument, `"hs" is not an issuer of kind api_keys`)},
			wantCode:  codes.InvalidArgument,
			wantCalls: `sessions=[] subjects=[] keys=["hs billing-1"] explains=0 stats=0`,
		},
		{
			name:      "stats",
			args:      []string{"--addr", "ADDR", "stats"},
			backend:   &fakeBackend{stats: testStats()},
			golden:    "stats",
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=1`,
		},
		{
			name:      "stats --json",
			args:      []string{"--addr", "ADDR", "stats", "--json"},
			backend:   &fakeBackend{stats: testStats()},
			golden:    "stats-json",
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=1`,
		},
		{
			name:      "explain allowed",
			args:      []string{"--addr", "ADDR", "explain", request},
			backend:   &fakeBackend{explanation: allowedExplanation()},
			golden:    "explain-allowed",
			wantCalls: `sessions=[] subjects=[] keys=[] explains=1 stats=0`,
		},
		{
			name:      "explain denied",
			args:      []string{"--addr", "ADDR", "explain", request},
			backend:   &fakeBackend{explanation: deniedExplanation()},
			wantErr:   ErrDenied,
			golden:    "explain-denied",
			wantCalls: `sessions=[] subjects=[] keys=[] explains=1 stats=0`,
		},
		{
			name:      "explain denied --json",
			args:      []string{"--addr", "ADDR", "explain", "--json", request},
			backend:   &fakeBackend{explanation: deniedExplanation()},
			wantErr:   ErrDenied,
			golden:    "explain-denied-json",
			wantCalls: `sessions=[] subjects=[] keys=[] explains=1 stats=0`,
		},
		{
			name:      "help",
			args:      []string{"help"},
			golden:    "usage",
			wantCalls: noCalls,
		},
		{
			name:      "-h",
			args:      []string{"-h"},
			wantErr:   flag.ErrHelp,
			golden:    "usage",
			wantCalls: noCalls,
		},
		{
			name:      "a failing backend",
			args:      []string{"--addr", "ADDR", "stats"},
			backend:   &fakeBackend{err: errors.New("boom")},
			wantCode:  codes.Internal,
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=1`,
		},
		{name: "no command", args: []string{"--addr", "ADDR"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "unknown command", args: []string{"--addr", "ADDR", "flush"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "unknown flag", args: []string{"--addr", "ADDR", "--verbose", "stats"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "unknown command flag", args: []string{"--addr", "ADDR", "stats", "--yaml"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "address without a port", args: []string{"--addr", "localhost", "stats"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "zero timeout", args: []string{"--addr", "ADDR", "--timeout", "0s", "stats"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "session missing", args: []string{"--addr", "ADDR", "invalidate-session"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "session empty", args: []string{"--addr", "ADDR", "invalidate-session", ""}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "two subjects", args: []string{"--addr", "ADDR", "revoke-subject", "--issuer", "hs", "alice", "bob"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "subject without issuer", args: []string{"--addr", "ADDR", "revoke-subject", "alice"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "API key without issuer", args: []string{"--addr", "ADDR", "revoke-api-key", "billing-1"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "API key id missing", args: []string{"--addr", "ADDR", "revoke-api-key", "--issuer", "keys"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "two API key ids", args: []string{"--addr", "ADDR", "revoke-api-key", "--issuer", "keys", "a", "b"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "API key id empty", args: []string{"--addr", "ADDR", "revoke-api-key", "--issuer", "keys", ""}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "stats with an argument", args: []string{"--addr", "ADDR", "stats", "verdicts"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "explain without a file", args: []string{"--addr", "ADDR", "explain"}, wantErr: ErrUsage, wantCalls: noCalls},
		{name: "explain a missing file", args: []string{"--addr", "ADDR", "explain", "testdata/nothing.json"}, wantErr: os.ErrNotExist, wantCalls: noCalls},
		{name: "explain a file that is not a CheckRequest", args: []string{"--addr", "ADDR", "explain", malformed}, wantCode: codes.Unknown, wantCalls: noCalls},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.backend == nil {
				tt.backend = &fakeBackend{}
			}
			svc := startAdmin(t, tt.backend, nil)
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = strings.ReplaceAll(a, "ADDR", svc.addr)
			}
			var stdout, stderr bytes.Buffer
			err := RunCLI(t.Context(), args, &stdout, &stderr)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
			case tt.wantCode != codes.OK:
				if err == nil || status.Code(err) != tt.wantCode || errors.Is(err, ErrUsage) {
					t.Fatalf("err = %v (code %v), want code %v", err, status.Code(err), tt.wantCode)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
			if errors.Is(err, ErrUsage) && errors.Is(err, ErrDenied) {
				t.Errorf("err = %v is both a usage error and a denial", err)
			}
			if tt.golden != "" {
				checkGolden(t, tt.golden, stdout.Bytes())
			} else if stdout.Len() > 0 {
				t.Errorf("unexpected output:\n%s", stdout.String())
			}
			if calls := tt.backend.calls(); calls != tt.wantCalls {
				t.Errorf("backend calls: %s, want %s", calls, tt.wantCalls)
			}
		})
	}
}

func TestCLIUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, cmd := range [][]string{
		{"invalidate-session", "sess-42"},
		{"revoke-subject", "--issuer", "hs", "alice"},
		{"revoke-api-key", "--issuer", "keys", "billing-1"},
		{"explain", "testdata/check-request.json"},
		{"stats"},
	} {
		t.Run(cmd[0], func(t *testing.T) {
			var stdout bytes.Buffer
			err := RunCLI(t.Context(), append([]string{"--addr", addr}, cmd...), &stdout, &stdout)
			if status.Code(err) != codes.Unavailable || errors.Is(err, ErrUsage) || errors.Is(err, ErrDenied) {
				t.Fatalf("err = %v, want Unavailable", err)
			}
			if !strings.Contains(err.Error(), addr) {
				t.Errorf("err = %v does not name the address", err)
			}
			if stdout.Len() > 0 {
				t.Errorf("unexpected output:\n%s", stdout.String())
			}
		})
	}
}

// TestCLIExplainCaptures sends every real Envoy CheckRequest through the CLI
// and checks the server decodes exactly what Envoy sent.
func TestCLIExplainCaptures(t *testing.T) {
	captures, err := envoytest.Captures()
	if err != nil {
		t.Fatal(err)
	}
	if len(captures) == 0 {
		t.Fatal("no captures")
	}
	for _, c := range captures {
		t.Run(c.Name, func(t *testing.T) {
			b := &fakeBackend{explanation: allowedExplanation()}
			svc := startAdmin(t, b, nil)
			data, err := protojson.Marshal(c.Request)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), c.Name+".json")
			if err := os.WriteFile(file, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			if err := RunCLI(t.Context(), []string{"--addr", svc.addr, "explain", file}, &stdout, &stdout); err != nil {
				t.Fatal(err)
			}
			seen := b.explained()
			if len(seen) != 1 || !proto.Equal(seen[0], c.Request) {
				t.Errorf("the server decoded %v, want %v", seen, c.Request)
			}
		})
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name+".golden"), got)
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
