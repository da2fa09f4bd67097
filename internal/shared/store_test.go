package shared

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		config  Config
		wantErr string // substring; "" means valid
	}{
		{"standalone", Config{Addrs: []string{"127.0.0.1:6379"}}, ""},
		{"sentinel", Config{Addrs: []string{"a:26379", "b:26379"}, MasterName: "mymaster"}, ""},
		{"cluster", Config{Addrs: []string{"a:6379", "b:6379"}, Cluster: true}, ""},
		{"tls with key", Config{Addrs: []string{"a:6379"}, TLS: true, TLSServerName: "redis", EncryptionKey: testKey, DecryptionKeys: [][]byte{otherKey}}, ""},
		{"no address", Config{}, "at least one address"},
		{"address without port", Config{Addrs: []string{"redis"}}, "address \"redis\""},
		{"several addresses, no topology", Config{Addrs: []string{"a:1", "b:1"}}, "need cluster or master_name"},
		{"sentinel and cluster", Config{Addrs: []string{"a:1"}, MasterName: "m", Cluster: true}, "exclude each other"},
		{"cluster db", Config{Addrs: []string{"a:1"}, Cluster: true, DB: 2}, "database 0"},
		{"tls settings without tls", Config{Addrs: []string{"a:1"}, TLSCAFile: "ca.pem"}, "tls is off"},
		{"negative timeout", Config{Addrs: []string{"a:1"}, OpTimeout: -time.Second}, "must not be negative"},
		{"short key", Config{Addrs: []string{"a:1"}, EncryptionKey: []byte("short")}, "must be 32 bytes, not 5"},
		{"short old key", Config{Addrs: []string{"a:1"}, EncryptionKey: testKey, DecryptionKeys: [][]byte{{1}}}, "decryption key 0"},
		{"old keys alone", Config{Addrs: []string{"a:1"}, DecryptionKeys: [][]byte{otherKey}}, "without an encryption key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.config.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestConfigStringHidesSecrets(t *testing.T) {
	c := Config{Addrs: []string{"a:1"}, Password: "hunter2-password", EncryptionKey: []byte("0123456789abcdef0123456789abcdef")}
	for _, s := range []string{c.String(), fmt.Sprint(c)} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "0123456789abcdef") {
			t.Fatalf("secret in %q", s)
		}
	}
}

func TestNewTLSCAFile(t *testing.T) {
	_, err := New(t.Context(), Config{Addrs: []string{"127.0.0.1:1"}, TLS: true, TLSCAFile: "testdata/missing.pem"}, Options{})
	if err == nil {
		t.Fatal("New with a missing CA file succeeded")
	}
	_, err = New(t.Context(), Config{Addrs: []string{"127.0.0.1:1"}, TLS: true, TLSCAFile: "testdata/events.golden"}, Options{})
	if err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("New with a CA file without certificates: %v", err)
	}
}

func TestBindFirstWinsAcrossStores(t *testing.T) {
	r := sharedRedis(t)
	// Fifty binds at once: give each more than the hot path's 50ms, so that
	// a busy machine tests the race, not the timeout.
	patient := func(c *Config, _ *Options) { c.OpTimeout = 5 * time.Second }
	stores := []*Store{newStore(t, r.Addr, patient), newStore(t, r.Addr, patient)}
	const n = 50
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		owners = map[string]int{}
		owned  []string
	)
	for i := range n {
		wg.Go(func() {
			subject := fmt.Sprintf("user-%d", i)
			owner, ok, err := stores[i%2].Bind(t.Context(), "route\x00sess-race", subject, time.Minute, 0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("Bind(%s): %v", subject, err)
				return
			}
			owners[owner]++
			if ok {
				owned = append(owned, subject)
			}
		})
	}
	wg.Wait()
	if len(owned) != 1 {
		t.Fatalf("%d subjects own the session, want exactly 1: %v", len(owned), owned)
	}
	if len(owners) != 1 || owners[owned[0]] != n {
		t.Fatalf("Bind reported owners %v, want %q for all %d", owners, owned[0], n)
	}
}

