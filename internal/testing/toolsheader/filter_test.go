package toolsheader_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/httpauthz"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
	"github.com/extauthz/extauthz/internal/testing/toolsheader"
)

const (
	secret = "toolsheader-test-secret-of-sufficient-length"
	issuer = "https://extauthz.example.com"
	route  = "files"
)

// allTools are the tools the MCP server offers, as the route lists them.
var allTools = []string{"delete_file", "read_file", "write_file"}

const configDoc = `
issuers: [{name: dev, algorithms: [HS256], secret: ` + secret + `}]
lineage: {signing: {key_file: %s, issuer: ` + issuer + `}}
routes:
  - name: ` + route + `
    default: true
    protocol: mcp
    issuers: [dev]
    scopes: [files:read]
    tools_header: {tools: [read_file, write_file, delete_file]}
    rules:
      - {name: writes, methods: [tools/call], names: [write_file, delete_file], scopes: [files:write]}
`

// env is the service behind a forward-auth front end (Traefik's
// convention, body forwarded) in front of a go-sdk MCP server filtering
// its list with toolsheader.FilterTools, the lineage JWK set on a listener
// of its own as the ops listener serves it.
type env struct {
	pl     *check.Pipeline
	key    ed25519.PrivateKey // the lineage key, to forge with
	kid    string
	front  string // the MCP endpoint through the front end
	direct string // the MCP endpoint, bypassing the front end
}

func newEnv(t *testing.T) *env {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "lineage.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	pl := pipelinetest.New(t, fmt.Sprintf(configDoc, keyFile), check.Deps{}, check.Options{})

	ops := http.NewServeMux()
	ops.Handle("GET /.well-known/lineage-jwks.json", pl.Policy().Signer().Handler())
	opsSrv := httptest.NewServer(ops)
	t.Cleanup(opsSrv.Close)

	// The MCP server: what its operator writes.
	keys, err := jwkset.NewDefaultHTTPClientCtx(t.Context(), []string{opsSrv.URL + "/.well-known/lineage-jwks.json"})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v1.0.0"}, nil)
	for _, name := range allTools {
		mcp.AddTool(server, &mcp.Tool{Name: name, Description: name}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name}}}, nil, nil
		})
	}
	server.AddReceivingMiddleware(toolsheader.FilterTools(keys, issuer, route, slog.New(slog.DiscardHandler)))
	mcpSrv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true}))
	t.Cleanup(mcpSrv.Close)

	authz := httptest.NewServer(httpauthz.NewHandler(pl, httpauthz.Options{Convention: httpauthz.Forwarded}))
	t.Cleanup(authz.Close)
	up, _ := url.Parse(mcpSrv.URL)
	fr := httptest.NewServer(&forwardAuth{t: t, authz: authz.URL, upstream: httputil.NewSingleHostReverseProxy(up)})
	t.Cleanup(fr.Close)
	return &env{pl: pl, key: key, kid: pl.Policy().Signer().KeyID(), front: fr.URL + "/mcp", direct: mcpSrv.URL + "/mcp"}
}

// forwardAuth is a forward-auth proxy as Traefik with forwardBody is: it
// asks the service about each request, relays a refusal as it is, and on
// an allow strips the headers the answer names in
// X-Envoy-Auth-Headers-To-Remove and sets those it carries.
type forwardAuth struct {
	t        *testing.T
	authz    string
	upstream http.Handler
}

