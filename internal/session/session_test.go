package session

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestBind(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	s, err := New(10, time.Minute, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	k := Key("files", "sess-1")
	steps := []struct {
		name      string
		advance   time.Duration
		subject   string
		wantOwner string
		wantOwned bool
	}{
		{"first use binds", 0, "alice", "alice", true},
		{"owner again", 30 * time.Second, "alice", "alice", true},
		{"another user is refused", 0, "mallory", "alice", false},
		{"use extended the idle deadline", 50 * time.Second, "mallory", "alice", false},
		{"expired binding is taken over", 61 * time.Second, "bob", "bob", true},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		owner, owned := s.Bind(k, st.subject, nil)
		if owner != st.wantOwner || owned != st.wantOwned {
			t.Fatalf("%s: Bind = %q, %v; want %q, %v", st.name, owner, owned, st.wantOwner, st.wantOwned)
		}
	}
	if _, ok := s.Lookup(Key("other-route", "sess-1")); ok {
		t.Fatal("binding leaked to another route")
	}
}

func TestEnd(t *testing.T) {
	s, _ := New(10, time.Hour, nil)
	k := Key("r", "s")
	s.Bind(k, "alice", nil)
	if s.End(k, "mallory") {
		t.Fatal("another user ended the session")
	}
	if _, ok := s.Lookup(k); !ok {
		t.Fatal("binding gone after refused end")
	}
	if !s.End(k, "alice") {
		t.Fatal("owner could not end the session")
	}
	if owner, owned := s.Bind(k, "mallory", nil); !owned || owner != "mallory" {
		t.Fatal("ended session still bound")
	}
}

func TestRemoveSubjectAndSession(t *testing.T) {
	s, _ := New(100, time.Hour, nil)
	for i := range 5 {
		s.Bind(Key("r", fmt.Sprint("a", i)), "alice", nil)
	}
	s.Bind(Key("r", "b"), "bob", nil)
	s.Bind(Key("r2", "b"), "bob", nil)
	if n := s.RemoveSubject("alice"); n != 5 {
		t.Fatalf("removed %d", n)
	}
	if n := s.RemoveSession("b"); n != 2 {
		t.Fatalf("removed %d sessions named b", n)
	}
	if s.Len() != 0 {
		t.Fatalf("left %d", s.Len())
	}
}

func TestBindIsAtomic(t *testing.T) {
	s, _ := New(10, time.Hour, nil)
	k := Key("r", "race")
	var wg sync.WaitGroup
	owners := make(chan string, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if owner, owned := s.Bind(k, fmt.Sprint("user-", i), nil); owned {
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
