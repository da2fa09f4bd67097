package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/extauthz/extauthz/internal/loadtest"
)

// childEnv, when set, makes the test binary play one of the subprocesses
// the command starts: this command itself for "noop", or a stand-in for
// extauthz behaving as the value says.
const childEnv = "EXTAUTHZ_LOADTEST_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(playChild(mode))
	}
	os.Exit(m.Run())
}

func playChild(mode string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	switch {
	case len(args) > 0 && args[0] == "noop":
		return Main(ctx, args, defaultEnv())
	case len(args) > 0 && args[0] == "serve":
		if err := fakeService(ctx, mode, args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "fake extauthz:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "test child: unexpected arguments", args)
	return 3
}

// fakeService stands in for "extauthz serve": it takes the same flags and
// environment, and allows, denies, never gets ready or fails at start.
func fakeService(ctx context.Context, mode string, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg := fs.String("config", "", "")
	grpcAddr := fs.String("grpc-addr", "", "")
	fs.String("admin-addr", "", "")
	opsAddr := fs.String("ops-addr", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(*cfg); err != nil {
		return err
	}
	if os.Getenv(loadtest.SecretEnv) == "" {
		return fmt.Errorf("%s not set", loadtest.SecretEnv)
	}
	if mode == "crash" {
		return fmt.Errorf("config rejected")
	}
	glis, err := net.Listen("tcp", *grpcAddr)
	if err != nil {
		return err
	}
	alis, err := net.Listen("tcp", *opsAddr)
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	var srv authv3.AuthorizationServer = loadtest.NoopServer{}
	if mode == "deny" {
		srv = denier{}
	}
	authv3.RegisterAuthorizationServer(gs, srv)
	go gs.Serve(glis)
	ops := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" || mode == "never-ready" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ready\n")
	})}
	go ops.Serve(alis)
	<-ctx.Done()
	gs.Stop()
	ops.Close()
	return nil
}

type denier struct {
	authv3.UnimplementedAuthorizationServer
}

func (denier) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(codes.Unauthenticated), Message: "invalid token"},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
		}},
	}, nil
}

// testEnv runs the command with captured output; its subprocesses are this
// test binary playing mode.
func testEnv(t *testing.T, mode string) (env, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	t.Setenv(childEnv, mode)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	return env{
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(string) string { return "" },
		self:   self,
		http:   &http.Client{Timeout: time.Second},
		now:    time.Now,
	}, &stdout, &stderr
}

// quick is a bounded load: a request cap ends each measurement, not the
// clock.
var quick = []string{"-duration", "1m", "-warmup", "10ms", "-max-requests", "150", "-callers", "4", "-pool-size", "4", "-fresh-max", "2000"}

func TestRunEndToEnd(t *testing.T) {
	e, stdout, stderr := testEnv(t, "allow")
	self := e.self
	dir := t.TempDir()
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	args := append(slices.Clone(quick), "-extauthz", self, "-dir", dir, "-json", jsonPath)
	if code := Main(context.Background(), args, e); code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	for _, want := range []string{"SCENARIO", loadtest.ScenarioHS256, loadtest.ScenarioRS256, loadtest.ScenarioES256} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep loadtest.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 3 {
		t.Fatalf("%d scenarios in the JSON report, want 3", len(rep.Scenarios))
	}
	for _, s := range rep.Scenarios {
		if s.Noop.Errors != 0 || s.Service.Errors != 0 || s.Noop.Requests == 0 || s.Service.Requests == 0 {
			t.Errorf("%s: noop ok %d errors %d, service ok %d errors %d", s.Name, s.Noop.Requests, s.Noop.Errors, s.Service.Requests, s.Service.Errors)
		}
		if s.Noop.Addr == s.Service.Addr {
			t.Errorf("%s: noop and service measured at the same address %s", s.Name, s.Noop.Addr)
		}
	}
	for _, f := range []string{"config.yaml", "jwks.json", "extauthz.log", "noop.log"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("-dir lacks %s: %v", f, err)
		}
	}

	// A second run with the same -dir reuses the keys.
	before, _ := os.ReadFile(filepath.Join(dir, "jwks.json"))
	stdout.Reset()
	args = append(slices.Clone(quick), "-extauthz", self, "-dir", dir, "-scenarios", loadtest.ScenarioES256)
	if code := Main(context.Background(), args, e); code != exitOK {
		t.Fatalf("second run: exit %d\nstderr:\n%s", code, stderr)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "jwks.json"))
	if !bytes.Equal(before, after) {
		t.Error("the second run replaced the keys in -dir")
	}
	if strings.Contains(stdout.String(), loadtest.ScenarioHS256) {
		t.Errorf("-scenarios %s ran others too:\n%s", loadtest.ScenarioES256, stdout)
	}
}

func TestRunVerdicts(t *testing.T) {
	tests := []struct {
		name       string
		mode       string
		extra      []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"denials fail the scenario, enforced", "deny", []string{"-enforce"}, exitFailed, "denied Unauthenticated http 401", ""},
		{"denials fail the scenario, reported only", "deny", nil, exitOK, "FAIL", ""},
		{"service never ready", "never-ready", []string{"-ready-timeout", "300ms"}, exitFailed, "", "not ready within 300ms"},
		{"service exits at start", "crash", nil, exitFailed, "", "config rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, stdout, stderr := testEnv(t, tt.mode)
			args := append(slices.Clone(quick), "-extauthz", e.self, "-scenarios", loadtest.ScenarioHS256)
			args = append(args, tt.extra...)
			code := Main(context.Background(), args, e)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantStdout, stdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr)
			}
		})
	}
}

