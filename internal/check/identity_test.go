package check

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestConsentIsPerIssuer: a consent one issuer's alice gave is not the
// other issuer's alice's, and revoking one leaves the other.
func TestConsentIsPerIssuer(t *testing.T) {
	pl := consentPipeline(t, true)
	mint := func(iss string) string {
		return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": iss, "sub": "alice", "iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	aAlice, bAlice := mint("https://a.example.com"), mint("https://b.example.com")
	call := func(tok string) Verdict { return callCalendar(pl, tok) }
	if done := giveConsent(t, pl, call(aAlice)); done.Subject != "a:alice" {
		t.Fatalf("completion: %+v", done)
	}
	if v := call(aAlice); v.Outcome != Allowed {
		t.Fatalf("a's alice after consent: %v (%s)", v.Outcome, v.Description)
	}
	if v := call(bAlice); v.Outcome != AuthorizationRequired {
		t.Fatalf("b's alice used a's consent: %v", v.Outcome)
	}

	user, err := pl.Policy().User("b", "alice")
	if err != nil {
		t.Fatal(err)
	}
	pl.RevokeSubject(context.Background(), user)
	if v := call(bAlice); v.Outcome != InvalidToken {
		t.Fatalf("b's alice after her revocation: %v", v.Outcome)
	}
	if v := call(aAlice); v.Outcome != Allowed {
		t.Fatalf("revoking b's alice touched a's: %v (%s)", v.Outcome, v.Description)
	}
}

// TestConsentEndsWithRevocation: revoking a user drops the consents she
// gave, as the shared tier drops them (they are indexed by her): a token
// issued after the revocation must authorize again before a consent tool.
func TestConsentEndsWithRevocation(t *testing.T) {
	pl := consentPipeline(t, false)
	mint := func(iat time.Time) string {
		return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": "https://a.example.com", "sub": "alice", "iat": iat.Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	call := func(tok string) Verdict { return callCalendar(pl, tok) }
	old := mint(time.Now().Add(-time.Minute))
	giveConsent(t, pl, call(old))
	if v := call(old); v.Outcome != Allowed {
		t.Fatalf("after consent: %v (%s)", v.Outcome, v.Description)
	}
	user, err := pl.Policy().User("a", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pl.RevokeSubject(context.Background(), user); err != nil {
		t.Fatal(err)
	}
	if v := call(old); v.Outcome != InvalidToken {
		t.Fatalf("the revoked token: %v", v.Outcome)
	}
	if v := call(mint(time.Now().Add(2 * time.Second))); v.Outcome != AuthorizationRequired {
		t.Fatalf("a token issued after the revocation used the consent given before it: %v (%s)", v.Outcome, v.Description)
	}
}

// consentDoc is a configuration of issuers a (and b when both is set) on
// one MCP route whose calendar tools need the user's consent, exchanged at
// the STS at stsURL.
func consentDoc(stsURL string, both bool) string {
	issuers, names := "  - {name: a, issuer: https://a.example.com, algorithms: [HS256], secret: %[1]s}\n", "[a]"
	if both {
		issuers += "  - {name: b, issuer: https://b.example.com, algorithms: [HS256], secret: %[1]s}\n"
		names = "[a, b]"
	}
	return fmt.Sprintf(`
issuers:
`+issuers+`exchanges:
  - {name: sts, token_endpoint: %[2]s, client_auth: {method: client_secret_post, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: `+names+`
    exchange:
      sts: sts
      audience: [https://backend.example.com]
      methods: [tools/call]
      authorize_url: https://idp.example.com/authorize
      tools: [{names: ["calendar_*"], audience: [https://calendar.example.com], consent: true}]
`, secret, stsURL)
}

// consentPipeline is a pipeline over consentDoc with its STS.
func consentPipeline(t *testing.T, both bool) *Pipeline {
	t.Helper()
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: "s"}}})
	return newPipeline(t, consentDoc(sts.TokenURL, both), Deps{HTTPClient: sts.Client(), Getenv: func(string) string { return "s" }}, Options{})
}

// callCalendar is tok's tools/call of calendar_add, a consent tool.
func callCalendar(pl *Pipeline, tok string) Verdict {
	req := agentReq(Headers{"authorization": "Bearer " + tok, "content-type": "application/json"})
	req.Body = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calendar_add"}}`)
	return pl.Check(context.Background(), req)
}

