package elicit_test

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/testing/testclock"
)

type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Unix(1_800_000_000, 0)) }

const issuer = "idp"

const authorize = "https://auth.example/oauth/authorize?client_id=gw&redirect_uri=https%3A%2F%2Fgw.example%2Fcb&scope=files.read+files.write"

func begin(t *testing.T, s *elicit.Store, subject, session, key string) elicit.Pending {
	t.Helper()
	p, err := s.Begin(issuer, subject, session, key, authorize)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBegin(t *testing.T) {
	c := newClock()
	s := elicit.New(10, 10*time.Minute, c.Now)
	p := begin(t, s, "alice", "mcp-1", "files")

	if len(p.ID) < 26 || p.Subject != "alice" || p.Session != "mcp-1" || p.Key != "files" || !p.Expires.Equal(c.Now().Add(10*time.Minute)) {
		t.Errorf("Pending = %+v", p)
	}
	if id, _, _ := strings.Cut(p.State, "."); p.Issuer != issuer || id != p.ID {
		t.Errorf("Pending = %+v", p)
	}
	want := authorize + "&state=" + p.State
	if p.URL != want {
		t.Errorf("URL = %s, want %s", p.URL, want)
	}

	tests := []struct {
		name                  string
		subject, session, key string
		same                  bool
	}{
		{"same user, session and key", "alice", "mcp-1", "files", true},
		{"another session", "alice", "mcp-2", "files", false},
		{"another key", "alice", "mcp-1", "calendar", false},
		{"another user", "bob", "mcp-1", "files", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := begin(t, s, tc.subject, tc.session, tc.key)
			if (q.ID == p.ID) != tc.same {
				t.Errorf("same elicitation = %v, want %v", q.ID == p.ID, tc.same)
			}
		})
	}
	if s.Len() != 4 {
		t.Errorf("Len = %d, want 4", s.Len())
	}
}

func TestBeginRenewsWhenHalfExpired(t *testing.T) {
	c := newClock()
	s := elicit.New(10, 10*time.Minute, c.Now)
	p := begin(t, s, "alice", "mcp-1", "files")
	c.Advance(5 * time.Minute)
	if q := begin(t, s, "alice", "mcp-1", "files"); q.ID != p.ID {
		t.Fatal("replaced with half its time left")
	}
	c.Advance(time.Second)
	q := begin(t, s, "alice", "mcp-1", "files")
	if q.ID == p.ID {
		t.Fatal("not replaced with less than half its time left")
	}
	if _, ok := s.Get(p.ID); ok || s.Len() != 1 {
		t.Errorf("the replaced one is still pending (Len %d)", s.Len())
	}
}

func TestBeginRejects(t *testing.T) {
	s := elicit.New(10, time.Minute, nil)
	tests := []struct {
		name, subject, url string
		want               error
	}{
		{"no subject", "", authorize, elicit.ErrNoSubject},
		{"relative URL", "alice", "/authorize", elicit.ErrAuthorizeURL},
		{"javascript URL", "alice", "javascript:alert(1)", elicit.ErrAuthorizeURL},
		{"no host", "alice", "https:///authorize", elicit.ErrAuthorizeURL},
		{"unparsable", "alice", "https://auth.example/%zz", elicit.ErrAuthorizeURL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Begin(issuer, tc.subject, "s", "k", tc.url); !errors.Is(err, tc.want) {
				t.Errorf("Begin error = %v, want %v", err, tc.want)
			}
		})
	}
	if s.Len() != 0 {
		t.Errorf("Len = %d after failures", s.Len())
	}
}

