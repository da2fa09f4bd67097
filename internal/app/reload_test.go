package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const reloadSecret = "reload-test-secret-reload-test-secret-xx"

func routeConfig(scopes string) string {
	return fmt.Sprintf("issuers: [{name: a, secret: %s}]\nroutes: [{name: main, default: true, issuers: [a]%s}]\n", reloadSecret, scopes)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomic, like a ConfigMap swap
		t.Fatal(err)
	}
}

// statusOf sends one check and returns the HTTP status Envoy would apply.
func (s *server) statusOf(t *testing.T, token string) (int, error) {
	return statusWith(context.Background(), s.client, token)
}

// TestHotReload swaps a good file, a broken one and a good one while checks
// run concurrently: none fails, and each good file takes effect.
func TestHotReload(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, routeConfig(""))
	s := startServerWith(t, nil, ServeOptions{ConfigFile: cfg, WatchInterval: 20 * time.Millisecond})
	tok := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})

	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		failures atomic.Int64
		checks   atomic.Int64
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100_000 && !stop.Load(); i++ {
				code, err := s.statusOf(t, tok)
				checks.Add(1)
				if err != nil || (code != 200 && code != 403) {
					failures.Add(1)
				}
			}
		}()
	}
	waitFor := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if code, err := s.statusOf(t, tok); err == nil && code == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("status never became %d", want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(200)
	writeFile(t, cfg, routeConfig(", scopes: [admin]"))
	waitFor(403)
	writeFile(t, cfg, "routes: [{name: main, issuers: [nope], colour: red}]\n")
	time.Sleep(200 * time.Millisecond) // ten polls
	if code, _ := s.statusOf(t, tok); code != 403 {
		t.Fatalf("a broken file replaced the serving config: %d", code)
	}
	writeFile(t, cfg, routeConfig(""))
	waitFor(200)
	stop.Store(true)
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d of %d concurrent checks failed during reloads", failures.Load(), checks.Load())
	}
	ok, bad := reloadCounts(t, s)
	if ok < 3 || bad != 1 {
		t.Fatalf("reload metrics ok=%v error=%v, want >=3 and 1", ok, bad)
	}
}

func TestReloadOnSIGHUP(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, routeConfig(""))
	s := startServerWith(t, nil, ServeOptions{ConfigFile: cfg}) // not watched
	tok := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	if code, _ := s.statusOf(t, tok); code != 200 {
		t.Fatalf("before: %d", code)
	}
	writeFile(t, cfg, routeConfig(", scopes: [admin]"))
	time.Sleep(50 * time.Millisecond)
	if code, _ := s.statusOf(t, tok); code != 200 {
		t.Fatalf("an unwatched file was reloaded without SIGHUP: %d", code)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _ := s.statusOf(t, tok); code == 403 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var reloadMetric = regexp.MustCompile(`(?m)^extauthz_config_reloads_total\{result="(ok|error)"\} (\d+)$`)

func reloadCounts(t *testing.T, s *server) (ok, bad float64) {
	t.Helper()
	_, body := httpGet(t, "http://"+s.opsAddr+"/metrics")
	for _, m := range reloadMetric.FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "ok" {
			ok = v
		} else {
			bad = v
		}
	}
	return ok, bad
}