// giveConsent completes the elicitation v (an AuthorizationRequired
// answer) asks the user for, with the state its URL carries, as the
// authorization server's callback does.
func giveConsent(t *testing.T, pl *Pipeline, v Verdict) elicit.Pending {
	t.Helper()
	id, state := pendingOf(t, v)
	if id == "" {
		t.Fatalf("no elicitation id in %s", v.Body)
	}
	done, err := pl.CompleteElicitation(context.Background(), id, state)
	if err != nil {
		t.Fatalf("completion: %v", err)
	}
	return done
}

// TestReloadRenamingUsersRefused: a user is the issuer's namespace followed
// by the subject, and revocations, session bindings and consents survive a
// reload keyed by it. A policy that gives an issuer the running one has
// another namespace (adding or removing an issuer flips the single-issuer
// default, or subject_prefix is edited) is refused, and the running policy
// keeps serving: corp's revoked alice stays revoked, and nobody inherits
// her session. A reload that keeps every name is installed, and the
// revocation still holds under it.
func TestReloadRenamingUsersRefused(t *testing.T) {
	const corp = `  - {name: corp, issuer: https://corp.example.com, algorithms: [HS256], secret: ` + secret + `%s}
`
	const partner = `  - {name: partner, issuer: https://partner.example.com, algorithms: [HS256], secret: ` + secret + `-partner}
`
	doc := func(issuers ...string) string {
		return "issuers:\n" + fmt.Sprint(strings.Join(issuers, "")) +
			"routes:\n  - {name: r, default: true, protocol: mcp, issuers: [corp]}\n"
	}
	one := doc(fmt.Sprintf(corp, ""))
	two := doc(fmt.Sprintf(corp, ""), partner)
	tests := []struct {
		name    string
		from    string
		to      string
		refused string // "" when installed
	}{
		{"an issuer added", one, two, `issuers (corp): the subject namespace would change from none to "corp:"`},
		{"an issuer removed", two, one, `issuers (corp): the subject namespace would change from "corp:" to none`},
		{"subject_prefix edited", one, doc(fmt.Sprintf(corp, ", subject_prefix: corp/")), `from none to "corp/"`},
		{"an issuer added, the first one's names kept", one, doc(fmt.Sprintf(corp, `, subject_prefix: ""`), partner), ""},
		{"an issuer removed, the remaining one's names kept", two, doc(fmt.Sprintf(corp, ", subject_prefix: \"corp:\"")), ""},
		{"nothing renamed", two, two, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			pl := newPipeline(t, tt.from, Deps{Now: clk.Now}, Options{Now: clk.Now})
			mint := func(sub string) string {
				return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": "https://corp.example.com", "sub": sub, "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
			}
			call := func(tok string) Verdict {
				r := agentReq(Headers{"authorization": "Bearer " + tok, "mcp-session-id": "sess-of-alice", "content-type": "application/json"})
				r.Body = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
				return pl.Check(context.Background(), r)
			}
			alice, bob := mint("alice"), mint("bob")
			if v := call(alice); v.Outcome != Allowed {
				t.Fatalf("alice: %v %s", v.Outcome, v.Description)
			}
			user, err := pl.Policy().User("corp", "alice")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pl.RevokeSubject(context.Background(), user); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			before := pl.Policy()
			next := compileDoc(t, tt.to, Deps{Now: clk.Now})
			old, err := pl.Swap(next)
			switch {
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("Swap: %v, want it refused: %q", err, tt.refused)
			case tt.refused != "":
				next.Close()
				if pl.Policy() != before {
					t.Fatal("a refused policy was installed")
				}
			case err != nil:
				t.Fatalf("Swap: %v", err)
			default:
				old.Close()
				t.Cleanup(next.Close)
			}
			if v := call(alice); v.Outcome != InvalidToken {
				t.Errorf("corp's revoked alice after the reload: %v (%s)", v.Outcome, v.Description)
			}
			// Another corp user cannot take alice's session either way.
			if v := call(bob); v.Outcome == Allowed {
				t.Errorf("bob owns alice's session after the reload")
			}
			if v := call(mint(user)); v.Outcome == Allowed {
				t.Errorf("sub %q owns alice's session after the reload", user)
			}
		})
	}
}
