package session

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is a settable time source.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: t0} }
func mustBind(t *testing.T, s *Store, k, sub string, want Result) {
	t.Helper()
	if _, r := s.Bind(k, sub, nil); r != want {
		t.Fatalf("Bind(%q, %q) = %v, want %v", k, sub, r, want)
	}
}

func TestBind(t *testing.T) {
	c := newClock()
	s := New(10, 0, time.Minute, c.now)
	k := Key("files", "sess-1")
	steps := []struct {
		name      string
		advance   time.Duration
		subject   string
		wantOwner string
		want      Result
	}{
		{"first use binds", 0, "alice", "alice", Created},
		{"owner again", 30 * time.Second, "alice", "alice", Owned},
		{"another user is refused", 0, "mallory", "alice", Conflict},
		{"use extended the idle deadline", 50 * time.Second, "mallory", "alice", Conflict},
		{"a second before the deadline it still holds", 9 * time.Second, "mallory", "alice", Conflict},
		{"expired binding is taken over", 61 * time.Second, "bob", "bob", Created},
	}
	for _, st := range steps {
		c.advance(st.advance)
		owner, r := s.Bind(k, st.subject, nil)
		if owner != st.wantOwner || r != st.want {
			t.Fatalf("%s: Bind = %q, %v; want %q, %v", st.name, owner, r, st.wantOwner, st.want)
		}
	}
	if _, ok := s.Lookup(Key("other-route", "sess-1")); ok {
		t.Fatal("binding leaked to another route")
	}
}

// TestNoEvictionOfOthers is threat model class 6: whatever an attacker
// does with sessions of their own, the victim's binding stays.
func TestNoEvictionOfOthers(t *testing.T) {
	victim := Key("r", "victim-session")
	tests := []struct {
		name       string
		size, per  int
		attackers  []string
		sessions   int // per attacker
		wantFullAt int // the first attacker session refused (0: none)
	}{
		{"one attacker floods a small store", 10, 0, []string{"mallory"}, 100, 10},
		{"one attacker is held to its own bound", 10, 3, []string{"mallory"}, 100, 0},
		{"many attackers fill the store", 10, 3, []string{"m1", "m2", "m3", "m4"}, 5, 4},
		{"store of one", 1, 0, []string{"mallory"}, 3, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			s := New(tc.size, tc.per, time.Hour, c.now)
			mustBind(t, s, victim, "alice", Created)
			full := 0
			for i := range tc.sessions {
				for _, a := range tc.attackers {
					c.advance(time.Millisecond)
					if _, r := s.Bind(Key("r", fmt.Sprint(a, i)), a, nil); r == Full && full == 0 {
						full = i + 1
					}
				}
			}
			if tc.wantFullAt != 0 && full == 0 {
				t.Fatalf("the store never refused a session (len %d)", s.Len())
			}
			if tc.wantFullAt == 0 && full != 0 {
				t.Fatalf("refused at %d, want no refusal (own eviction)", full)
			}
			mustBind(t, s, victim, "mallory", Conflict)
			if s.Len() > tc.size {
				t.Fatalf("store holds %d > %d", s.Len(), tc.size)
			}
			if tc.per > 0 {
				for _, a := range tc.attackers {
					if n := s.countSubject(a); n > tc.per {
						t.Fatalf("%s holds %d > %d", a, n, tc.per)
					}
				}
			}
		})
	}
}

func TestOwnEviction(t *testing.T) {
	c := newClock()
	s := New(100, 2, time.Hour, c.now)
	mustBind(t, s, "a1", "alice", Created)
	c.advance(time.Second)
	mustBind(t, s, "a2", "alice", Created)
	c.advance(time.Second)
	mustBind(t, s, "a1", "alice", Owned) // a2 is now the least recently used
	c.advance(time.Second)
	mustBind(t, s, "a3", "alice", Created)
	if _, ok := s.Lookup("a2"); ok {
		t.Fatal("alice's least recently used binding was kept beyond her bound")
	}
	for _, k := range []string{"a1", "a3"} {
		if b, ok := s.Lookup(k); !ok || b.Subject != "alice" {
			t.Fatalf("%s lost", k)
		}
	}
	if n := s.countSubject("alice"); n != 2 {
		t.Fatalf("alice holds %d", n)
	}
}

func TestExpiredMakeRoom(t *testing.T) {
	c := newClock()
	s := New(2, 0, time.Minute, c.now)
	mustBind(t, s, "x", "alice", Created)
	mustBind(t, s, "y", "bob", Created)
	mustBind(t, s, "z", "carol", Full)
	if d := s.RetryAfter(); d != time.Minute {
		t.Fatalf("RetryAfter = %v, want the oldest binding's remaining minute", d)
	}
	c.advance(59 * time.Second)
	mustBind(t, s, "z", "carol", Full)
	c.advance(time.Second)
	mustBind(t, s, "z", "carol", Created)
	if s.Len() != 2 || s.countSubject("alice") != 0 {
		t.Fatalf("len %d: the expired oldest binding was not pushed out", s.Len())
	}
	if _, ok := s.Lookup("y"); ok {
		t.Fatal("an expired binding is still served")
	}
}

func TestPut(t *testing.T) {
	c := newClock()
	s := New(2, 0, time.Minute, c.now)
	if !s.Put("k", Binding{Subject: "alice", ElicitationURL: true}) {
		t.Fatal("Put refused")
	}
	s.Put("k", Binding{Subject: "alice", Confirmed: t0})
	if b, _ := s.Lookup("k"); !b.ElicitationURL || !b.Confirmed.Equal(t0) {
		t.Fatalf("Put lost the capability or the confirmation: %+v", b)
	}
	s.Put("k", Binding{Subject: "bob"})
	if b, _ := s.Lookup("k"); b.Subject != "bob" || b.ElicitationURL {
		t.Fatalf("the shared tier's owner did not replace the local one: %+v", b)
	}
	s.Put("k2", Binding{Subject: "carol"})
	if s.Put("k3", Binding{Subject: "dave"}) {
		t.Fatal("Put made room by dropping a live binding")
	}
}