func TestBindSteps(t *testing.T) {
	r := sharedRedis(t)
	var obs observed
	a := newStore(t, r.Addr, func(_ *Config, o *Options) { o.Observe = obs.observe })
	b := newStore(t, r.Addr, nil)
	const key = "files\x00sess-1"
	type step struct {
		name      string
		store     *Store
		subject   string
		wantOwner string
		wantOK    bool
	}
	steps := []step{
		{"first use binds", a, "alice", "alice", true},
		{"owner again, other replica", b, "alice", "alice", true},
		{"another user is refused", b, "mallory", "alice", false},
		{"empty subject owns nothing", a, "", "", false},
		{"still bound", a, "mallory", "alice", false},
	}
	for _, st := range steps {
		owner, ok, err := st.store.Bind(t.Context(), key, st.subject, time.Minute, 0)
		if err != nil || owner != st.wantOwner || ok != st.wantOK {
			t.Fatalf("%s: Bind = %q, %v, %v; want %q, %v", st.name, owner, ok, err, st.wantOwner, st.wantOK)
		}
	}
	// a ran: alice binds (ok), mallory refused (conflict).
	if got := obs.count(OpBind, ResultOK); got != 1 {
		t.Errorf("bind ok observed %d times, want 1", got)
	}
	if got := obs.count(OpBind, ResultConflict); got != 1 {
		t.Errorf("bind conflict observed %d times, want 1", got)
	}
}

func TestBindIdle(t *testing.T) {
	r := sharedRedis(t)
	s := newStore(t, r.Addr, nil)
	raw := rawClient(t, r.Addr)
	const key = "files\x00sess-idle"

	if _, ok, err := s.Bind(t.Context(), key, "alice", time.Minute, 0); !ok || err != nil {
		t.Fatalf("Bind = %v, %v", ok, err)
	}
	if _, ok, _ := s.Bind(t.Context(), key, "alice", time.Hour, 0); !ok {
		t.Fatal("owner refused")
	}
	if ttl := raw.PTTL(t.Context(), s.pBind+key).Val(); ttl <= time.Minute {
		t.Fatalf("owner's Bind did not extend the idle deadline: PTTL %v", ttl)
	}
	if _, _, _ = s.Bind(t.Context(), key, "mallory", time.Hour*2, 0); raw.PTTL(t.Context(), s.pBind+key).Val() > time.Hour {
		t.Fatal("a refused Bind extended the binding")
	}

	const short = "files\x00sess-short"
	if _, ok, _ := s.Bind(t.Context(), short, "alice", 200*time.Millisecond, 0); !ok {
		t.Fatal("Bind refused")
	}
	if _, ok, _ := s.Bind(t.Context(), short, "bob", 200*time.Millisecond, 0); ok {
		t.Fatal("bob took a live binding")
	}
	took := eventually(300, func() bool {
		_, ok, err := s.Bind(t.Context(), short, "bob", time.Minute, 0)
		return ok && err == nil
	})
	if !took {
		t.Fatal("an idle binding never expired")
	}
}

