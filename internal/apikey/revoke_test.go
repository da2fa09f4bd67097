package apikey_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/testing/testclock"
)

func TestRevokedKeyIsRefused(t *testing.T) {
	c := testclock.New(epoch)
	revoked, kept, human := mustKey(t), mustKey(t), "correct horse battery staple"
	doc := fmt.Sprintf(`keys:
  - {id: revoked, hash: %s, subject: a}
  - {id: kept, hash: %s, subject: b}
  - {id: human, hash: "%s", subject: c}
`, apikey.SHA256Hash(revoked), apikey.SHA256Hash(kept), mustArgon(t, human))
	path := filepath.Join(t.TempDir(), "keys.yaml")
	writeFile(t, path, doc)
	revs := apikey.NewRevocations(c.Now)
	s, err := apikey.Open(path, apikey.Options{Name: "keys", Now: c.Now, Revocations: revs})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Lookup(ctx, revoked, "r"); err != nil {
		t.Fatalf("before the revocation: %v", err)
	}
	if !revs.Revoke(apikey.Ref{Issuer: "keys", ID: "revoked"}, c.Now().Add(time.Hour)) {
		t.Fatal("Revoke reported no change")
	}
	revs.Revoke(apikey.Ref{Issuer: "keys", ID: "human"}, c.Now().Add(time.Hour))
	revs.Revoke(apikey.Ref{Issuer: "other-issuer", ID: "kept"}, c.Now().Add(time.Hour))

	tests := []struct {
		name, key string
		want      error
	}{
		{"revoked key", revoked, apikey.ErrRevoked},
		{"revoked human key", "human." + human, apikey.ErrRevoked},
		{"same id revoked at another issuer", kept, nil},
		{"revoked key with trailing space", revoked + " ", apikey.ErrMalformed},
		{"revoked key with leading space", " " + revoked, apikey.ErrUnknownKey},
		{"revoked human key with the id upper-cased", "HUMAN." + human, apikey.ErrUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Lookup(ctx, tt.key, "r")
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Lookup = %v, want %v", err, tt.want)
			}
		})
	}

	c.Advance(time.Hour)
	if _, err := s.Lookup(ctx, revoked, "r"); err != nil {
		t.Fatalf("after the revocation ended: %v", err)
	}
}

func TestRevocations(t *testing.T) {
	c := testclock.New(epoch)
	r := apikey.NewRevocations(c.Now)
	a := apikey.Ref{Issuer: "keys", ID: "a"}
	tests := []struct {
		name        string
		until       time.Time
		wantChanged bool
	}{
		{"first", epoch.Add(time.Hour), true},
		{"an earlier end is ignored", epoch.Add(time.Minute), false},
		{"the same end is ignored", epoch.Add(time.Hour), false},
		{"a later end replaces", epoch.Add(2 * time.Hour), true},
		{"an end in the past is ignored", epoch.Add(-time.Second), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Revoke(a, tt.until); got != tt.wantChanged {
				t.Fatalf("Revoke = %v, want %v", got, tt.wantChanged)
			}
		})
	}
	c.Advance(90 * time.Minute)
	if !r.Revoked("keys", "a") {
		t.Fatal("the later end was not kept")
	}
	c.Advance(time.Hour)
	if r.Revoked("keys", "a") {
		t.Fatal("still revoked after its end")
	}
	r.Revoke(apikey.Ref{Issuer: "keys", ID: "b"}, c.Now().Add(time.Hour))
	if r.Len() != 1 {
		t.Fatalf("Len = %d after an ended revocation was pruned, want 1", r.Len())
	}
	var nilSet *apikey.Revocations
	if nilSet.Revoked("keys", "a") {
		t.Fatal("a nil set revokes")
	}
}

func TestUntil(t *testing.T) {
	c := testclock.New(epoch)
	soon, never := mustKey(t), mustKey(t)
	s, _ := open(t, c, fmt.Sprintf(`keys:
  - {id: soon, hash: %s, subject: a, expires: 2027-01-16T08:00:00Z}
  - {id: never, hash: %s, subject: b}
`, apikey.SHA256Hash(soon), apikey.SHA256Hash(never)))
	tests := []struct {
		id        string
		want      time.Time
		wantKnown bool
	}{
		{"soon", epoch.Add(24 * time.Hour), true},
		{"never", epoch.Add(apikey.RevocationTTL), true},
		{"unknown", epoch.Add(apikey.RevocationTTL), false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got, known := s.Until(tt.id)
			if !got.Equal(tt.want) || known != tt.wantKnown {
				t.Fatalf("Until = %v, %v; want %v, %v", got, known, tt.want, tt.wantKnown)
			}
		})
	}
}

func TestValidID(t *testing.T) {
	for _, tt := range []struct {
		id   string
		want bool
	}{{"key-1", true}, {"Key.1_x", true}, {"", false}, {" key-1", false}, {"key-1 ", false}, {"key\n1", false}, {"a/b", false}} {
		if got := apikey.ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func BenchmarkRevoked(b *testing.B) {
	r := apikey.NewRevocations(nil)
	for i := range 1000 {
		r.Revoke(apikey.Ref{Issuer: "keys", ID: fmt.Sprint("k", i)}, time.Now().Add(time.Hour))
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Revoked("keys", "not-revoked")
	}
}
