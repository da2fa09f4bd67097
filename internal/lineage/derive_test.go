package lineage

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// fixedID is a NewID stand-in that makes "a new random id" visible.
func fixedID() string { return "new-id" }

func TestDerive(t *testing.T) {
	tests := []struct {
		name    string
		in      Inbound
		facts   Facts
		opts    Options
		want    Result
		wantErr error
	}{
		{
			name:  "chain root: token session becomes the root",
			facts: Facts{TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "sess-42", Context: "sess-42", Depth: 0, Trusted: true},
		},
		{
			name:  "mid-chain: root and parent kept, depth 1",
			in:    Inbound{Root: "R", Parent: "P"},
			facts: Facts{TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Parent: "P", Depth: 1, Context: "sess-42", Trusted: true},
		},
		{
			name:  "legacy caller: parent alone is promoted to root",
			in:    Inbound{Parent: "P"},
			facts: Facts{TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "P", Parent: "P", Depth: 1, Context: "sess-42", Trusted: true},
		},
		{
			name:  "root alone: depth 1, no parent",
			in:    Inbound{Root: "R"},
			facts: Facts{TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Depth: 1, Context: "sess-42", Trusted: true},
		},
		{
			name:  "inbound depth 3 gives 4",
			in:    Inbound{Root: "R", Parent: "P", Depth: "3"},
			facts: Facts{TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Parent: "P", Depth: 4, Context: "sess-42", Trusted: true},
		},
		{
			name:  "depth alone counts, root is the own context",
			in:    Inbound{Depth: "3"},
			facts: Facts{TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "sess-42", Depth: 4, Context: "sess-42", Trusted: true},
		},
		{
			name:  "optional white space around values is trimmed",
			in:    Inbound{Root: " R\t", Parent: "\tP ", Depth: " 2 "},
			facts: Facts{TokenSessionID: "s"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Parent: "P", Depth: 3, Context: "s", Trusted: true},
		},
		{
			name:  "leading zeros are still a depth",
			in:    Inbound{Root: "R", Depth: "0007"},
			facts: Facts{TokenSessionID: "s"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Depth: 8, Context: "s", Trusted: true},
		},
		{
			name:    "depth 8 inbound makes 9: too deep",
			in:      Inbound{Root: "R", Parent: "P", Depth: "8"},
			facts:   Facts{TokenSessionID: "s"},
			opts:    Options{Trusted: true},
			wantErr: ErrTooDeep,
		},
		{
			name:  "depth 7 inbound makes 8: the deepest allowed",
			in:    Inbound{Root: "R", Parent: "P", Depth: "7"},
			facts: Facts{TokenSessionID: "s"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Parent: "P", Depth: 8, Context: "s", Trusted: true},
		},
		{
			name:    "route maximum below the default",
			in:      Inbound{Root: "R", Parent: "P", Depth: "2"},
			facts:   Facts{TokenSessionID: "s"},
			opts:    Options{Trusted: true, MaxDepth: 2},
			wantErr: ErrTooDeep,
		},
		{
			name:  "route maximum above the default",
			in:    Inbound{Root: "R", Parent: "P", Depth: "11"},
			facts: Facts{TokenSessionID: "s"},
			opts:  Options{Trusted: true, MaxDepth: 12},
			want:  Result{Root: "R", Parent: "P", Depth: 12, Context: "s", Trusted: true},
		},
		{
			name:  "untrusted caller: forged headers ignored, new chain",
			in:    Inbound{Root: "forged-root", Parent: "forged-parent", Depth: "5", ActorChain: "mallory"},
			facts: Facts{TokenSessionID: "sess-42"},
			opts:  Options{Trusted: false},
			want:  Result{Root: "sess-42", Context: "sess-42", Depth: 0},
		},
		{
			name:  "untrusted caller: garbage is not parsed, so it is no error",
			in:    Inbound{Root: "bad\x00root", Depth: "-1", ActorChain: ",,\x7f"},
			facts: Facts{TokenSessionID: "sess-42"},
			want:  Result{Root: "sess-42", Context: "sess-42"},
		},
		{
			name:  "untrusted caller: a loop of forged depth is not denied either",
			in:    Inbound{Depth: "9999"},
			facts: Facts{TokenSessionID: "sess-42"},
			want:  Result{Root: "sess-42", Context: "sess-42"},
		},
		{
			name:  "act chain depth beats a smaller header",
			in:    Inbound{Root: "R", Parent: "P", Depth: "0"},
			facts: Facts{TokenSessionID: "s", ActChain: []string{"agent-c", "agent-b", "agent-a"}},
			opts:  Options{Trusted: true},
			want: Result{Root: "R", Parent: "P", Depth: 3, Context: "s", Trusted: true,
				ActorChain: []string{"agent-c", "agent-b", "agent-a"}},
		},
		{
			name:  "a larger header depth beats the act chain",
			in:    Inbound{Root: "R", Parent: "P", Depth: "4"},
			facts: Facts{TokenSessionID: "s", ActChain: []string{"agent-b"}},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Parent: "P", Depth: 5, Context: "s", Trusted: true, ActorChain: []string{"agent-b"}},
		},
		{
			name:  "act chain beats the actor header",
			in:    Inbound{Root: "R", Parent: "P", ActorChain: "mallory,eve"},
			facts: Facts{TokenSessionID: "s", ActChain: []string{"agent-b", "agent-a"}},
			opts:  Options{Trusted: true},
			want: Result{Root: "R", Parent: "P", Depth: 2, Context: "s", Trusted: true,
				ActorChain: []string{"agent-b", "agent-a"}},
		},
		{
			name:  "act chain present: a malformed actor header loses instead of failing",
			in:    Inbound{Root: "R", ActorChain: "bad\x01actor"},
			facts: Facts{TokenSessionID: "s", ActChain: []string{"agent-a"}},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Depth: 1, Context: "s", Trusted: true, ActorChain: []string{"agent-a"}},
		},
		{
			name:  "trusted actor header without act claim is kept and counts",
			in:    Inbound{Root: "R", Parent: "P", Depth: "0", ActorChain: " agent-b , agent-a ,"},
			facts: Facts{TokenSessionID: "s"},
			opts:  Options{Trusted: true},
			want: Result{Root: "R", Parent: "P", Depth: 2, Context: "s", Trusted: true,
				ActorChain: []string{"agent-b", "agent-a"}},
		},
		{
			name:  "act chain on an untrusted caller still sets the chain and depth",
			in:    Inbound{Root: "forged"},
			facts: Facts{TokenSessionID: "s", ActChain: []string{"agent-a"}},
			want:  Result{Root: "s", Depth: 1, Context: "s", ActorChain: []string{"agent-a"}},
		},
		{
			name:    "act chain deeper than the maximum",
			facts:   Facts{TokenSessionID: "s", ActChain: strings.Split("a,b,c,d,e,f,g,h,i", ",")},
			opts:    Options{Trusted: true},
			wantErr: ErrTooDeep,
		},
		{
			name:  "A2A context id is the root of a new chain",
			facts: Facts{ContextID: "ctx-9", MCPSessionID: "mcp-1", TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "ctx-9", Context: "ctx-9", Trusted: true},
		},
		{
			name:  "MCP session id when there is no A2A context",
			facts: Facts{MCPSessionID: "mcp-1", TokenSessionID: "sess-42"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "mcp-1", Context: "mcp-1", Trusted: true},
		},
		{
			name:  "token session id when there is nothing else",
			facts: Facts{TokenSessionID: "sess-42"},
			want:  Result{Root: "sess-42", Context: "sess-42"},
		},
		{
			name: "random id when the request names no context",
			opts: Options{NewID: fixedID},
			want: Result{Root: "new-id", Context: "new-id"},
		},
		{
			name:  "own context is kept mid-chain for the next hop",
			in:    Inbound{Root: "R", Parent: "P"},
			facts: Facts{ContextID: "ctx-9"},
			opts:  Options{Trusted: true},
			want:  Result{Root: "R", Parent: "P", Depth: 1, Context: "ctx-9", Trusted: true},
		},
		{
			name:  "signed lineage from an untrusted caller is used",
			in:    Inbound{Root: "forged", Parent: "forged", Depth: "0"},
			facts: Facts{TokenSessionID: "s"},
			opts:  Options{Signed: &Carried{Root: "R", Parent: "GP", Context: "P", Depth: 2, ActorChain: []string{"agent-a"}}},
			want: Result{Root: "R", Parent: "P", Depth: 3, Context: "s", Trusted: true, FromSigned: true,
				ActorChain: []string{"agent-a"}},
		},
		{
			name:  "signed lineage beats trusted headers",
			in:    Inbound{Root: "other", Parent: "other", Depth: "6"},
			facts: Facts{TokenSessionID: "s"},
			opts:  Options{Trusted: true, Signed: &Carried{Root: "R", Context: "P", Depth: 0}},
			want:  Result{Root: "R", Parent: "P", Depth: 1, Context: "s", Trusted: true, FromSigned: true},
		},
		{
			name:  "act chain beats the signed actor chain",
			facts: Facts{TokenSessionID: "s", ActChain: []string{"b", "a", "z"}},
			opts:  Options{Signed: &Carried{Root: "R", Context: "P", Depth: 0, ActorChain: []string{"a"}}},
			want: Result{Root: "R", Parent: "P", Depth: 3, Context: "s", Trusted: true, FromSigned: true,
				ActorChain: []string{"b", "a", "z"}},
		},
		{
			name:    "signed lineage is subject to the maximum depth",
			facts:   Facts{TokenSessionID: "s"},
			opts:    Options{Signed: &Carried{Root: "R", Context: "P", Depth: 8}},
			wantErr: ErrTooDeep,
		},
		{name: "negative depth", in: Inbound{Root: "R", Depth: "-1"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "non-numeric depth", in: Inbound{Root: "R", Depth: "abc"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "huge depth", in: Inbound{Root: "R", Depth: "99999999999999999999"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "five-digit depth", in: Inbound{Root: "R", Depth: "10000"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "signed depth", in: Inbound{Root: "R", Depth: "+3"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "fractional depth", in: Inbound{Root: "R", Depth: "1.5"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "repeated depth header", in: Inbound{Root: "R", Depth: "1,2"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "root with a control character", in: Inbound{Root: "R\x00"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "root too long", in: Inbound{Root: strings.Repeat("r", MaxIDLength+1)}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "repeated parent header", in: Inbound{Parent: "P1,P2"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "parent with invalid UTF-8", in: Inbound{Parent: "P\xff"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "actor with a control character", in: Inbound{Root: "R", ActorChain: "a,b\nc"}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "actor header too long", in: Inbound{Root: "R", ActorChain: strings.Repeat("a,", MaxActors+1)}, facts: Facts{TokenSessionID: "s"}, opts: Options{Trusted: true}, wantErr: ErrMalformed},
		{name: "A2A context id with a newline", facts: Facts{ContextID: "ctx\n9"}, wantErr: ErrMalformed},
		{name: "MCP session id too long", facts: Facts{MCPSessionID: strings.Repeat("m", 300)}, wantErr: ErrMalformed},
		{name: "id generator returning nothing", opts: Options{NewID: func() string { return "" }}, wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Derive(tt.in, tt.facts, tt.opts)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Derive() error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Derive() error = %v", err)
			}
			if !equalResult(got, tt.want) {
				t.Errorf("Derive() =\n %+v\nwant\n %+v", got, tt.want)
			}
		})
	}
}

func equalResult(a, b Result) bool {
	return a.Root == b.Root && a.Parent == b.Parent && a.Depth == b.Depth && a.Context == b.Context &&
		slices.Equal(a.ActorChain, b.ActorChain) && a.Trusted == b.Trusted &&
		a.FromSigned == b.FromSigned && a.Signed == b.Signed
}

func TestDeriveDefaultNewID(t *testing.T) {
	a, err := Derive(Inbound{}, Facts{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Derive(Inbound{}, Facts{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !isUUIDv4(a.Root) || !isUUIDv4(b.Root) {
		t.Errorf("roots %q, %q are not version 4 UUIDs", a.Root, b.Root)
	}
	if a.Root == b.Root {
		t.Errorf("two new chains share the root %q", a.Root)
	}
}

func isUUIDv4(s string) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' || s[14] != '4' {
		return false
	}
	if !strings.ContainsRune("89ab", rune(s[19])) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '-' && !strings.ContainsRune("0123456789abcdef", rune(s[i])) {
			return false
		}
	}
	return true
}

func TestValidID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"uuid", "2f1c1b7e-8a58-4c1e-9c55-6a1f0e4b2d11", true},
		{"printable ASCII", "conv:42/a=b;c", true},
		{"inner space", "a b", true},
		{"UTF-8", "gespräch-1", true},
		{"longest", strings.Repeat("x", MaxIDLength), true},
		{"empty", "", false},
		{"too long", strings.Repeat("x", MaxIDLength+1), false},
		{"NUL", "a\x00b", false},
		{"newline", "a\nb", false},
		{"tab", "a\tb", false},
		{"DEL", "a\x7fb", false},
		{"comma", "a,b", false},
		{"leading space", " a", false},
		{"trailing space", "a ", false},
		{"invalid UTF-8", "a\xc3", false},
		{"C1 control", "a\u0085b", false},
		{"inner no-break space", "a\u00a0b", true},
		{"leading no-break space", "\u00a0ctx-1", false},
		{"trailing four-per-em space", "ctx-1\u2005", false},
		{"only an ideographic space", "\u3000", false},
		{"trailing line separator", "ctx-1\u2028", false},
		{"trailing byte order mark", "ctx-1\ufeff", false},
		{"non-ASCII last letter", "ctx-é", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidID(tt.id); got != tt.want {
				t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

func TestParseDepth(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		want        int
		wantPresent bool
		wantErr     bool
	}{
		{"absent", "", 0, false, false},
		{"only spaces", "  ", 0, false, false},
		{"zero", "0", 0, true, false},
		{"three", "3", 3, true, false},
		{"largest", "9999", 9999, true, false},
		{"spaces", " 12\t", 12, true, false},
		{"negative", "-1", 0, true, true},
		{"letters", "abc", 0, true, true},
		{"hex", "0x1", 0, true, true},
		{"too many digits", "10000", 0, true, true},
		{"inner space", "1 2", 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, present, err := ParseDepth(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseDepth(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v is not ErrMalformed", err)
			}
			if got != tt.want || present != tt.wantPresent {
				t.Errorf("ParseDepth(%q) = %d, %v; want %d, %v", tt.in, got, present, tt.want, tt.wantPresent)
			}
		})
	}
}