func TestTokensAreSealed(t *testing.T) {
	r := sharedRedis(t)
	var obs observed
	a := newStore(t, r.Addr, nil)
	b := newStore(t, r.Addr, func(c *Config, o *Options) { o.Observe = obs.observe })
	other := newStore(t, r.Addr, func(c *Config, _ *Options) { c.EncryptionKey = otherKey })
	rotated := newStore(t, r.Addr, func(c *Config, _ *Options) {
		c.EncryptionKey, c.DecryptionKeys = otherKey, [][]byte{testKey}
	})
	noKey := newStore(t, r.Addr, func(c *Config, _ *Options) { c.EncryptionKey = nil })
	raw := rawClient(t, r.Addr)

	token := []byte("eyJhbGciOiJSUzI1NiJ9.exchanged-token-secret.sig")
	const key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	if err := a.PutToken(t.Context(), key, Owner{Subject: "alice", Session: "s1"}, token, time.Minute); err != nil {
		t.Fatal(err)
	}

	stored, err := raw.Get(t.Context(), a.pToken+key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range [][]byte{token, []byte("exchanged-token-secret"), []byte("eyJhbGciOiJSUzI1NiJ9")} {
		if bytes.Contains(stored, part) {
			t.Fatalf("Redis holds %q in clear", part)
		}
	}
	if ttl := raw.PTTL(t.Context(), a.pToken+key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("PTTL = %v, want (0, 1m]", ttl)
	}

	tests := []struct {
		name   string
		store  *Store
		key    string
		want   []byte
		wantOK bool
	}{
		{"same key, other replica", b, key, token, true},
		{"rotated key still reads the old one", rotated, key, token, true},
		{"wrong key", other, key, nil, false},
		{"absent", b, "0000", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := tt.store.GetToken(t.Context(), tt.key)
			if err != nil || ok != tt.wantOK || !bytes.Equal(got, tt.want) {
				t.Fatalf("GetToken = %q, %v, %v; want %q, %v", got, ok, err, tt.want, tt.wantOK)
			}
		})
	}
	if obs.count(OpGetToken, ResultOK) != 1 || obs.count(OpGetToken, ResultMiss) != 1 {
		t.Errorf("observed %v", obs.m)
	}

	// A value moved to another key does not open there.
	if err := raw.Set(t.Context(), a.pToken+"moved", stored, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := b.GetToken(t.Context(), "moved"); ok || err != nil || got != nil {
		t.Fatalf("moved value: GetToken = %q, %v, %v", got, ok, err)
	}
	if obs.count(OpGetToken, ResultInvalid) != 1 {
		t.Errorf("a value that does not open was not counted invalid: %v", obs.m)
	}

	// The rotated store seals with its new key, which the old one lacks.
	if err := rotated.PutToken(t.Context(), "new", Owner{}, token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.GetToken(t.Context(), "new"); ok {
		t.Fatal("a store without the new key opened its value")
	}
	if _, ok, _ := other.GetToken(t.Context(), "new"); !ok {
		t.Fatal("the new key does not open its own value")
	}

	if err := noKey.PutToken(t.Context(), key, Owner{}, token, time.Minute); !errors.Is(err, ErrNoEncryptionKey) {
		t.Fatalf("PutToken without a key: %v", err)
	}
	if _, _, err := noKey.GetToken(t.Context(), key); !errors.Is(err, ErrNoEncryptionKey) {
		t.Fatalf("GetToken without a key: %v", err)
	}
}

func TestElicitations(t *testing.T) {
	r := sharedRedis(t)
	a := newStore(t, r.Addr, nil)
	b := newStore(t, r.Addr, nil)
	raw := rawClient(t, r.Addr)
	value := []byte(`{"id":"01J0ELICIT","url":"https://idp.example/authorize?state=01J0ELICIT","subject":"alice"}`)

	if err := a.PutElicitation(t.Context(), "01J0ELICIT", Owner{Subject: "alice", Session: "s1"}, value, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := raw.PTTL(t.Context(), a.pElicit+"01J0ELICIT").Val(); ttl <= 9*time.Minute {
		t.Fatalf("PTTL = %v, want about 10m", ttl)
	}
	got, ok, err := b.GetElicitation(t.Context(), "01J0ELICIT")
	if err != nil || !ok || !bytes.Equal(got, value) {
		t.Fatalf("GetElicitation = %q, %v, %v", got, ok, err)
	}
	if _, ok, err := b.GetElicitation(t.Context(), "unknown"); ok || err != nil {
		t.Fatalf("GetElicitation(unknown) = %v, %v", ok, err)
	}
	if err := b.DeleteElicitation(t.Context(), "01J0ELICIT"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := a.GetElicitation(t.Context(), "01J0ELICIT"); ok {
		t.Fatal("deleted elicitation still there")
	}
	if err := b.DeleteElicitation(t.Context(), "01J0ELICIT"); err != nil {
		t.Fatalf("deleting twice: %v", err)
	}

	short := []byte(`{"id":"short"}`)
	if err := a.PutElicitation(t.Context(), "short", Owner{Subject: "alice"}, short, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if !eventually(300, func() bool { _, ok, _ := b.GetElicitation(t.Context(), "short"); return !ok }) {
		t.Fatal("elicitation never expired")
	}
}

func TestDropAcrossStores(t *testing.T) {
	r := sharedRedis(t)
	a := newStore(t, r.Addr, nil)
	b := newStore(t, r.Addr, nil)
	ctx := t.Context()
	put := func(kind, id string, o Owner) {
		t.Helper()
		var err error
		if kind == "token" {
			err = a.PutToken(ctx, id, o, []byte("tok-"+id), time.Minute)
		} else {
			err = a.PutElicitation(ctx, id, o, []byte(`{}`), time.Minute)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	put("token", "t-alice-s1", Owner{Subject: "alice", Session: "s1"})
	put("elicit", "e-alice-s1", Owner{Subject: "alice", Session: "s1"})
	put("token", "t-alice-s2", Owner{Subject: "alice", Session: "s2"})
	put("token", "t-alice", Owner{Subject: "alice", Session: ""})
	put("token", "t-bob-s3", Owner{Subject: "bob", Session: "s3"})
	put("elicit", "e-bob", Owner{Subject: "bob", Session: ""})
	put("token", "t-carol-s4", Owner{Subject: "carol", Session: "s4", TokenSession: "login-1"})
	put("token", "t-carol", Owner{Subject: "carol", TokenSession: "login-2"})

	present := func(kind, id string) bool {
		t.Helper()
		var ok bool
		var err error
		if kind == "token" {
			_, ok, err = b.GetToken(ctx, id)
		} else {
			_, ok, err = b.GetElicitation(ctx, id)
		}
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	steps := []struct {
		name    string
		drop    func() (int, error)
		want    int
		gone    [][2]string
		staying [][2]string
	}{
		{
			"session s1", func() (int, error) { return b.DropSession(ctx, "s1") }, 2,
			[][2]string{{"token", "t-alice-s1"}, {"elicit", "e-alice-s1"}},
			[][2]string{{"token", "t-alice-s2"}, {"token", "t-alice"}, {"token", "t-bob-s3"}},
		},
		{
			"session s1 again", func() (int, error) { return b.DropSession(ctx, "s1") }, 0,
			nil, [][2]string{{"token", "t-alice-s2"}},
		},
		{
			"bob's own in alice's session s2", func() (int, error) { return b.DropOwnSession(ctx, "bob", "s2") }, 0,
			nil, [][2]string{{"token", "t-alice-s2"}, {"token", "t-alice"}},
		},
		{
			"alice's own of no session", func() (int, error) { return b.DropOwnSession(ctx, "alice", "") }, 1,
			[][2]string{{"token", "t-alice"}}, [][2]string{{"token", "t-alice-s2"}, {"token", "t-bob-s3"}},
		},
		{
			"subject alice", func() (int, error) { return b.DropSubject(ctx, "alice") }, 1,
			[][2]string{{"token", "t-alice-s2"}, {"token", "t-alice"}},
			[][2]string{{"token", "t-bob-s3"}, {"elicit", "e-bob"}},
		},
		{
			"unknown session", func() (int, error) { return b.DropSession(ctx, "nope") }, 0,
			nil, [][2]string{{"token", "t-bob-s3"}},
		},
		{
			"token session login-1, in MCP session s4", func() (int, error) { return b.DropSession(ctx, "login-1") }, 1,
			[][2]string{{"token", "t-carol-s4"}}, [][2]string{{"token", "t-carol"}},
		},
		{
			"token session login-2, no MCP session", func() (int, error) { return a.DropSession(ctx, "login-2") }, 1,
			[][2]string{{"token", "t-carol"}}, [][2]string{{"token", "t-bob-s3"}},
		},
		{
			"subject bob", func() (int, error) { return a.DropSubject(ctx, "bob") }, 2,
			[][2]string{{"token", "t-bob-s3"}, {"elicit", "e-bob"}}, nil,
		},
	}
	for _, st := range steps {
		n, err := st.drop()
		if err != nil || n != st.want {
			t.Fatalf("%s: dropped %d, %v; want %d", st.name, n, err, st.want)
		}
		for _, g := range st.gone {
			if present(g[0], g[1]) {
				t.Errorf("%s: %s %s still there", st.name, g[0], g[1])
			}
		}
		for _, s := range st.staying {
			if !present(s[0], s[1]) {
				t.Errorf("%s: %s %s dropped", st.name, s[0], s[1])
			}
		}
	}
}

func TestDropLargeIndex(t *testing.T) {
	r := sharedRedis(t)
	// A roomy OpTimeout: a thousand puts and deletes under -race on a
	// busy machine are not what this test measures.
	s := newStore(t, r.Addr, func(c *Config, _ *Options) { c.OpTimeout = 5 * time.Second })
	const n = dropBatch + 7 // more than one batch
	for i := range n {
		if err := s.PutElicitation(t.Context(), fmt.Sprint("e", i), Owner{Session: "big"}, []byte("{}"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.DropSession(t.Context(), "big")
	if err != nil {
		t.Fatal(err)
	}
	if got != n {
		t.Fatalf("dropped %d, want %d", got, n)
	}
}

func TestTagIndexPrunesExpiredKeys(t *testing.T) {
	r := sharedRedis(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := newStore(t, r.Addr, func(_ *Config, o *Options) { o.Now = func() time.Time { return now } })
	raw := rawClient(t, r.Addr)
	tag := s.pSubject + "alice"

	steps := []struct {
		name     string
		advance  time.Duration
		id       string
		ttl      time.Duration
		wantSize int64
		wantTTL  time.Duration // lower bound of the index's PTTL
	}{
		{"first", 0, "e1", time.Minute, 1, 50 * time.Second},
		{"longer-lived keeps the index longer", 0, "e2", time.Hour, 2, 59 * time.Minute},
		{"shorter-lived does not shorten it", 0, "e3", time.Second, 3, 59 * time.Minute},
		{"expired members are pruned on the next add", 2 * time.Minute, "e4", time.Minute, 2, 50 * time.Minute},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		if err := s.PutElicitation(t.Context(), st.id, Owner{Subject: "alice"}, []byte("{}"), st.ttl); err != nil {
			t.Fatal(err)
		}
		if got := raw.ZCard(t.Context(), tag).Val(); got != st.wantSize {
			t.Errorf("%s: index holds %d keys, want %d", st.name, got, st.wantSize)
		}
		if got := raw.PTTL(t.Context(), tag).Val(); got < st.wantTTL {
			t.Errorf("%s: index PTTL %v, want at least %v", st.name, got, st.wantTTL)
		}
	}
}

// TestRevocations: a revocation of a subject is kept for as long as it may
// match a credential, however old: the set has no expiry, and Revocations
// reads every member. A later revocation replaces an earlier one, never
// the other way round. Only beyond maxRevocations does Revoke drop the
// members made more than the caller's keep ago, and none with keep 0.
func TestRevocations(t *testing.T) {
	r := sharedRedis(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := newStore(t, r.Addr, func(_ *Config, o *Options) { o.Now = clock })
	b := newStore(t, r.Addr, func(_ *Config, o *Options) { o.Now = clock })
	raw := rawClient(t, r.Addr)

	// An earlier version wrote the set with an expiry: the next Revoke
	// removes it.
	raw.ZAdd(t.Context(), a.revokeKey, redis.Z{Score: float64(now.Add(-48 * time.Hour).UnixMilli()), Member: "dave"})
	raw.PExpire(t.Context(), a.revokeKey, 24*time.Hour)
	t1 := now.Add(-time.Hour)
	for _, rv := range []struct {
		subject string
		at      time.Time
	}{
		{"alice", t1},
		{"alice", t1.Add(-time.Minute)}, // older: does not replace
		{"bob", now},
		{"carol", now.Add(-72 * time.Hour)}, // old, and kept
	} {
		if err := a.Revoke(t.Context(), rv.subject, rv.at, 24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if ttl := raw.PTTL(t.Context(), a.revokeKey).Val(); ttl != -1 {
		t.Errorf("revocations key PTTL %v, want none (-1)", ttl)
	}
	want := map[string]time.Time{"alice": t1, "bob": now, "carol": now.Add(-72 * time.Hour), "dave": now.Add(-48 * time.Hour)}
	check := func(when string, want map[string]time.Time) {
		t.Helper()
		got, err := b.Revocations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: Revocations = %v, want %v", when, got, want)
		}
		for s, at := range want {
			if !got[s].Equal(at) {
				t.Errorf("%s: Revocations[%s] = %v, want %v", when, s, got[s], at)
			}
		}
	}
	check("below the bound", want)
	now = now.Add(30 * 24 * time.Hour)
	check("a month later", want)

	defer func(n int) { maxRevocations = n }(maxRevocations)
	maxRevocations = 4
	for _, tt := range []struct {
		name    string
		subject string
		keep    time.Duration
		want    []string
	}{
		{"beyond the bound, keep forever", "erin", 0, []string{"alice", "bob", "carol", "dave", "erin"}},
		{"beyond the bound, keep 30 days and an hour", "frank", 30*24*time.Hour + time.Hour, []string{"alice", "bob", "erin", "frank"}},
	} {
		if err := a.Revoke(t.Context(), tt.subject, now, tt.keep); err != nil {
			t.Fatal(err)
		}
		got, err := b.Revocations(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, tt.want) {
			t.Errorf("%s: held %v, want %v", tt.name, names, tt.want)
		}
	}
}

func TestAPIKeyRevocations(t *testing.T) {
	r := sharedRedis(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := newStore(t, r.Addr, func(_ *Config, o *Options) { o.Now = clock })
	b := newStore(t, r.Addr, func(_ *Config, o *Options) { o.Now = clock })
	raw := rawClient(t, r.Addr)

	k1 := APIKey{Issuer: "keys", ID: "k1"}
	k2 := APIKey{Issuer: "team/keys", ID: "k2"} // a '/' in the issuer is fine
	k3 := APIKey{Issuer: "keys", ID: "k3"}
	k4 := APIKey{Issuer: "keys", ID: "k4"}
	revoke := []struct {
		key   APIKey
		until time.Time
	}{
		{k1, now.Add(2 * time.Hour)},
		{k1, now.Add(time.Hour)}, // earlier: does not replace
		{k2, now.Add(time.Hour)},
		{k3, now.Add(-time.Minute)},             // already ended
		{k4, now.Add(10 * maxKeyRevocationTTL)}, // capped
	}
	for _, rv := range revoke {
		if err := a.RevokeAPIKey(t.Context(), rv.key, rv.until); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.APIKeyRevocations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := map[APIKey]time.Time{k1: now.Add(2 * time.Hour), k2: now.Add(time.Hour), k4: now.Add(maxKeyRevocationTTL)}
	if len(got) != len(want) {
		t.Fatalf("APIKeyRevocations = %v, want %v", got, want)
	}
	for k, until := range want {
		if !got[k].Equal(until) {
			t.Errorf("APIKeyRevocations[%s] = %v, want %v", k, got[k], until)
		}
	}
	if ttl := raw.PTTL(t.Context(), a.revokeKeysKey).Val(); ttl <= maxKeyRevocationTTL-time.Minute {
		t.Errorf("key revocations PTTL %v, want about %v", ttl, maxKeyRevocationTTL)
	}

	now = now.Add(90 * time.Minute)
	got, err = b.APIKeyRevocations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[k2]; ok || len(got) != 2 {
		t.Fatalf("APIKeyRevocations after k2 ended = %v, want k1 and k4", got)
	}
}

func TestParseAPIKey(t *testing.T) {
	tests := []struct {
		in     string
		want   APIKey
		wantOK bool
	}{
		{"keys/k1", APIKey{"keys", "k1"}, true},
		{"a/b/k1", APIKey{"a/b", "k1"}, true},
		{"k1", APIKey{}, false},
		{"/k1", APIKey{}, false},
		{"keys/", APIKey{}, false},
		{"", APIKey{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := ParseAPIKey(tt.in)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("ParseAPIKey(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// lockedBuffer is a log destination the client library's goroutines may
// write to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRouteClientLogs(t *testing.T) {
	var out lockedBuffer
	RouteClientLogs(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer redis.SetLogger(quietLogger{})
	// Nothing listens: the client library logs its failed dials.
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil)
	_, _, _ = s.Bind(t.Context(), "k", "alice", time.Minute, 0)
	routed := eventually(300, func() bool {
		return strings.Contains(out.String(), "component=redis-client") && strings.Contains(out.String(), "failed to dial")
	})
	if !routed {
		t.Fatalf("no client library message routed; got %q", out.String())
	}
}

// TestBindPerSubjectBound: across two replicas, a subject's bindings are
// bounded, a new one pushes out only the subject's own least recently used
// binding, and another subject's binding is never touched.
func TestBindPerSubjectBound(t *testing.T) {
	r := sharedRedis(t)
	a := newStore(t, r.Addr, nil)
	b := newStore(t, r.Addr, nil)
	ctx := t.Context()
	const bound = 3
	bind := func(s *Store, key, sub string) (string, bool) {
		t.Helper()
		owner, ok, err := s.Bind(ctx, key, sub, time.Minute, bound)
		if err != nil {
			t.Fatal(err)
		}
		return owner, ok
	}
	if _, ok := bind(a, "r\x00victim", "alice"); !ok {
		t.Fatal("alice could not bind")
	}
	for i := range 20 {
		s := []*Store{a, b}[i%2]
		if _, ok := bind(s, fmt.Sprint("r\x00m-", i), "mallory"); !ok {
			t.Fatalf("mallory's own session %d refused", i)
		}
	}
	if n, err := a.countBindings(ctx, "mallory"); err != nil || n != bound {
		t.Fatalf("mallory holds %d bindings (%v), want %d", n, err, bound)
	}
	for _, s := range []*Store{a, b} {
		if owner, ok := bind(s, "r\x00victim", "mallory"); ok || owner != "alice" {
			t.Fatalf("victim's session: owner %q, mallory owns %v", owner, ok)
		}
	}
	// The oldest of mallory's sessions went; the newest stay hers.
	if owner, _ := bind(b, "r\x00m-19", "bob"); owner != "mallory" {
		t.Fatalf("mallory's newest session owned by %q", owner)
	}
	if owner, ok := bind(b, "r\x00m-0", "bob"); !ok || owner != "bob" {
		t.Fatalf("mallory's oldest session: owner %q (pushed out by her own bound, so free)", owner)
	}
	if n, _ := a.countBindings(ctx, "alice"); n != 1 {
		t.Fatalf("alice holds %d bindings, want 1", n)
	}
}

// TestBindTaskTool: the tool a task was created for is recorded with its
// binding, once, by its owner only, and every replica's later Bind and
// Lookup return it; the binding is still the owner's to be refused to
// others, kept alive and pushed out by the owner's own bound.
func TestBindTaskTool(t *testing.T) {
	r := sharedRedis(t)
	// Each reading of the clock is a millisecond later, so that no two
	// bindings share an index score.
	base, ticks := time.Now(), new(atomic.Int64)
	clock := func(_ *Config, o *Options) {
		o.Now = func() time.Time { return base.Add(time.Duration(ticks.Add(1)) * time.Millisecond) }
	}
	a := newStore(t, r.Addr, clock)
	b := newStore(t, r.Addr, clock)
	ctx := t.Context()
	const key, seen = "files\x00task\x00T-del", "files\x00task\x00T-seen"
	const bound = 2
	bind := func(s *Store, key, sub, tool string) (Binding, bool) {
		t.Helper()
		got, ok, err := s.BindTask(ctx, key, sub, tool, time.Minute, bound)
		if err != nil {
			t.Fatal(err)
		}
		return got, ok
	}
	if got, ok := bind(a, key, "alice", "delete_file"); !ok || got != (Binding{"alice", "delete_file"}) {
		t.Fatalf("created: %+v, %v", got, ok)
	}
	steps := []struct {
		name      string
		s         *Store
		sub, tool string
		want      Binding
		owned     bool
	}{
		{"the owner's plain Bind on another replica learns the tool", b, "alice", "", Binding{"alice", "delete_file"}, true},
		{"a second creation keeps the first tool", b, "alice", "read_file", Binding{"alice", "delete_file"}, true},
		{"another user is refused and records nothing", b, "mallory", "read_file", Binding{"alice", "delete_file"}, false},
	}
	for _, st := range steps {
		if got, ok := bind(st.s, key, st.sub, st.tool); ok != st.owned || got != st.want {
			t.Fatalf("%s: %+v, %v; want %+v, %v", st.name, got, ok, st.want, st.owned)
		}
	}
	if owner, ok, err := a.Bind(ctx, key, "alice", time.Minute, bound); !ok || err != nil || owner != "alice" {
		t.Fatalf("Bind: owner %q, %v, %v", owner, ok, err)
	}
	if got, found, err := b.Lookup(ctx, key); !found || err != nil || got != (Binding{"alice", "delete_file"}) {
		t.Fatalf("Lookup: %+v, %v, %v", got, found, err)
	}
	if owner, found, _ := b.BindingOwner(ctx, key); !found || owner != "alice" {
		t.Fatalf("BindingOwner: %q, %v", owner, found)
	}
	// Bound on first sight, then reported created: the tool is learnt.
	if got, ok := bind(a, seen, "alice", ""); !ok || got.Tool != "" {
		t.Fatalf("first sight: %+v, %v", got, ok)
	}
	if got, _ := bind(b, seen, "alice", "rm"); got.Tool != "rm" {
		t.Fatalf("creation after first sight: %+v", got)
	}
	// The owner's bound pushes out a binding with a tool like any other.
	for i := range bound {
		bind(a, fmt.Sprint("files\x00task\x00T-", i), "alice", "read_file")
	}
	if _, found, _ := a.Lookup(ctx, key); found {
		t.Fatal("the owner's bound did not push out the oldest binding, which has a tool")
	}
}

// countBindings is the number of live bindings subject holds across every
// replica.
func (s *Store) countBindings(ctx context.Context, subject string) (int, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	n, err := s.rdb.ZCount(ctx, s.pBindSubject+subject, strconv.FormatInt(s.now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, s.fail(OpBind, err)
	}
	return int(n), nil
}

// TestDeleteToken: a deleted token is gone for every replica; deleting
// one that is not there is no error.
func TestDeleteToken(t *testing.T) {
	r := sharedRedis(t)
	a, b := newStore(t, r.Addr, nil), newStore(t, r.Addr, nil)
	ctx := t.Context()
	if err := a.PutToken(ctx, "k-delete", Owner{Subject: "alice", Session: "s1"}, []byte("tok"), time.Minute); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, key string }{
		{"a stored token", "k-delete"},
		{"a token not there", "k-never"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := b.DeleteToken(ctx, c.key); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := a.GetToken(ctx, c.key); ok || err != nil {
				t.Fatalf("after DeleteToken: found %v, %v", ok, err)
			}
		})
	}
}
