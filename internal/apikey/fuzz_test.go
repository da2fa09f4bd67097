package apikey

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzFile feeds arbitrary keys files to the loader: it never panics, and
// what it loads is usable.
func FuzzFile(f *testing.F) {
	f.Add("keys:\n  - {id: a, subject: s, hash: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08, routes: [r], claims: {x: 1}}\n")
	f.Add(`{"keys":[{"id":"a","subject":"s","key":"ek_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}`)
	f.Add("keys:\n  - {id: h, subject: s, hash: \"argon2id:$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA\"}\n")
	f.Add("keys: [{id: a, subject: s, key: x, expires: 2027-01-01}]")
	s := &Store{path: "keys.yaml", opts: Options{Now: time.Now}}
	f.Fuzz(func(t *testing.T, doc string) {
		idx, err := s.parse([]byte(doc))
		if err != nil {
			return
		}
		if len(idx.ids) != len(idx.bySHA)+len(idx.byID) {
			t.Fatalf("%d ids but %d keys indexed", len(idx.ids), len(idx.bySHA)+len(idx.byID))
		}
		for _, k := range idx.bySHA {
			if k.raw["sub"] != k.sub || k.sub == "" {
				t.Fatalf("key %s: sub %v", k.id, k.raw["sub"])
			}
		}
	})
}

// FuzzArgon2idPHC: the PHC parser never panics and keeps its bounds.
func FuzzArgon2idPHC(f *testing.F) {
	f.Add("$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA")
	f.Add("$argon2id$v=19$m=0,t=0,p=0$$")
	f.Add("$argon2i$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseArgon2id(s)
		if err != nil {
			return
		}
		if p.memory > maxArgon2Memory || p.time > maxArgon2Time || p.threads > maxArgon2Threads || p.threads == 0 || len(p.salt) < 8 {
			t.Fatalf("out of bounds: %+v", p)
		}
	})
}

// FuzzLookup: any presented string is a denial or a key, never a panic;
// a key is found only by the key itself.
func FuzzLookup(f *testing.F) {
	k := "ek_" + strings.Repeat("A", 43)
	dir := f.TempDir()
	path := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(path, []byte("keys:\n  - {id: a, subject: s, key: "+k+"}\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	s, err := Open(path, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(k)
	f.Add(k[:20])
	f.Add("a.secret")
	f.Add("")
	f.Fuzz(func(t *testing.T, presented string) {
		c, err := s.Lookup(t.Context(), presented, "r")
		if err == nil && presented != k {
			t.Fatalf("%q accepted as %s", presented, c.ID)
		}
	})
}