func TestBindIsAtomic(t *testing.T) {
	s := New(10, 0, time.Hour, nil)
	k := Key("r", "race")
	var wg sync.WaitGroup
	owners := make(chan string, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if owner, r := s.Bind(k, fmt.Sprint("user-", i), nil); r.Accepted() {
				owners <- owner
			}
		}()
	}
	wg.Wait()
	close(owners)
	n := 0
	for range owners {
		n++
	}
	if n != 1 {
		t.Fatalf("%d users own one session", n)
	}
}

// BenchmarkBind reports the cost of binding a new session and the store's
// memory per binding (bytes/binding), keys of a typical size included.
func BenchmarkBind(b *testing.B) {
	const n = 100_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = Key("mcp", fmt.Sprintf("%032x", i)) // a 32-hex-digit session id
	}
	subjects := make([]string, n/10)
	for i := range subjects {
		subjects[i] = fmt.Sprintf("hs:user-%06d", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(n, 16, time.Hour, nil)
	for i, k := range keys {
		s.Bind(k, subjects[i%len(subjects)], nil)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perBinding := float64(after.HeapAlloc-before.HeapAlloc) / n

	for i := 0; b.Loop(); i++ {
		s.Bind(keys[i%n], subjects[i%len(subjects)], nil)
	}
	b.ReportMetric(perBinding, "bytes/binding")
}

// FuzzNoEvictionOfOthers runs random binds of a few users on a few keys
// against a tiny store and checks the guarantee: a live binding disappears
// only when its owner has since bound at least perSubject newer sessions
// (own eviction); another user never gets a live binding; a refusal (Full)
// happens only when every binding held is live.
func FuzzNoEvictionOfOthers(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0x11, 0x12, 0x13, 0x14, 0x21, 0x22, 0x23, 0x24, 0x95, 0x31})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const size, per, idle = 6, 2, 10 // idle in clock steps
		c := newClock()
		s := New(size, per, idle*time.Second, c.now)
		type use struct {
			owner string
			at    int // step of the last use
		}
		model := map[string]use{}
		step := 0
		live := func(u use) bool { return step < u.at+idle }
		for _, op := range ops {
			if op&0x80 != 0 { // advance the clock
				n := int(op&0x7f) % 12
				step += n
				c.advance(time.Duration(n) * time.Second)
				continue
			}
			sub := fmt.Sprint("u", op>>4%4)
			key := fmt.Sprint("k", op&0x0f%10)
			// A live binding the store lost must have been pushed out by its
			// owner's own newer bindings.
			for k, u := range model {
				if _, ok := s.Lookup(k); ok || !live(u) {
					continue
				}
				newer := 0
				for k2, u2 := range model {
					if k2 != k && u2.owner == u.owner && u2.at >= u.at && live(u2) {
						newer++
					}
				}
				if newer < per {
					t.Fatalf("step %d: %s's live binding %s vanished with %d newer bindings of theirs", step, u.owner, k, newer)
				}
				delete(model, k)
			}
			prev, had := model[key]
			owner, r := s.Bind(key, sub, nil)
			switch {
			case had && live(prev) && prev.owner != sub:
				if r != Conflict || owner != prev.owner {
					t.Fatalf("step %d: %s bound %s, live binding of %s: %v %q", step, sub, key, prev.owner, r, owner)
				}
			case r.Accepted():
				model[key] = use{sub, step}
			case r == Full:
				for k, u := range model {
					if _, ok := s.Lookup(k); ok && !live(u) {
						t.Fatalf("step %d: refused while %s's binding %s had expired", step, u.owner, k)
					}
				}
				if s.Len() < size {
					t.Fatalf("step %d: refused with %d of %d bindings held", step, s.Len(), size)
				}
			default:
				t.Fatalf("step %d: %s on free %s: %v", step, sub, key, r)
			}
		}
	})
}

// countSubject is the number of bindings subject holds.
func (s *Store) countSubject(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.users[subject]; u != nil {
		return u.n
	}
	return 0
}

// TestDropSubject: dropping a user forgets that user's bindings, all of
// them, and nobody else's.
func TestDropSubject(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		dropped int
		left    []string // keys still bound
	}{
		{"a user with bindings", "alice", 3, []string{"b0"}},
		{"a user without", "carol", 0, []string{"a0", "a1", "a2", "b0"}},
		{"no user", "", 0, []string{"a0", "a1", "a2", "b0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(10, 0, time.Minute, newClock().now)
			for i := range 3 {
				mustBind(t, s, fmt.Sprint("a", i), "alice", Created)
			}
			mustBind(t, s, "b0", "bob", Created)
			if n := s.DropSubject(tc.subject); n != tc.dropped {
				t.Errorf("dropped %d, want %d", n, tc.dropped)
			}
			if s.Len() != len(tc.left) {
				t.Errorf("Len = %d, want %d", s.Len(), len(tc.left))
			}
			for _, k := range tc.left {
				if _, ok := s.Lookup(k); !ok {
					t.Errorf("%s dropped", k)
				}
			}
			mustBind(t, s, "a0", "alice", map[bool]Result{true: Created, false: Owned}[tc.dropped > 0])
		})
	}
}
