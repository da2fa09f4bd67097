package adminapi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/types/known/anypb"

	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

const (
	tokenA = "token-a-0123456789abcdef0123456789abcdef"
	tokenB = "token-b-0123456789abcdef0123456789abcdef"
)

func writeTokens(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// tokenAuth is an Authenticator over a token file holding content, with
// the refusals it counted.
func tokenAuth(t *testing.T, content string) (*Authenticator, string, *[]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, content, time.Now())
	var refused []string
	a, err := NewAuthenticator(AuthConfig{TokenFile: path}, AuthOptions{OnRefused: func(r string) { refused = append(refused, r) }})
	if err != nil {
		t.Fatal(err)
	}
	return a, path, &refused
}

func TestAuthenticateBearer(t *testing.T) {
	a, _, refused := tokenAuth(t, tokenA+"\n\n  "+tokenB+"  \n")
	tests := []struct {
		name   string
		values []string
		caller string // "" when refused
		reason string
	}{
		{"the first token", []string{"Bearer " + tokenA}, "token#1", ""},
		{"the second token, the line's spaces trimmed", []string{"Bearer " + tokenB}, "token#2", ""},
		{"the scheme in lower case", []string{"bearer " + tokenA}, "token#1", ""},
		{"no header", nil, "", ReasonNoCredential},
		{"empty value", []string{""}, "", ReasonBadToken},
		{"scheme only", []string{"Bearer"}, "", ReasonBadToken},
		{"scheme and a space", []string{"Bearer "}, "", ReasonBadToken},
		{"two spaces", []string{"Bearer  " + tokenA}, "", ReasonBadToken},
		{"Basic", []string{"Basic " + tokenA}, "", ReasonBadToken},
		{"no scheme", []string{tokenA}, "", ReasonBadToken},
		{"a prefix", []string{"Bearer " + tokenA[:len(tokenA)-1]}, "", ReasonBadToken},
		{"an extension", []string{"Bearer " + tokenA + "x"}, "", ReasonBadToken},
		{"two values", []string{"Bearer " + tokenA, "Bearer " + tokenA}, "", ReasonBadToken},
		{"both tokens joined", []string{"Bearer " + tokenA + "," + tokenB}, "", ReasonBadToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			*refused = nil
			c, err := a.Authenticate(context.Background(), nil, tc.values, "127.0.0.1:1")
			if tc.caller != "" {
				if err != nil || c.Identity != tc.caller {
					t.Fatalf("caller %q, %v; want %q", c.Identity, err, tc.caller)
				}
				return
			}
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != tc.reason || len(*refused) != 1 || (*refused)[0] != tc.reason {
				t.Fatalf("err %v, counted %v; want a refusal for %s", err, *refused, tc.reason)
			}
			if strings.Contains(err.Error(), tokenA) {
				t.Fatal("the refusal repeats the token")
			}
		})
	}
}

func TestTokenFileChanges(t *testing.T) {
	a, path, _ := tokenAuth(t, tokenA+"\n")
	call := func(tok string) error {
		_, err := a.Authenticate(context.Background(), nil, []string{"Bearer " + tok}, "")
		return err
	}
	if call(tokenA) != nil || call(tokenB) == nil {
		t.Fatal("before the change")
	}
	base := time.Now().Add(time.Minute)
	steps := []struct {
		name       string
		content    string // "" removes the file
		okA, okB   bool
		wantBroken bool
	}{
		{name: "rotated to B", content: tokenB + "\n", okB: true},
		{name: "both during a rotation", content: tokenA + "\n" + tokenB + "\n", okA: true, okB: true},
		{name: "a token too short: nobody", content: tokenA + "\nshort\n", wantBroken: true},
		{name: "fixed", content: tokenA + "\n", okA: true},
		{name: "empty: nobody", content: "\n", wantBroken: true},
		{name: "back", content: tokenA + "\n", okA: true},
		{name: "removed: nobody", content: "", wantBroken: true},
		{name: "restored", content: tokenB + "\n", okB: true},
	}
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.content == "" {
				os.Remove(path)
			} else {
				writeTokens(t, path, st.content, base.Add(time.Duration(i)*time.Second))
			}
			errA, errB := call(tokenA), call(tokenB)
			if (errA == nil) != st.okA || (errB == nil) != st.okB {
				t.Fatalf("token A accepted %v, token B %v; want %v, %v", errA == nil, errB == nil, st.okA, st.okB)
			}
			var r *Refusal
			if st.wantBroken && (!errors.As(errA, &r) || r.Reason != ReasonTokenFile) {
				t.Fatalf("refusal %v, want %s", errA, ReasonTokenFile)
			}
		})
	}
}

