package apikey_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/argon2"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/testing/testclock"
)

var epoch = time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)

// writeFile replaces path with content by rename, as a deployment should.
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func mustKey(t testing.TB) string {
	t.Helper()
	k, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustArgon(t testing.TB, secret string) string {
	t.Helper()
	h, err := apikey.Argon2idHash(secret)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func open(t testing.TB, c *testclock.Clock, content string) (*apikey.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.yaml")
	writeFile(t, path, content)
	s, err := apikey.Open(path, apikey.Options{Name: "keys", Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

func TestLookup(t *testing.T) {
	c := testclock.New(epoch)
	billing, expired, routed, other := mustKey(t), mustKey(t), mustKey(t), mustKey(t)
	const legacy = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	doc := fmt.Sprintf(`keys:
  - id: billing
    hash: %s
    subject: billing-agent
    scopes: [tools.call, read]
    claims: {team: billing, level: 3, tags: [a, b], aud: mcp}
    expires: 2027-01-15T08:00:30Z
  - id: old
    hash: %s
    subject: old-agent
    expires: 2027-01-01T00:00:00Z
  - id: routed
    hash: %s
    subject: routed-agent
    routes: [mcp-a]
  - id: human
    hash: %s
    subject: alice
  - id: legacy
    key: %s
    subject: legacy-agent
`, apikey.SHA256Hash(billing), apikey.SHA256Hash(expired), apikey.SHA256Hash(routed), mustArgon(t, "correct horse battery staple"), legacy)
	s, _ := open(t, c, doc)

	tests := []struct {
		name, key, route string
		wantErr          error
		wantSub          string
	}{
		{"generated key", billing, "mcp-a", nil, "billing-agent"},
		{"expired key", expired, "mcp-a", apikey.ErrExpired, ""},
		{"key on its route", routed, "mcp-a", nil, "routed-agent"},
		{"key on another route", routed, "mcp-b", apikey.ErrRoute, ""},
		{"unknown generated key", other, "mcp-a", apikey.ErrUnknownKey, ""},
		{"prefix but wrong length", billing[:len(billing)-1], "mcp-a", apikey.ErrMalformed, ""},
		{"prefix but not base64url", billing[:len(billing)-1] + "!", "mcp-a", apikey.ErrMalformed, ""},
		{"human secret with its id", "human.correct horse battery staple", "mcp-a", nil, "alice"},
		{"human secret, wrong secret", "human.correct horse battery stapl", "mcp-a", apikey.ErrWrongSecret, ""},
		{"human secret, other id", "billing.correct horse battery staple", "mcp-a", apikey.ErrUnknownKey, ""},
		{"human secret without id", "correct horse battery staple", "mcp-a", apikey.ErrUnknownKey, ""},
		{"human id, empty secret", "human.", "mcp-a", apikey.ErrWrongSecret, ""},
		{"empty id, human's secret", ".correct horse battery staple", "mcp-a", apikey.ErrUnknownKey, ""},
		{"human secret with a dot added", "human.correct horse battery staple.", "mcp-a", apikey.ErrWrongSecret, ""},
		{"human secret with a NUL added", "human.correct horse battery staple\x00", "mcp-a", apikey.ErrWrongSecret, ""},
		{"human id, plain legacy key as its secret", "human." + legacy, "mcp-a", apikey.ErrWrongSecret, ""},
		{"plain legacy key", legacy, "mcp-a", nil, "legacy-agent"},
		{"empty", "", "mcp-a", apikey.ErrMalformed, ""},
		{"too long", strings.Repeat("k", 2000), "mcp-a", apikey.ErrMalformed, ""},
		{"digest of a key is not the key", strings.TrimPrefix(apikey.SHA256Hash(billing), "sha256:"), "mcp-a", apikey.ErrUnknownKey, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Lookup(t.Context(), tc.key, tc.route)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if tc.key != "" && strings.Contains(err.Error(), tc.key) {
					t.Errorf("error text shows the key: %q", err)
				}
				return
			}
			if got.Subject != tc.wantSub || got.IssuerName != "keys" {
				t.Errorf("claims = %+v", got)
			}
		})
	}

	t.Run("claims of a key", func(t *testing.T) {
		got, err := s.Lookup(t.Context(), billing, "")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"sub": "billing-agent", "client_id": "billing", "api_key_id": "billing", "scope": "tools.call read",
			"team": "billing", "level": float64(3), "tags": []any{"a", "b"}, "aud": "mcp",
			"exp": float64(epoch.Add(30 * time.Second).Unix()),
		}
		if !reflect.DeepEqual(got.Raw, want) {
			t.Errorf("Raw = %#v\nwant %#v", got.Raw, want)
		}
		if got.ID != "billing" || !reflect.DeepEqual(got.Audience, []string{"mcp"}) || !got.ExpiresAt.Equal(epoch.Add(30*time.Second)) {
			t.Errorf("claims = %+v (ExpiresAt is the key's expiry, before the cache TTL)", got)
		}
		got, err = s.Lookup(t.Context(), routed, "mcp-a")
		if err != nil || !got.ExpiresAt.Equal(epoch.Add(apikey.DefaultCacheTTL)) {
			t.Errorf("a key without expiry: ExpiresAt %v, %v; want the cache TTL", got.ExpiresAt, err)
		}
		c.Advance(30 * time.Second)
		if _, err := s.Lookup(t.Context(), billing, ""); !errors.Is(err, apikey.ErrExpired) {
			t.Errorf("at its expiry: %v", err)
		}
	})
}

func TestLoadRefuses(t *testing.T) {
	k := mustKey(t)
	tests := []struct {
		name, entry, want string
	}{
		{"short plain key", "key: abcdefghijklmnop", "at least 32 bytes of entropy"},
		{"long but weak plain key", "key: " + strings.Repeat("ab", 40), "at least 32 bytes of entropy"},
		{"hex plain key of 128 bits", "key: 0123456789abcdef0123456789abcdef", "at least 32 bytes of entropy"},
		{"generated-looking key of the wrong size", "key: ek_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH", "must be 32 bytes"},
		{"sha256 not hex", "hash: sha256:xyz", "64 hex digits"},
		{"unknown scheme", "hash: md5:abc", `"sha256:" or "argon2id:"`},
		{"argon2id too costly", "hash: argon2id:$argon2id$v=19$m=4194304,t=3,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA", "m must be"},
		{"argon2id not PHC", "hash: argon2id:whatever", "not a $argon2id$ PHC string"},
		{"both hash and key", "hash: " + apikey.SHA256Hash(k) + "\n    key: " + k, "exactly one of hash and key"},
		{"reserved claim", "hash: " + apikey.SHA256Hash(k) + "\n    claims: {sub: root}", "claims.sub is set from the entry"},
		{"unknown field", "hash: " + apikey.SHA256Hash(k) + "\n    scope: admin", "field scope not found"},
		{"scope with a space", "hash: " + apikey.SHA256Hash(k) + "\n    scopes: [\"a b\"]", "has spaces"},
	}
	argon := mustArgon(t, "correct horse battery staple")
	for name, tc := range map[string]struct{ id, want string }{
		"argon2id id with the generated prefix": {"ek_alice", `must not start with "ek_"`},
		"argon2id id with a dot":                {"alice.laptop", "must not contain '.'"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.yaml")
			writeFile(t, path, fmt.Sprintf("keys:\n  - {id: %s, subject: s, hash: %q}\n", tc.id, argon))
			if _, err := apikey.Open(path, apikey.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("generated prefix on a sha256 key's id", func(t *testing.T) {
		// The id of a generated key is only a name: any id is fine.
		path := filepath.Join(t.TempDir(), "keys.yaml")
		writeFile(t, path, fmt.Sprintf("keys:\n  - {id: ek_agent.1, subject: s, hash: %s}\n", apikey.SHA256Hash(k)))
		if _, err := apikey.Open(path, apikey.Options{}); err != nil {
			t.Fatal(err)
		}
	})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.yaml")
			writeFile(t, path, "keys:\n  - id: k1\n    subject: s\n    "+tc.entry+"\n")
			_, err := apikey.Open(path, apikey.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), k) || strings.Contains(err.Error(), "abcdefghijklmnop") {
				t.Errorf("error text shows a key: %q", err)
			}
		})
	}
	t.Run("duplicates", func(t *testing.T) {
		for name, doc := range map[string]string{
			"duplicate id":  fmt.Sprintf("keys:\n  - {id: a, subject: s, hash: %s}\n  - {id: a, subject: s, hash: %s}\n", apikey.SHA256Hash(k), apikey.SHA256Hash(mustKey(t))),
			"duplicate key": fmt.Sprintf("keys:\n  - {id: a, subject: s, hash: %s}\n  - {id: b, subject: s, hash: %s}\n", apikey.SHA256Hash(k), apikey.SHA256Hash(k)),
		} {
			path := filepath.Join(t.TempDir(), "keys.yaml")
			writeFile(t, path, doc)
			if _, err := apikey.Open(path, apikey.Options{}); err == nil {
				t.Errorf("%s: loaded", name)
			}
		}
	})
}

func TestJSONFile(t *testing.T) {
	c := testclock.New(epoch)
	k := mustKey(t)
	s, _ := open(t, c, fmt.Sprintf(`{"keys":[{"id":"j","hash":%q,"subject":"json-agent","scopes":["read"],"expires":"2028-01-01T00:00:00Z"}]}`, apikey.SHA256Hash(k)))
	if got, err := s.Lookup(t.Context(), k, "r"); err != nil || got.Subject != "json-agent" || got.Raw["scope"] != "read" {
		t.Fatalf("JSON file: %+v, %v", got, err)
	}
}

func TestPoll(t *testing.T) {
	c := testclock.New(epoch)
	a, b := mustKey(t), mustKey(t)
	entry := func(id, k string) string {
		return fmt.Sprintf("  - {id: %s, subject: %s, hash: %s}\n", id, id, apikey.SHA256Hash(k))
	}
	var logs bytes.Buffer
	path := filepath.Join(t.TempDir(), "keys.yaml")
	writeFile(t, path, "keys:\n"+entry("a", a))
	s, err := apikey.Open(path, apikey.Options{Now: c.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	works := func(k string) bool { _, err := s.Lookup(t.Context(), k, ""); return err == nil }

	steps := []struct {
		name         string
		write        string // "" leaves the file
		wantReloaded bool
		wantErr      bool
		wantA, wantB bool
	}{
		{"unchanged", "", false, false, true, false},
		{"changed: seen once, not yet applied", "keys:\n" + entry("a", a) + entry("b", b), false, false, true, false},
		{"the same content again: applied", "", true, false, true, true},
		{"rewritten with the same content", "keys:\n" + entry("a", a) + entry("b", b), false, false, true, true},
		{"an invalid file, seen once", "keys:\n  - {id: a, subject: s, key: " + a[:20] + "}\n", false, false, true, true},
		{"an invalid file is refused; the keys stay", "", false, true, true, true},
		{"a file without a, seen once", "keys:\n" + entry("b", b), false, false, true, true},
		{"applied", "", true, false, false, true},
	}
	for _, st := range steps {
		if st.write != "" {
			writeFile(t, path, st.write)
		}
		reloaded, err := s.Poll()
		if reloaded != st.wantReloaded || (err != nil) != st.wantErr {
			t.Fatalf("%s: Poll = %v, %v", st.name, reloaded, err)
		}
		if works(a) != st.wantA || works(b) != st.wantB {
			t.Fatalf("%s: a works %v, b works %v; want %v, %v", st.name, works(a), works(b), st.wantA, st.wantB)
		}
	}
	if strings.Contains(logs.String(), a) || strings.Contains(logs.String(), a[:20]) {
		t.Errorf("the log shows a key: %s", logs.String())
	}
}

// TestRotation rewrites the file under concurrent lookups: a new key is
// added, clients move to it, the old one is removed; no lookup of the key a
// client holds fails.
func TestRotation(t *testing.T) {
	c := testclock.New(epoch)
	old, next := mustKey(t), mustKey(t)
	entry := func(id, k string) string {
		return fmt.Sprintf("  - {id: %s, subject: agent, scopes: [read], hash: %s}\n", id, apikey.SHA256Hash(k))
	}
	s, path := open(t, c, "keys:\n"+entry("old", old))
	tick := make(chan time.Time)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go s.Run(ctx, tick)
	poll := func() { // two ticks apply a change (see Poll); a third proves Run took the second
		for range 3 {
			tick <- epoch
		}
	}

	var current atomic.Pointer[string]
	current.Store(&old)
	var done atomic.Bool
	var failures, lookups atomic.Int64
	// finished counts each client's completed lookups: once it has grown
	// past what it was when the clients moved to the next key, the lookup
	// that client had in flight with the old key is over.
	var finished [8]atomic.Int64
	var wg sync.WaitGroup
	for w := range finished {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1_000_000 && !done.Load(); i++ {
				if _, err := s.Lookup(context.Background(), *current.Load(), "mcp"); err != nil {
					failures.Add(1)
				}
				lookups.Add(1)
				finished[w].Add(1)
			}
		}()
	}
	// Unrelated churn while clients use the old key.
	for i := range 20 {
		writeFile(t, path, "keys:\n"+entry("old", old)+entry(fmt.Sprint("other-", i), mustKey(t)))
		poll()
	}
	writeFile(t, path, "keys:\n"+entry("old", old)+entry("next", next))
	poll()
	current.Store(&next)
	// Clients that read the old key before the switch finish their lookup
	// before the old key goes: wait until every client has finished one more.
	var before [len(finished)]int64
	for w := range finished {
		before[w] = finished[w].Load()
	}
	deadline := time.Now().Add(10 * time.Second)
	for w := range finished {
		for finished[w].Load() <= before[w] && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	writeFile(t, path, "keys:\n"+entry("next", next))
	poll()
	for n := lookups.Load(); lookups.Load() < n+100; {
		time.Sleep(time.Millisecond)
	}
	done.Store(true)
	wg.Wait()
	if f := failures.Load(); f != 0 {
		t.Fatalf("%d of %d lookups failed during rotation", f, lookups.Load())
	}
	if _, err := s.Lookup(t.Context(), old, "mcp"); !errors.Is(err, apikey.ErrUnknownKey) {
		t.Errorf("the removed key: %v", err)
	}
	if got := s.IDs(); !reflect.DeepEqual(got, []string{"next"}) {
		t.Errorf("ids = %v", got)
	}
}

func TestNewEntry(t *testing.T) {
	k, e, err := apikey.NewEntry("", "billing-agent", []string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	if !apikey.WellFormed(k) || !strings.HasPrefix(e.ID, "key-") || strings.Contains(e.Hash, k) {
		t.Fatalf("key %q entry %+v", k, e)
	}
	doc, err := e.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(doc, []byte(k)) {
		t.Fatal("the file entry holds the key")
	}
	var f apikey.File
	if err := yaml.Unmarshal(doc, &f); err != nil {
		t.Fatal(err)
	}
	c := testclock.New(epoch)
	s, _ := open(t, c, string(doc))
	if got, err := s.Lookup(t.Context(), k, ""); err != nil || got.Subject != "billing-agent" {
		t.Fatalf("the new key: %+v, %v", got, err)
	}
	if _, _, err := apikey.NewEntry("x", "", nil); err == nil {
		t.Error("an entry without subject")
	}
}

func TestWellFormed(t *testing.T) {
	k := mustKey(t)
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"generated", k, true},
		{"no prefix", k[3:], false},
		{"short", k[:len(k)-1], false},
		{"long", k + "A", false},
		{"padding", k[:len(k)-1] + "=", false},
		{"non-canonical last character", k[:len(k)-1] + "B", k[len(k)-1] == 'B'}, // 'B' sets a padding bit unless it is the real one
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := apikey.WellFormed(tc.in); got != tc.want {
				t.Errorf("WellFormed = %v, want %v", got, tc.want)
			}
		})
	}
}

