package lineage

import (
	"slices"
	"strings"
	"testing"
)

func TestPresets(t *testing.T) {
	tests := []struct {
		name  string
		names Names
		want  Names
	}{
		{
			name:  "default",
			names: DefaultNames(),
			want: Names{
				User: "x-user-id", Session: "x-session-id",
				Root: "x-root-context-id", Parent: "x-parent-context-id",
				Depth: "x-lineage-depth", ActorChain: "x-actor-chain", Signed: "x-lineage-token",
			},
		},
		{
			name:  "kagent",
			names: KagentNames(),
			want: Names{
				User: "x-user-id", Session: "x-session-id",
				Root: "x-kagent-root-context-id", Parent: "x-kagent-parent-context-id",
				Depth: "x-lineage-depth", ActorChain: "x-actor-chain", Signed: "x-lineage-token",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.names != tt.want {
				t.Errorf("names = %+v, want %+v", tt.names, tt.want)
			}
			if err := tt.names.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestNamesValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Names)
		wantErr string // "" for valid
	}{
		{name: "optional headers off", edit: func(n *Names) { n.Depth, n.ActorChain, n.Signed, n.User, n.Session = "", "", "", "", "" }},
		{name: "root required", edit: func(n *Names) { n.Root = "" }, wantErr: "for root is required"},
		{name: "parent required", edit: func(n *Names) { n.Parent = "" }, wantErr: "for parent is required"},
		{name: "upper case", edit: func(n *Names) { n.Root = "X-Root" }, wantErr: "not a lower-case header name"},
		{name: "space", edit: func(n *Names) { n.Depth = "x depth" }, wantErr: "not a lower-case header name"},
		{name: "pseudo header", edit: func(n *Names) { n.Parent = ":path" }, wantErr: "not a lower-case header name"},
		{name: "same name twice", edit: func(n *Names) { n.Parent = n.Root }, wantErr: "used for both root and parent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := DefaultNames()
			tt.edit(&n)
			err := n.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestNamesOwned(t *testing.T) {
	n := KagentNames()
	n.Signed = ""
	want := []string{"x-user-id", "x-session-id", "x-kagent-root-context-id", "x-kagent-parent-context-id", "x-lineage-depth", "x-actor-chain"}
	if got := n.Owned(); !slices.Equal(got, want) {
		t.Errorf("Owned() = %q, want %q", got, want)
	}
}

func TestNamesInbound(t *testing.T) {
	headers := map[string]string{
		"x-kagent-root-context-id":   "R",
		"x-kagent-parent-context-id": "P",
		"x-root-context-id":          "other-root",
		"x-lineage-depth":            "2",
		"x-actor-chain":              "a,b",
		"x-lineage-token":            "tok",
		"x-user-id":                  "forged",
	}
	tests := []struct {
		name  string
		names Names
		want  Inbound
	}{
		{"kagent", KagentNames(), Inbound{Root: "R", Parent: "P", Depth: "2", ActorChain: "a,b", Signed: "tok"}},
		{"default", DefaultNames(), Inbound{Root: "other-root", Depth: "2", ActorChain: "a,b", Signed: "tok"}},
		{"headers off are not read", Names{Root: "x-root-context-id", Parent: "x-parent-context-id"}, Inbound{Root: "other-root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.names.Inbound(headers); got != tt.want {
				t.Errorf("Inbound() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
