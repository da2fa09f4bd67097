package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// TestReloadRenamingUsersRefused: a file that would rename an issuer's
// users (a second issuer flips the first one's namespace from none to
// "a:") is refused like a broken one, logged and counted, and the running
// configuration keeps serving; the same change that keeps the first
// issuer's names (subject_prefix: "") is loaded.
func TestReloadRenamingUsersRefused(t *testing.T) {
	const other = "reload-test-secret-of-the-second-issuer-x"
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	writeFile(t, cfg, routeConfig(""))
	s := startServerWith(t, nil, ServeOptions{ConfigFile: cfg, WatchInterval: 20 * time.Millisecond})
	tokB := testtoken.HMAC(t, "HS256", other, map[string]any{"iss": "https://b.example.com", "sub": "bob", "exp": time.Now().Add(time.Hour).Unix()})
	two := func(prefix string) string {
		return fmt.Sprintf("issuers:\n  - {name: a, secret: %s%s}\n  - {name: b, issuer: https://b.example.com, secret: %s}\nroutes: [{name: main, default: true, issuers: [a, b]}]\n",
			reloadSecret, prefix, other)
	}
	writeFile(t, cfg, two(""))
	deadline := time.Now().Add(10 * time.Second)
	for _, bad := reloadCounts(t, s); bad < 1; _, bad = reloadCounts(t, s) {
		if time.Now().After(deadline) {
			t.Fatal("the renaming file was neither refused nor counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, _ := s.statusOf(t, tokB); code != 401 {
		t.Fatalf("b's token after the refused reload: %d, want 401 (b not configured)", code)
	}
	if logs := s.logs.String(); !strings.Contains(logs, "configuration rejected") || !strings.Contains(logs, "subject namespace would change") {
		t.Fatalf("the refusal is not logged with its reason:\n%s", logs)
	}
	writeFile(t, cfg, two(`, subject_prefix: ""`))
	for deadline = time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := s.statusOf(t, tokB); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file keeping a's names was not loaded")
		}
	}
}