func TestComplete(t *testing.T) {
	c := newClock()
	s := elicit.New(10, time.Minute, c.Now)
	p := begin(t, s, "alice", "mcp-1", "files")
	bob := begin(t, s, "bob", "mcp-2", "files")
	tests := []struct {
		name, id, state string
		want            error
	}{
		{"unknown id", "nope", p.State, elicit.ErrNotPending},
		{"no state", p.ID, "", elicit.ErrStateMissing},
		{"the id as the state", p.ID, p.ID, elicit.ErrStateInvalid},
		{"another user's state", p.ID, bob.State, elicit.ErrStateInvalid},
		{"another user's signature under this id", p.ID, p.ID + bob.State[len(bob.ID):], elicit.ErrStateInvalid},
		{"a later expiry", p.ID, p.ID + ".99999999999." + strings.SplitN(p.State, ".", 3)[2], elicit.ErrStateInvalid},
		{"a truncated signature", p.ID, p.State[:len(p.State)-1], elicit.ErrStateInvalid},
		{"the user's state", p.ID, p.State, nil},
		{"already completed", p.ID, p.State, elicit.ErrNotPending},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Complete(tc.id, tc.state)
			if !errors.Is(err, tc.want) || (err == nil && got != p) {
				t.Errorf("Complete = %+v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, ok := s.Get(bob.ID); !ok {
		t.Error("refused completions ended bob's elicitation")
	}
}

// TestStateBindsTheIssuer: the same subject from another issuer is another
// user, and a state signed with another key verifies nowhere.
func TestStateBindsTheIssuer(t *testing.T) {
	c := newClock()
	s := elicit.New(10, time.Minute, c.Now)
	if err := s.SetStateKey([]byte("0123456789abcdef0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	p := begin(t, s, "alice", "mcp-1", "files")
	other := p
	other.Issuer = "another-idp"
	if err := s.VerifyState(other, p.State); !errors.Is(err, elicit.ErrStateInvalid) {
		t.Errorf("another issuer's alice: %v", err)
	}
	if err := s.VerifyState(p, p.State); err != nil {
		t.Errorf("the state it issued: %v", err)
	}
	replica := elicit.New(10, time.Minute, c.Now)
	if err := replica.VerifyState(p, p.State); !errors.Is(err, elicit.ErrStateInvalid) {
		t.Errorf("a replica with another key accepted it: %v", err)
	}
	if err := replica.SetStateKey([]byte("0123456789abcdef0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	if err := replica.VerifyState(p, p.State); err != nil {
		t.Errorf("a replica with the same key: %v", err)
	}
	if err := replica.SetStateKey([]byte("short")); !errors.Is(err, elicit.ErrStateKey) {
		t.Errorf("short key: %v", err)
	}
	c.Advance(time.Minute)
	if err := replica.VerifyState(p, p.State); !errors.Is(err, elicit.ErrStateExpired) {
		t.Errorf("after its expiry: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	c := newClock()
	s := elicit.New(10, time.Minute, c.Now)
	p := begin(t, s, "alice", "mcp-1", "files")
	c.Advance(59 * time.Second)
	if _, ok := s.Get(p.ID); !ok {
		t.Fatal("gone before its time")
	}
	c.Advance(time.Second)
	if _, ok := s.Get(p.ID); ok {
		t.Error("Get found an expired elicitation")
	}
	if _, err := s.Complete(p.ID, p.State); !errors.Is(err, elicit.ErrNotPending) {
		t.Errorf("Complete of an expired elicitation: %v", err)
	}
	if s.Len() != 0 {
		t.Errorf("Len = %d", s.Len())
	}
}

// TestBound: the store holds at most its size, and each user at most
// PerSubject; a user's new elicitation beyond either replaces only that
// user's own oldest, and a store full of other users' refuses a user with
// none (ErrFull, with the time until the oldest expires) instead of
// dropping someone else's.
func TestBound(t *testing.T) {
	type step struct {
		user string
		wait time.Duration // before the step
	}
	tests := []struct {
		name  string
		steps []step
		// refused are the steps Begin refuses with ErrFull; pending those
		// still pending at the end.
		refused, pending []int
	}{
		{"a user beyond PerSubject replaces their own oldest",
			[]step{{"alice", 0}, {"alice", time.Second}, {"alice", time.Second}, {"bob", time.Second}},
			nil, []int{1, 2, 3}},
		{"a full store refuses a user with none",
			[]step{{"alice", 0}, {"bob", time.Second}, {"bob", time.Second}, {"carol", time.Second}, {"mallory", time.Second}},
			[]int{4}, []int{0, 1, 2, 3}},
		{"a full store replaces the user's own oldest",
			[]step{{"alice", 0}, {"bob", time.Second}, {"bob", time.Second}, {"carol", time.Second}, {"bob", time.Second}},
			nil, []int{0, 2, 3, 4}},
		{"an expired one makes room",
			[]step{{"alice", 0}, {"bob", time.Second}, {"bob", time.Second}, {"carol", time.Second}, {"mallory", time.Hour}},
			nil, []int{4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			s := elicit.New(4, time.Hour, c.Now)
			s.SetPerSubject(2)
			ids := make([]string, len(tc.steps))
			for i, st := range tc.steps {
				c.Advance(st.wait)
				p, err := s.Begin(issuer, st.user, "", fmt.Sprint("k", i), authorize)
				var full *elicit.FullError
				switch refused := slices.Contains(tc.refused, i); {
				case refused && (!errors.Is(err, elicit.ErrFull) || !errors.As(err, &full)):
					t.Fatalf("step %d (%s): %v, want ErrFull", i, st.user, err)
				case refused && (full.RetryAfter <= 0 || full.RetryAfter > time.Hour):
					t.Errorf("step %d: retry after %v, want until the oldest expires", i, full.RetryAfter)
				case !refused && err != nil:
					t.Fatalf("step %d (%s): %v", i, st.user, err)
				}
				ids[i] = p.ID
			}
			for i, id := range ids {
				if id == "" {
					continue
				}
				if _, ok := s.Get(id); ok != slices.Contains(tc.pending, i) {
					t.Errorf("step %d's elicitation pending = %v, want %v", i, ok, !ok)
				}
			}
			if s.Len() > 4 {
				t.Errorf("Len = %d, want at most 4", s.Len())
			}
		})
	}
}

func TestDrop(t *testing.T) {
	s := elicit.New(10, time.Hour, nil)
	begin(t, s, "alice", "mcp-1", "files")
	begin(t, s, "alice", "mcp-1", "calendar")
	begin(t, s, "alice", "mcp-2", "files")
	begin(t, s, "alice", "", "files")
	bob := begin(t, s, "bob", "mcp-3", "files")
	begin(t, s, "bob", "mcp-1", "files") // the same id, another user's
	if n := s.DropOwnSession("alice", ""); n != 0 {
		t.Errorf(`DropOwnSession(alice, "") = %d`, n)
	}
	if n := s.DropOwnSession("bob", "mcp-1"); n != 1 {
		t.Errorf("DropOwnSession(bob, mcp-1) = %d, want only bob's", n)
	}
	if n := s.DropSession(""); n != 0 {
		t.Errorf(`DropSession("") = %d`, n)
	}
	if n := s.DropSession("mcp-1"); n != 2 {
		t.Errorf("DropSession(mcp-1) = %d, want 2", n)
	}
	if n := s.DropSubject("alice"); n != 2 {
		t.Errorf("DropSubject(alice) = %d, want 2", n)
	}
	if n := s.DropSubject(""); n != 0 {
		t.Errorf(`DropSubject("") = %d`, n)
	}
	if _, ok := s.Get(bob.ID); !ok || s.Len() != 1 {
		t.Errorf("bob's elicitation dropped, Len = %d", s.Len())
	}
}

func TestWithState(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"no query", "https://auth.example/authorize", "https://auth.example/authorize?state=ID"},
		{"empty query", "https://auth.example/authorize?", "https://auth.example/authorize?state=ID"},
		{"query kept as written", "https://auth.example/a?b=%2F&a=1+2&flag", "https://auth.example/a?b=%2F&a=1+2&flag&state=ID"},
		{"state replaced", "https://auth.example/a?state=old&x=1&st%61te=older", "https://auth.example/a?x=1&state=ID"},
		{"fragment kept", "https://auth.example/a?x=1#frag", "https://auth.example/a?x=1&state=ID#frag"},
		{"http with port", "http://127.0.0.1:8080/a", "http://127.0.0.1:8080/a?state=ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := elicit.WithState(tc.in, "ID")
			if err != nil || got != tc.want {
				t.Errorf("WithState(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
	got, err := elicit.WithState("https://auth.example/a", "a b&c")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(got)
	if u.Query().Get("state") != "a b&c" || strings.Count(got, "state=") != 1 {
		t.Errorf("escaped state: %s", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := elicit.New(50, time.Hour, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				user := string(rune('a' + g))
				p, err := s.Begin(issuer, user, "s", string(rune('0'+i%10)), authorize)
				if errors.Is(err, elicit.ErrFull) {
					continue // 8 users × 10 keys do not fit in 50: a user with none is refused
				}
				if err != nil {
					t.Error(err)
					return
				}
				s.Get(p.ID)
				if i%7 == 0 {
					_, _ = s.Complete(p.ID, p.State)
				}
				if i%50 == 0 {
					s.DropSubject(user)
				}
			}
		}()
	}
	wg.Wait()
	if s.Len() > 50 {
		t.Errorf("Len = %d beyond the bound", s.Len())
	}
}

// TestBeginReplacing: Begin reports the user's own pending elicitations it
// dropped for room, and nothing else: not a renewal's, not another user's.
func TestBeginReplacing(t *testing.T) {
	c := newClock()
	s := elicit.New(3, 10*time.Minute, c.Now)
	s.SetPerSubject(2)
	a0 := begin(t, s, "alice", "", "k0")
	b0 := begin(t, s, "bob", "", "k0")
	steps := []struct {
		name     string
		user     string
		key      string
		advance  time.Duration
		replaced []string
	}{
		{"room for alice's second", "alice", "k1", 0, nil},
		{"alice beyond the bound: her oldest", "alice", "k2", 0, []string{a0.ID}},
		{"bob's second in a full store: his own oldest", "bob", "k1", 0, []string{b0.ID}},
		{"a renewal is not reported", "alice", "k2", 6 * time.Minute, nil},
	}
	for _, st := range steps {
		c.Advance(st.advance)
		_, replaced, err := s.BeginReplacing(issuer, st.user, "", st.key, authorize)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !slices.Equal(replaced, st.replaced) {
			t.Errorf("%s: replaced %v, want %v", st.name, replaced, st.replaced)
		}
	}
}
