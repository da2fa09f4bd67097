package lineage

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParseDepth(f *testing.F) {
	for _, s := range []string{"", "0", "3", " 8 ", "9999", "10000", "-1", "abc", "1,2", "+1", "0x1", "\t7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, present, err := ParseDepth(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) || !present {
				t.Fatalf("ParseDepth(%q) error %v, present %v", s, err, present)
			}
			return
		}
		trimmed := strings.Trim(s, " \t")
		if present != (trimmed != "") {
			t.Fatalf("ParseDepth(%q) present = %v", s, present)
		}
		if d < 0 || d > 9999 {
			t.Fatalf("ParseDepth(%q) = %d, out of range", s, d)
		}
		if present && strings.TrimLeft(trimmed, "0123456789") != "" {
			t.Fatalf("ParseDepth(%q) accepted a non-digit", s)
		}
	})
}

func FuzzValidID(f *testing.F) {
	for _, s := range []string{"", "ctx-9", "a,b", "a\nb", " a", "é", "\xff", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !ValidID(s) {
			return
		}
		if len(s) == 0 || len(s) > MaxIDLength || !utf8.ValidString(s) || strings.ContainsAny(s, ",\x00\r\n\t\x7f") ||
			strings.TrimSpace(s) != s || strings.Trim(s, "\ufeff") != s {
			t.Fatalf("ValidID(%q) = true", s)
		}
	})
}

// Derive never panics, and whatever it accepts is a consistent lineage whose
// header values are safe to send.
func FuzzDerive(f *testing.F) {
	f.Add("R", "P", "3", "a,b", "ctx-9", "", "sess-42", "x", true, false)
	f.Add("", "P", "", "", "", "mcp", "", "", true, true)
	f.Add("forged", "", "9", "m", "", "", "", "", false, false)
	f.Add("R\x00", "P,Q", "-1", ",,", "c\n", "", "", "", true, false)
	f.Fuzz(func(t *testing.T, root, parent, depth, actors, ctxID, mcp, sess, act string, trusted, signed bool) {
		in := Inbound{Root: root, Parent: parent, Depth: depth, ActorChain: actors}
		facts := Facts{ContextID: ctxID, MCPSessionID: mcp, TokenSessionID: sess}
		if act != "" {
			facts.ActChain = strings.Split(act, "/")
		}
		opts := Options{Trusted: trusted, NewID: fixedID}
		if signed {
			opts.Signed = &Carried{Root: "sR", Context: "sC", Depth: len(depth) % 10}
		}
		r, err := Derive(in, facts, opts)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("Derive() error %v is neither ErrMalformed nor ErrTooDeep", err)
			}
			return
		}
		if !ValidID(r.Root) || !ValidID(r.Context) || (r.Parent != "" && !ValidID(r.Parent)) {
			t.Fatalf("Derive() = %+v: an id is not valid", r)
		}
		if r.Depth < 0 || r.Depth > DefaultMaxDepth || r.Depth < len(r.ActorChain) {
			t.Fatalf("Derive() = %+v: bad depth", r)
		}
		if !trusted && !signed {
			if r.Trusted || r.Parent != "" || r.Root != r.Context || r.Depth != len(facts.ActChain) {
				t.Fatalf("untrusted Derive() = %+v used inbound lineage", r)
			}
		}
		if len(facts.ActChain) > 0 && strings.Join(r.ActorChain, "/") != act {
			t.Fatalf("Derive() actor chain %q, want the act chain %q", r.ActorChain, act)
		}
		set, remove := r.Headers(DefaultNames())
		if len(set)+len(remove) != 5 {
			t.Fatalf("Headers() = %q, %q", set, remove)
		}
	})
}

func FuzzActChain(f *testing.F) {
	f.Add(`{"act":{"sub":"b","act":{"sub":"a"}}}`)
	f.Add(`{"act":{"act":{"act":{"sub":"x"}}}}`)
	f.Add(`{"act":[1,2]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var claims map[string]any
		if json.Unmarshal([]byte(doc), &claims) != nil {
			return
		}
		chain := ActChain(claims)
		if len(chain) > MaxActors {
			t.Fatalf("ActChain() has %d actors", len(chain))
		}
		for _, a := range chain {
			if !ValidID(a) {
				t.Fatalf("ActChain() has unusable actor %q", a)
			}
		}
	})
}

func FuzzParseActorList(f *testing.F) {
	for _, s := range []string{"a", "a,b", " a , b ,", ",,,", "a\x00", strings.Repeat("a,", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		chain, err := parseActorList(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("parseActorList(%q) error %v", s, err)
			}
			return
		}
		if len(chain) > MaxActors {
			t.Fatalf("parseActorList(%q) has %d actors", s, len(chain))
		}
		for _, a := range chain {
			if !ValidID(a) {
				t.Fatalf("parseActorList(%q) has unusable actor %q", s, a)
			}
		}
	})
}

// The hand-written JSON string encoder agrees with encoding/json.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "alice", `"\`, "\x00\x1f\x7f", "é", "\xff", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, got, err)
		}
		std, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(std, &want)
		if back != want {
			t.Fatalf("%q round-trips to %q, want %q", s, back, want)
		}
	})
}

// Whatever arrives in the signed lineage header, Verify answers without
// panicking, and only with ErrSignedInvalid.
func FuzzVerify(f *testing.F) {
	clock := newClock()
	signer := testSigner(f, clock, peerIssuer)
	verifier, err := NewSignedVerifier(VerifierOptions{Local: signer, Now: clock.Now})
	if err != nil {
		f.Fatal(err)
	}
	defer verifier.Close()
	good, err := signer.Sign(&sampleResult, "alice", "")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := verifier.Verify(t.Context(), raw, "alice")
		if err != nil {
			if !errors.Is(err, ErrSignedInvalid) {
				t.Fatalf("Verify() error %v", err)
			}
			return
		}
		if !ValidID(c.Root) || c.Depth < 0 || c.User != "alice" {
			t.Fatalf("Verify() accepted %+v", c)
		}
	})
}