func TestNewAuthenticatorRefuses(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("secret-but-short\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n\n"), 0o600)
	tests := []struct {
		name string
		c    AuthConfig
		want string
	}{
		{"a short token", AuthConfig{TokenFile: short}, "line 1: a token must be at least 32 bytes"},
		{"no token", AuthConfig{TokenFile: empty}, "no token"},
		{"no file", AuthConfig{TokenFile: filepath.Join(dir, "nope")}, "admin token file"},
		{"a blank identity", AuthConfig{AllowedClients: []string{" "}}, "not an identity"},
		{"an identity with spaces", AuthConfig{AllowedClients: []string{" spiffe://a/b"}}, "not an identity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewAuthenticator(tc.c, AuthOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-but-short") {
				t.Fatal("the error shows the file's content")
			}
		})
	}
}

func TestUnauthenticatedWithoutConfig(t *testing.T) {
	a, err := NewAuthenticator(AuthConfig{}, AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Authenticate(context.Background(), nil, nil, "127.0.0.1:5")
	if err != nil || c.Identity != "unauthenticated" || a.Enabled() {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestExposed(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9092": false, "127.0.0.2:9092": false, "[::1]:9092": false, "localhost:9092": false, "LOCALHOST:1": false,
		"0.0.0.0:9092": true, "[::]:9092": true, ":9092": true, "10.0.0.5:9092": true, "admin.example:9092": true,
		"[::ffff:127.0.0.1]:1": false, "no-port": true,
	} {
		if got := Exposed(addr); got != want {
			t.Errorf("Exposed(%q) = %v, want %v", addr, got, want)
		}
	}
}

func TestAuditTarget(t *testing.T) {
	packed, err := anypb.New(&authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{Headers: map[string]string{"authorization": "Bearer " + tokenA}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  any
		want string
	}{
		{"a session", &adminv1.InvalidateSessionRequest{SessionId: "s-1"}, `session_id="s-1"`},
		{"a subject with a quote", &adminv1.RevokeSubjectRequest{Subject: `a"b`}, `subject="a\"b"`},
		{"explain: the request (and its token) is left out", &adminv1.ExplainRequest{CheckRequest: packed}, ``},
		{"stats", &adminv1.StatsRequest{}, ``},
		{"not a message", "x", ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := target(tc.req); got != tc.want {
				t.Fatalf("target = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzBearer: exactly "Bearer " (any case) followed by the token is let in.
func FuzzBearer(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "tokens")
	if err := os.WriteFile(path, []byte(tokenA+"\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	a, err := NewAuthenticator(AuthConfig{TokenFile: path}, AuthOptions{})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"Bearer " + tokenA, "bEaReR " + tokenA, "Bearer " + tokenA + " ", "Bearer\t" + tokenA, "", "Bearer"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		_, err := a.Authenticate(context.Background(), nil, []string{v}, "")
		want := len(v) == len("Bearer ")+len(tokenA) && strings.EqualFold(v[:7], "Bearer ") && v[7:] == tokenA
		if (err == nil) != want {
			t.Fatalf("Authenticate(%q) = %v", v, err)
		}
	})
}
