package exchange_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// actorFile holds a service-account-like token, replaced the way a
// Kubernetes projected volume does: a new file renamed over the old one.
type actorFile struct {
	t    *testing.T
	c    *clock
	path string
}

func newActorFile(t *testing.T, c *clock) *actorFile {
	return &actorFile{t: t, c: c, path: filepath.Join(t.TempDir(), "token")}
}

func (a *actorFile) write(sub, jti string) string {
	a.t.Helper()
	tok := subjectKey().Sign(a.t, jwt.MapClaims{"iss": "https://kubernetes.default.svc", "sub": sub, "jti": jti, "exp": a.c.Now().Add(time.Hour).Unix()})
	tmp := a.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		a.t.Fatal(err)
	}
	if err := os.Rename(tmp, a.path); err != nil {
		a.t.Fatal(err)
	}
	return tok
}

// writeActor writes a service-account-like actor token to path.
func writeActor(t testing.TB, c *clock, path string) {
	t.Helper()
	tok := subjectKey().Sign(t, jwt.MapClaims{"iss": "https://kubernetes.default.svc", "sub": "gateway", "exp": c.Now().Add(time.Hour).Unix()})
	if err := os.WriteFile(path, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestActorToken(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	af := newActorFile(t, c)
	first := af.write("system:serviceaccount:agents:gateway", "1")
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.ActorTokenFile = af.path })
	ctx := context.Background()
	// The caller is itself an agent acting for alice.
	subject := subjectToken(t, c, "alice", jwt.MapClaims{"act": map[string]any{"sub": "agent-a"}})

	exchangeAs := func(session string) jwt.MapClaims {
		t.Helper()
		tok, err := e.Exchange(ctx, subject, docsAPI, exchange.Owner{Subject: "alice", Session: session})
		if err != nil {
			t.Fatal(err)
		}
		claims, err := sts.Verify(tok.Value)
		if err != nil {
			t.Fatal(err)
		}
		return claims
	}

	claims := exchangeAs("s1")
	want := map[string]any{
		"sub": "system:serviceaccount:agents:gateway",
		"iss": "https://kubernetes.default.svc",
		"act": map[string]any{"sub": "agent-a"},
	}
	if !reflect.DeepEqual(claims["act"], want) {
		t.Errorf("act = %v, want %v", claims["act"], want)
	}
	last, _ := sts.Last()
	if last.Form.Get("actor_token") != first || last.Form.Get("actor_token_type") != exchange.TokenTypeJWT {
		t.Errorf("actor_token sent = %q (type %q), want the file's token without its newline", last.Form.Get("actor_token"), last.Form.Get("actor_token_type"))
	}

	t.Run("rotated for the same identity keeps cached tokens", func(t *testing.T) {
		rotated := af.write("system:serviceaccount:agents:gateway", "2")
		c.Advance(time.Second)
		calls := sts.Calls()
		exchangeAs("s1")
		if sts.Calls() != calls {
			t.Error("rotation of the same identity caused an exchange")
		}
		exchangeAs("s-new")
		if last, _ := sts.Last(); last.Form.Get("actor_token") != rotated {
			t.Error("a new exchange did not send the rotated actor token")
		}
	})

	t.Run("replaced by another identity is seen within a second", func(t *testing.T) {
		af.write("system:serviceaccount:agents:other", "3")
		calls := sts.Calls()
		exchangeAs("s1")
		if sts.Calls() != calls {
			t.Error("the file was looked at again within a second")
		}
		c.Advance(time.Second)
		claims := exchangeAs("s1")
		if sts.Calls() != calls+1 {
			t.Fatalf("STS calls = %d, want %d", sts.Calls(), calls+1)
		}
		if act, _ := claims["act"].(map[string]any); act["sub"] != "system:serviceaccount:agents:other" {
			t.Errorf("act = %v", claims["act"])
		}
	})

	t.Run("file gone keeps the last token", func(t *testing.T) {
		if err := os.Remove(af.path); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		claims := exchangeAs("s-after-removal")
		if act, _ := claims["act"].(map[string]any); act["sub"] != "system:serviceaccount:agents:other" {
			t.Errorf("act = %v", claims["act"])
		}
	})
}

func TestActorMayAct(t *testing.T) {
	c := newClock()
	sts := newSTS(t, c, ststest.Options{})
	af := newActorFile(t, c)
	af.write("gateway", "1")
	e := newExchanger(t, c, sts, func(cfg *exchange.Config) { cfg.ActorTokenFile = af.path })
	tests := []struct {
		name   string
		mayAct map[string]any
		kind   exchange.Kind
	}{
		{"allowed", map[string]any{"sub": "gateway"}, 0},
		{"someone else", map[string]any{"sub": "other-gateway"}, exchange.Unauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			subject := subjectToken(t, c, "alice", jwt.MapClaims{"may_act": tc.mayAct})
			_, err := e.Exchange(context.Background(), subject, docsAPI, alice)
			if got := exchange.KindOf(err); got != tc.kind {
				t.Errorf("kind = %v (%v), want %v", got, err, tc.kind)
			}
		})
	}
}

func TestActorFileMissingAtStart(t *testing.T) {
	tests := []struct {
		name    string
		content *string
	}{
		{"missing", nil},
		{"empty", new(string)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "token")
			if tc.content != nil {
				if err := os.WriteFile(p, []byte(*tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := exchange.New(exchange.Config{TokenEndpoint: "https://sts.example/token", ActorTokenFile: p}, exchange.Options{})
			if err == nil {
				t.Fatal("New accepted an unusable actor token file")
			}
		})
	}
}