// TestRunTarget measures an already running service (here a do-nothing
// server) with keys from a setup directory.
func TestRunTarget(t *testing.T) {
	e, stdout, stderr := testEnv(t, "allow")
	e.getenv = func(k string) string {
		if k == loadtest.SecretEnv {
			return "the-service-secret"
		}
		return ""
	}
	dir := t.TempDir()
	if code := Main(context.Background(), []string{"setup", "-dir", dir}, e); code != exitOK {
		t.Fatalf("setup: exit %d: %s", code, stderr)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- loadtest.ServeNoop(ctx, lis) }()
	defer func() {
		cancel()
		<-served
	}()
	args := append(slices.Clone(quick), "-target", lis.Addr().String(), "-dir", dir)
	if code := Main(context.Background(), args, e); code != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	if !strings.Contains(stdout.String(), loadtest.ScenarioRS256) {
		t.Errorf("no report:\n%s", stdout)
	}
	if strings.Contains(stderr.String(), "starting the service") {
		t.Errorf("started a service despite -target:\n%s", stderr)
	}
}

func TestParseRunFlags(t *testing.T) {
	noSecret := func(string) string { return "" }
	tests := []struct {
		name      string
		args      []string
		getenv    func(string) string
		wantErr   string
		wantScens []string
	}{
		{"defaults", nil, noSecret, "", allScenarios},
		{"a subset, deduplicated", []string{"-scenarios", "es256-fresh, hs256-one,es256-fresh"}, noSecret, "", []string{"es256-fresh", "hs256-one"}},
		{"unknown scenario", []string{"-scenarios", "hs256-one,rs512"}, noSecret, `unknown scenario "rs512"`, nil},
		{"no scenario", []string{"-scenarios", ""}, noSecret, "none given", nil},
		{"bad duration", []string{"-duration", "0s"}, noSecret, "-duration must be positive", nil},
		{"more connections than callers", []string{"-callers", "2", "-connections", "3"}, noSecret, "no more connections than callers", nil},
		{"every problem at once", []string{"-duration", "0s", "-warmup", "-1s"}, noSecret, "-duration must be positive\n-warmup must not be negative", nil},
		{"target without keys", []string{"-target", "127.0.0.1:9191"}, func(string) string { return "s" }, "-target needs -dir", nil},
		{"target without secret", []string{"-target", "127.0.0.1:9191", "-scenarios", "hs256-one"}, noSecret, "-target needs JWT_SECRET", nil},
		{"target, HS256 only", []string{"-target", "127.0.0.1:9191", "-scenarios", "hs256-one"}, func(string) string { return "s" }, "", []string{"hs256-one"}},
		{"stray argument", []string{"extra"}, noSecret, "unexpected arguments", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseRunFlags(tt.args, env{stderr: io.Discard, getenv: tt.getenv})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				if _, ok := err.(usageError); !ok {
					t.Errorf("error %T is not a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.scenarios, tt.wantScens) {
				t.Errorf("scenarios %q, want %q", o.scenarios, tt.wantScens)
			}
		})
	}
}

func TestNoopCommand(t *testing.T) {
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	codec := make(chan int, 1)
	go func() {
		codec <- Main(ctx, []string{"noop"}, env{stdout: pw, stderr: io.Discard})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok || checkLoopback(addr) != nil {
		t.Fatalf("noop printed %q, want \"listening <loopback address>\"", line)
	}
	res, err := loadtest.Run(ctx, loadtest.Config{Addr: addr, Callers: 2, Connections: 1, Duration: time.Minute, MaxRequests: 20, Tokens: loadtest.NewFixed("t")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 20 || res.Errors != 0 {
		t.Errorf("ok %d errors %d, want 20 and 0", res.Requests, res.Errors)
	}
	cancel()
	if code := <-codec; code != exitOK {
		t.Errorf("noop exit %d after cancel, want 0", code)
	}
}

func TestCommandUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"unknown command", []string{"bench"}, exitUsage},
		{"noop off loopback", []string{"noop", "-addr", "0.0.0.0:0"}, exitUsage},
		{"setup without dir", []string{"setup"}, exitUsage},
		{"help", []string{"help"}, exitOK},
		{"run help", []string{"-h"}, exitOK},
		{"missing binary", []string{"-extauthz", "no/such/extauthz"}, exitUsage},
		{"unknown flag", []string{"-frobnicate"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code := Main(context.Background(), tt.args, env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }})
			if code != tt.want {
				t.Errorf("exit %d, want %d\n%s", code, tt.want, out.String())
			}
		})
	}
}

func TestSetupCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bench")
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"setup", "-dir", dir}, env{stdout: &out, stderr: &out}); code != exitOK {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	if _, err := loadtest.LoadKeys(dir, []byte("s")); err != nil {
		t.Errorf("setup wrote no usable keys: %v", err)
	}
	if !strings.Contains(out.String(), "-target 127.0.0.1:9191 -dir") {
		t.Errorf("setup does not say how to measure:\n%s", out.String())
	}
}