// cheapArgon is the argon2id hash field of secret at the lowest cost a
// file may ask for (8 KiB, one pass): for tests that run it thousands of
// times.
func cheapArgon(secret string) string {
	salt := []byte("0123456789abcdef")
	h := argon2.IDKey([]byte(secret), salt, 1, 8, 1, 32)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("argon2id:$argon2id$v=%d$m=8,t=1,p=1$%s$%s", argon2.Version, enc.EncodeToString(salt), enc.EncodeToString(h))
}

// TestWrongSecretFlood: a caller sending thousands of distinct wrong
// secrets for a known id does not evict a valid client's remembered match
// (which would put every valid client back on Argon2id, and behind the
// flood's verifications). A lookup with a context that is already done
// answers only from what is remembered: a remembered match passes, a
// forgotten one is ErrBusy.
func TestWrongSecretFlood(t *testing.T) {
	c := testclock.New(epoch)
	s, _ := open(t, c, fmt.Sprintf("keys:\n  - {id: alice, subject: alice, hash: %q}\n", cheapArgon("correct horse battery staple")))
	const valid = "alice.correct horse battery staple"
	if _, err := s.Lookup(t.Context(), valid, ""); err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 10_000 {
		if _, err := s.Lookup(t.Context(), fmt.Sprintf("alice.wrong-%d", i), ""); !errors.Is(err, apikey.ErrWrongSecret) {
			t.Fatalf("wrong secret %d: %v", i, err)
		}
	}
	if _, err := s.Lookup(done, valid, ""); err != nil {
		t.Errorf("after the flood the valid key needs Argon2id again: %v", err)
	}
	// The latest misses are remembered too: repeating one costs nothing.
	if _, err := s.Lookup(done, "alice.wrong-9999", ""); !errors.Is(err, apikey.ErrWrongSecret) {
		t.Errorf("a repeated wrong secret: %v, want ErrWrongSecret from memory", err)
	}
	if _, err := s.Lookup(done, "alice.never-tried", ""); !errors.Is(err, apikey.ErrBusy) {
		t.Errorf("a new secret with a done context: %v, want ErrBusy (the probe works)", err)
	}
}