func (p *forwardAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	ar, _ := http.NewRequestWithContext(r.Context(), r.Method, p.authz, bytes.NewReader(body))
	ar.Header = r.Header.Clone()
	ar.Header.Set("X-Forwarded-Method", r.Method)
	ar.Header.Set("X-Forwarded-Uri", r.URL.RequestURI())
	ar.Header.Set("X-Forwarded-Host", r.Host)
	ar.Header.Set("X-Forwarded-Proto", "http")
	resp, err := http.DefaultClient.Do(ar)
	if err != nil {
		http.Error(w, "authz", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		return
	}
	for name := range strings.SplitSeq(resp.Header.Get(httpauthz.RemoveHeader), ",") {
		r.Header.Del(strings.TrimSpace(name))
	}
	for k, v := range resp.Header {
		switch k {
		case "Content-Length", "Content-Type", "Date", httpauthz.RemoveHeader:
		default:
			r.Header[k] = v
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.upstream.ServeHTTP(w, r)
}

func userToken(t *testing.T, user, scope string) string {
	now := time.Now()
	return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": user, "scope": scope, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
}

// listTools lists the tools through url as a go-sdk client sending token
// (none when empty) and the extra headers.
func listTools(t *testing.T, endpoint, token string, extra http.Header) *mcp.ListToolsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cs, err := testpeers.NewMCPClient(ctx, endpoint, testpeers.NewHTTPClient(token, extra, nil), &testpeers.MCPClientOptions{DisableStandaloneSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func names(res *mcp.ListToolsResult) []string {
	var out []string
	for _, tool := range res.Tools {
		out = append(out, tool.Name)
	}
	slices.Sort(out)
	return out
}

// forge signs a tools token with key (alg EdDSA) naming kid; claims
// override the valid ones (nil deletes).
func forge(t testing.TB, key ed25519.PrivateKey, kid, typ string, claims jwt.MapClaims) string {
	now := time.Now()
	c := jwt.MapClaims{"iss": issuer, "sub": "alice", "aud": route, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "tools": allTools}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	tok.Header["kid"], tok.Header["typ"] = kid, typ
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestThroughForwardAuth: through the front end, each user's go-sdk client
// lists only the tools its scopes allow, whatever tools header it sends
// itself (even one signed with the service's key for everything).
func TestThroughForwardAuth(t *testing.T) {
	e := newEnv(t)
	leaked := e.forgeValid(t)
	tests := []struct {
		name  string
		scope string
		extra http.Header
		want  []string
	}{
		{"reader", "files:read", nil, []string{"read_file"}},
		{"writer", "files:read files:write", nil, allTools},
		{"reader sending a header listing everything", "files:read", http.Header{toolsheader.ToolsHeader: {leaked}}, []string{"read_file"}},
		{"reader sending a user header and a tools header", "files:read", http.Header{toolsheader.ToolsHeader: {leaked}, toolsheader.UserHeader: {"admin"}}, []string{"read_file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := listTools(t, e.front, userToken(t, "alice", tt.scope), tt.extra)
			if got := names(res); !slices.Equal(got, tt.want) {
				t.Errorf("listed %v, want %v", got, tt.want)
			}
			if res.CacheScope != "private" {
				t.Errorf("cacheScope %q: a filtered list is the caller's", res.CacheScope)
			}
		})
	}
}

func (e *env) forgeValid(t *testing.T) string {
	return forge(t, e.key, e.kid, "extauthz-tools+jwt", nil)
}

// TestForgedHeaderRefused: a request reaching the MCP server with a tools
// header the service did not make for it lists nothing; only a token
// signed with the lineage key, of the tools type, for this route and user
// and not expired, lists its tools.
func TestForgedHeaderRefused(t *testing.T) {
	e := newEnv(t)
	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"iss": issuer, "sub": "alice", "aud": route, "exp": time.Now().Add(time.Minute).Unix(), "tools": allTools}).
		SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	// What the service itself set on a request of bob's.
	bobs := e.serviceHeader(t, userToken(t, "bob", "files:read files:write"))

	tests := []struct {
		name   string
		user   string
		header string
		want   []string
	}{
		{"valid (control)", "alice", e.forgeValid(t), allTools},
		{"the service's own header for bob, as bob (control)", "bob", bobs, allTools},
		{"the service's own header for bob, as alice", "alice", bobs, nil},
		{"no header", "alice", "", nil},
		{"garbage", "alice", "forged", nil},
		{"unsigned (alg none)", "alice", unsigned, nil},
		{"another key under the service's kid", "alice", forge(t, otherKey, e.kid, "extauthz-tools+jwt", nil), nil},
		{"a lineage token type", "alice", forge(t, e.key, e.kid, "lineage+jwt", nil), nil},
		{"no type", "alice", forge(t, e.key, e.kid, "", nil), nil},
		{"another route", "alice", forge(t, e.key, e.kid, "extauthz-tools+jwt", jwt.MapClaims{"aud": "admin"}), nil},
		{"another issuer", "alice", forge(t, e.key, e.kid, "extauthz-tools+jwt", jwt.MapClaims{"iss": "https://evil.example.com"}), nil},
		{"expired", "alice", forge(t, e.key, e.kid, "extauthz-tools+jwt", jwt.MapClaims{"exp": time.Now().Add(-time.Minute).Unix()}), nil},
		{"no expiry", "alice", forge(t, e.key, e.kid, "extauthz-tools+jwt", jwt.MapClaims{"exp": nil}), nil},
		{"unknown kid", "alice", forge(t, e.key, "nope", "extauthz-tools+jwt", nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{toolsheader.UserHeader: {tt.user}}
			if tt.header != "" {
				h.Set(toolsheader.ToolsHeader, tt.header)
			}
			if got := names(listTools(t, e.direct, "", h)); !slices.Equal(got, tt.want) {
				t.Errorf("listed %v, want %v", got, tt.want)
			}
		})
	}
}

// serviceHeader is the tools header the service sets on a tools/list of
// the holder of token.
func (e *env) serviceHeader(t *testing.T, token string) string {
	r := httptest.NewRequest("POST", "http://files.example.com/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	v := e.pl.Check(t.Context(), pipelinetest.Request(r, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), false))
	for _, h := range v.Set {
		if h.Name == "x-extauthz-tools" {
			return h.Value
		}
	}
	t.Fatalf("no tools header: %v %s", v.Outcome, v.Description)
	return ""
}
