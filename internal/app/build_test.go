package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/httpauthz"
)

// TestBadFlagFailsBeforeAnyIO: every flag is checked before the service
// reads its configuration, sets up Redis or listens. Each step would fail
// here in its own way: the configuration's Redis has no encryption key in
// the environment, and the gRPC address is one this test holds. A usage
// error naming the flag, with nothing logged, means none of them ran.
func TestBadFlagFailsBeforeAnyIO(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
issuers: [{name: idp, secret: %s}]
redis: {addrs: ["127.0.0.1:1"], encryption_key_env: TOKEN_KEY}
routes: [{name: mcp, default: true, protocol: mcp, issuers: [idp]}]
`, strings.Repeat("k", 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	good := func() ServeOptions {
		return ServeOptions{
			ConfigFile: cfg, GRPCAddr: busy.Addr().String(), AdminAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			LogLevel: "info", LogFormat: "json", HTTPConvention: "auto", HTTPTrusted: "127.0.0.0/8", MemoryLimit: "off",
			Started: func(Addrs) { t.Error("the service started") },
		}
	}

	t.Run("control: good flags reach Redis", func(t *testing.T) {
		err := Serve(context.Background(), good(), env(nil, io.Discard, io.Discard))
		if err == nil || !strings.Contains(err.Error(), "redis: TOKEN_KEY") {
			t.Fatalf("Serve: %v, want the Redis key error (else the cases below prove nothing)", err)
		}
	})
	for _, tc := range []struct {
		name string
		set  func(*ServeOptions)
		want string
	}{
		{"unknown HTTP convention", func(o *ServeOptions) { o.HTTPConvention = "apache" }, "--http-convention"},
		{"HTTP convention checked with the front end off", func(o *ServeOptions) { o.HTTPAddr, o.HTTPConvention = "", "apache" }, "--http-convention"},
		{"trusted proxy not an address", func(o *ServeOptions) { o.HTTPTrusted = "10.0.0.0/8,proxy" }, "--http-trusted-proxies"},
		{"memory limit not a size", func(o *ServeOptions) { o.MemoryLimit = "lots" }, "--memory-limit"},
		{"log level", func(o *ServeOptions) { o.LogLevel = "loud" }, "loud"},
		{"log format", func(o *ServeOptions) { o.LogFormat = "xml" }, "xml"},
		{"negative drain period", func(o *ServeOptions) { o.DrainPeriod = -time.Second }, "--drain-period"},
		{"negative connection cap", func(o *ServeOptions) { o.HTTPMaxConns = -1 }, "--http-max-conns"},
		{"client CA without allowed clients", func(o *ServeOptions) { o.AdminClientCA = "ca.pem" }, "--admin-allowed-clients"},
		{"certificate without key", func(o *ServeOptions) { o.AdminTLSCert = "cert.pem" }, "--admin-tls-key"},
		{"exposed admin without authentication", func(o *ServeOptions) { o.AdminAddr = "0.0.0.0:0" }, "not a loopback address"},
		{"auto convention trusting a network", func(o *ServeOptions) { o.HTTPTrusted = "10.0.0.0/8" }, "--http-convention auto"},
		{"auto convention trusting one outside address", func(o *ServeOptions) { o.HTTPTrusted = "127.0.0.1,192.0.2.7" }, "--http-convention auto"},
		{"auto convention trusting a prefix wider than loopback", func(o *ServeOptions) { o.HTTPTrusted = "127.0.0.0/7" }, "--http-convention auto"},
		{"auto convention trusting every address", func(o *ServeOptions) { o.HTTPTrusted = "::/0" }, "--http-convention auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.set(&o)
			var logs bytes.Buffer
			err := Serve(context.Background(), o, env(nil, &logs, &logs))
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Serve: %v, want a usage error naming %q", err, tc.want)
			}
			if logs.Len() != 0 {
				t.Errorf("logged before failing: %s", logs.String())
			}
		})
	}
}

// TestClosersRunNewestFirst: every closer runs, newest first, and each
// failure is logged under its name without stopping the rest; something
// already closed is not a failure.
func TestClosersRunNewestFirst(t *testing.T) {
	var order []string
	var c closers
	c.add("tracer", func() error { order = append(order, "tracer"); return nil })
	c.add("store", func() error { order = append(order, "store"); return errors.New("connection reset") })
	c.add("listener", func() error { order = append(order, "listener"); return net.ErrClosed })
	var logs bytes.Buffer
	c.closeAll(slog.New(slog.NewTextHandler(&logs, nil)))
	if got := strings.Join(order, ","); got != "listener,store,tracer" {
		t.Errorf("order %s, want listener,store,tracer", got)
	}
	if !strings.Contains(logs.String(), "what=store") || !strings.Contains(logs.String(), "connection reset") {
		t.Errorf("the store's failure is not logged: %s", logs.String())
	}
	if strings.Contains(logs.String(), "listener") {
		t.Errorf("an already closed listener is logged: %s", logs.String())
	}
	c.closeAll(slog.New(slog.NewTextHandler(&logs, nil)))
	if len(order) != 3 {
		t.Errorf("closers ran again: %v", order)
	}
}

// TestBadFlagExitStatus: on the command line a bad flag value is a usage
// error (exit status 2) naming the flag.
func TestBadFlagExitStatus(t *testing.T) {
	code, _, stderr := runCmd(t, nil, "serve", "--http-convention", "apache", "--grpc-addr", "127.0.0.1:0", "--admin-addr", "", "--ops-addr", "")
	if code != 2 || !strings.Contains(stderr, "--http-convention") {
		t.Fatalf("exit %d, stderr %q: want 2 naming --http-convention", code, stderr)
	}
}

// TestLoopbackOnly: auto's trusted proxies may be loopback addresses only.
func TestLoopbackOnly(t *testing.T) {
	tests := []struct {
		name    string
		trusted string
		want    bool
	}{
		{"the default", "127.0.0.0/8,::1/128", true},
		{"one loopback address", "127.0.0.1", true},
		{"a part of loopback", "127.1.0.0/16", true},
		{"wider than loopback", "127.0.0.0/7", false},
		{"a private network", "10.0.0.0/8", false},
		{"IPv6 beyond ::1", "::/127", false},
		{"none", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := httpauthz.ParseTrustedProxies(tt.trusted)
			if err != nil {
				t.Fatal(err)
			}
			if got := loopbackOnly(p); got != tt.want {
				t.Fatalf("loopbackOnly(%s) = %v, want %v", tt.trusted, got, tt.want)
			}
		})
	}
}

// TestDevelopmentSecretOnlyOnLoopback: without --config and JWT_SECRET the
// built-in default accepts tokens anyone can mint, so serve refuses to
// start with it on a check listener (gRPC, HTTP forward-auth) that is not
// on loopback, before any I/O, saying what to set; on loopback, with
// JWT_SECRET or with --config it starts.
func TestDevelopmentSecretOnlyOnLoopback(t *testing.T) {
	const want = "Set JWT_SECRET (at least 32 random bytes) or pass --config FILE"
	for _, tc := range []struct {
		name       string
		config     string
		secret     string
		grpc, http string
		refused    string // "" when it starts; else the flag named
	}{
		{"loopback, development secret", "", "", "127.0.0.1:9191", "", ""},
		{"localhost and IPv6 loopback", "", "", "localhost:9191", "[::1]:9193", ""},
		{"gRPC on every interface", "", "", "0.0.0.0:9191", "", "--grpc-addr 0.0.0.0:9191"},
		{"gRPC on a host name", "", "", "extauthz:9191", "", "--grpc-addr extauthz:9191"},
		{"gRPC with no host", "", "", ":9191", "", "--grpc-addr :9191"},
		{"HTTP front end exposed", "", "", "127.0.0.1:9191", "0.0.0.0:9193", "--http-addr 0.0.0.0:9193"},
		{"exposed with JWT_SECRET", "", strings.Repeat("k", 32), "0.0.0.0:9191", "0.0.0.0:9193", ""},
		{"exposed with a configuration", "config.yaml", "", "0.0.0.0:9191", "0.0.0.0:9193", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ServeOptions{ConfigFile: tc.config, GRPCAddr: tc.grpc, HTTPAddr: tc.http}
			err := checkDevelopmentSecret(o, func(k string) string {
				if k == "JWT_SECRET" {
					return tc.secret
				}
				return ""
			})
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), want)):
				t.Fatalf("error %v, want one naming %q and saying %q", err, tc.refused, want)
			}
		})
	}

	t.Run("serve refuses before any I/O", func(t *testing.T) {
		o := ServeOptions{GRPCAddr: "0.0.0.0:0", AdminAddr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0",
			LogLevel: "info", LogFormat: "json", HTTPConvention: "auto", HTTPTrusted: "127.0.0.0/8", MemoryLimit: "off",
			Started: func(Addrs) { t.Error("the service started") }}
		var logs bytes.Buffer
		err := Serve(context.Background(), o, env(nil, &logs, &logs))
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Serve: %v, want a usage error saying %q", err, want)
		}
		if logs.Len() != 0 {
			t.Errorf("logged before failing: %s", logs.String())
		}
	})
}
