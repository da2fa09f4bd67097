package credential

import (
	"regexp"
	"strings"
	"testing"
)

// b64tokenRE is what Syntax accepts, and nothing else: RFC 6750's
// b64token, at least one character before any padding.
var b64tokenRE = regexp.MustCompile(`\A[A-Za-z0-9\-._~+/]+=*\z`)

func TestSyntax(t *testing.T) {
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTEifQ.c2lnbmF0dXJlLWJ5dGVzLWhlcmU"
	tests := []struct {
		name string
		tok  string
		ok   bool
	}{
		{"empty", "", false},
		{"one char", "a", true},
		{"only padding", "==", false},
		{"one padding", "=", false},
		{"a block of padding", "=========", false},
		{"jwt", jwt, true},
		{"padded", "abcdefghij==", true},
		{"padding inside", "abcd=efgh", false},
		{"comma in first block", "abc,defghijklmnop", false},
		{"comma in later block", "abcdefghijklmnop,q", false},
		{"space at end of block", "abcdefg h", false},
		{"nul", "abcdefgh\x00ijk", false},
		{"high byte", "abcdefgh\xffijk", false},
		{"utf-8", "abcdefghé", false},
		{"every symbol", "-._~+/-._~+/AZaz09", true},
		{"padding then char", "abcdefgh=a", false},
		{"eight exactly", "abcdefgh", true},
		{"sixteen padded", "abcdefghijklmn==", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Syntax(tt.tok)
			if (err == nil) != tt.ok {
				t.Fatalf("Syntax(%q) = %v, want ok %v", tt.tok, err, tt.ok)
			}
			if (err == nil) != (tt.tok != "" && b64tokenRE.MatchString(tt.tok)) {
				t.Fatalf("Syntax(%q) = %v disagrees with the grammar", tt.tok, err)
			}
		})
	}
}

// TestSyntaxEveryByte puts every byte value at every position of tokens
// of up to three blocks, before and after padding: the accepted set is
// exactly the grammar's wherever the byte falls in the eight-byte blocks.
func TestSyntaxEveryByte(t *testing.T) {
	for n := 1; n <= 25; n++ {
		for pad := 0; pad <= 2 && pad < n; pad++ {
			base := []byte(strings.Repeat("A", n-pad) + strings.Repeat("=", pad))
			for pos := range n {
				for c := range 256 {
					tok := append([]byte(nil), base...)
					tok[pos] = byte(c)
					got, want := Syntax(string(tok)) == nil, len(tok) > 0 && b64tokenRE.Match(tok)
					if got != want {
						t.Fatalf("Syntax(%q) accepted %v, grammar %v", tok, got, want)
					}
				}
			}
		}
	}
}

func FuzzSyntax(f *testing.F) {
	for _, s := range []string{"", "a", "abc==", "abcdefgh,ijk", "eyJhbGciOiJIUzI1NiJ9.e30.sig", "a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		if got, want := Syntax(tok) == nil, tok != "" && b64tokenRE.MatchString(tok); got != want {
			t.Fatalf("Syntax(%q) accepted %v, grammar %v", tok, got, want)
		}
	})
}

// BenchmarkSyntax checks a token of the size a typical JWT has.
func BenchmarkSyntax(b *testing.B) {
	tok := strings.Repeat("eyJzdWIiOiJ1c2VyLTEifQ.", 26) + "c2ln"
	b.SetBytes(int64(len(tok)))
	for b.Loop() {
		if Syntax(tok) != nil {
			b.Fatal("refused")
		}
	}
}
