package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// sdks are the TypeScript SDK generations the client script speaks.
var sdks = []string{"v1", "v2"}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestForwardAuth drives each documented front end (nginx, nginx with njs,
// Caddy) with the Go and TypeScript SDK clients and raw requests: what a
// client gets must be what it would get behind Envoy, and nothing the
// service refuses may reach the MCP server.
func TestForwardAuth(t *testing.T) {
	for _, fe := range frontEnds {
		t.Run(fe.name, func(t *testing.T) {
			e := startFrontEnd(t, fe)
			t.Run("allowed call carries the token's identity, never a forged one", e.testAllowed)
			t.Run("missing token: the challenge and metadata keep the port", e.testMissingToken)
			t.Run("insufficient scope: 403 challenge, the SDK steps up", e.testInsufficientScope)
			t.Run("errors arrive as the service answered them", e.testErrors)
			t.Run("rules decide on what the upstream executes", e.testRules)
			t.Run("exchange routes never pass a call without the exchanged token", e.testExchange)
			t.Run("URL elicitation", e.testElicitation)
			t.Run("a session deleted with 405 stays its owner's", e.testDelete405)
			t.Run("the signed tools header reaches the server, a client's never", e.testToolsHeader)
			t.Run("a client's dry-run and kagent lineage headers never reach the server", e.testOwnedHeaders)
			t.Run("the client's address is the one the proxy saw", e.testClientAddress)
			t.Run("a credential cookie never reaches the server, other cookies do", e.testCredentialCookie)
			t.Run("a request line and a Host naming different hosts never pass", e.testTwoHosts)
			t.Run("a DPoP-bound token passes with the SDK's proofs, never as a bearer token", e.testDPoP)
			t.Run("underscore spellings of the service's headers never reach the server", e.testUnderscoreNames)
			t.Run("a body in a transfer coding other than chunked never reaches the service or the server", e.testTransferCodings)
		})
	}
}

// TestNjsBodyInATemporaryFile: nginx writes a body larger than the
// location's client_body_buffer_size to a temporary file, where njs cannot
// read it (r.requestText throws; older versions read nothing, and a chunked
// body has no Content-Length to tell). The script answers 413 without
// asking the service, whether the request says how long its body is or
// comes chunked: a check without the body would let the upstream read a
// call the service never saw, and an exception is a 500 that says nothing.
func TestNjsBodyInATemporaryFile(t *testing.T) {
	e := startFrontEnd(t, frontEnd{name: "nginx-njs", convention: "nginx", body: true, bodyBuffer: "1k"})
	tok := e.token(t, nil)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("a", 4096) + `"}}}`
	for _, tc := range []struct {
		name    string
		chunked bool
	}{
		{"a body with its length", false},
		{"a chunked body", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(call)
			if tc.chunked {
				body = io.MultiReader(body) // no length: the client sends it chunked
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.base+"/mcp", body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+tok)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusRequestEntityTooLarge || len(e.toolCalls()) != 0 {
				t.Fatalf("status %d, want 413; the upstream ran %d tools", res.StatusCode, len(e.toolCalls()))
			}
		})
	}
}

func (e *feEnv) testAllowed(t *testing.T) {
	tok := e.token(t, nil)
	forged := http.Header{"X-User-Id": {"mallory"}, "X-Actor-Chain": {"forged"}, "X-Session-Id": {"evil"}}
	ctx := testContext(t)
	cs, err := testpeers.NewMCPClient(ctx, e.base+"/mcp", testpeers.NewHTTPClient(tok, forged, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	seen, err := testpeers.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	// Absent means absent: not empty, not Caddy's literal placeholder. The
	// token names no session: the session is the bound MCP session, if any.
	wantHeaders(t, "Go SDK's tool call", seen, map[string]string{"X-User-Id": "alice", "X-Session-Id": cs.ID(), "X-Actor-Chain": "", "X-Parent-Context-Id": ""})

	for _, sdk := range sdks {
		res := nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + "/mcp", "token": tok, "scenario": "call", "tool": "whoami"}, nil)
		last := res[len(res)-1]
		if !last.OK {
			t.Fatalf("TypeScript SDK %s: %+v", sdk, last)
		}
		o, err := testpeers.ParseObservation(last.Text)
		if err != nil {
			t.Fatal(err)
		}
		wantHeaders(t, "TypeScript SDK "+sdk+"'s tool call", o, map[string]string{"X-User-Id": "alice", "X-Actor-Chain": ""})
	}
}

func (e *feEnv) testMissingToken(t *testing.T) {
	before := len(e.toolCalls())
	metadataURL := e.base + "/.well-known/oauth-protected-resource/mcp"
	// A client's forwarding headers do not move the challenge.
	spoof := http.Header{"X-Forwarded-Port": {"6666"}, "X-Forwarded-Host": {"evil.example.com"}}
	status, hdr, body := rawMCP(t, e.base+"/mcp", "", initializeBody, spoof)
	if status != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401: %s", status, body)
	}
	if ch := hdr.Values("Www-Authenticate"); len(ch) != 1 || !strings.Contains(ch[0], `resource_metadata="`+metadataURL+`"`) {
		t.Errorf("challenge %q, want one naming %s", ch, metadataURL)
	}
	if got := decodeRPCError(t, body); got.Error.Data.Error != "missing_token" {
		t.Errorf("body %s", body)
	}
	if e.fe.body && !strings.Contains(body, `"id":1`) {
		t.Errorf("with the body the denial echoes the request id: %s", body)
	}

	res, err := http.Get(metadataURL)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(doc, &md); err != nil || res.StatusCode != 200 {
		t.Fatalf("metadata: %d %s", res.StatusCode, doc)
	}
	if md.Resource != e.base+"/mcp" || !slices.Equal(md.AuthorizationServers, []string{e.issuer}) {
		t.Errorf("metadata %s", doc)
	}
	for _, h := range []string{"X-Envoy-Auth-Headers-To-Remove", "X-Extauthz-Answer"} {
		if v := res.Header.Get(h); v != "" {
			t.Errorf("metadata response leaks %s: %q", h, v)
		}
	}

	// The SDKs' own discovery: from the challenge to the authorization
	// server, for this resource (with its port).
	for _, sdk := range sdks {
		out := nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + "/mcp", "scenario": "discover"}, nil)
		last := out[len(out)-1]
		u, err := url.Parse(last.AuthorizationURL)
		if err != nil || last.AuthorizationURL == "" {
			t.Fatalf("TypeScript SDK %s did not reach the authorization server: %+v", sdk, last)
		}
		if got := u.Scheme + "://" + u.Host + u.Path; got != e.issuer+"/authorize" {
			t.Errorf("TypeScript SDK %s went to %s", sdk, got)
		}
		if got := u.Query().Get("resource"); got != e.base+"/mcp" {
			t.Errorf("TypeScript SDK %s asked for resource %q, want %q", sdk, got, e.base+"/mcp")
		}
	}
	if n := len(e.toolCalls()) - before; n != 0 {
		t.Errorf("%d tool calls reached the server", n)
	}
}

func (e *feEnv) testInsufficientScope(t *testing.T) {
	tok := e.token(t, nil) // files:read only
	status, hdr, body := rawMCP(t, e.base+"/scoped", tok, initializeBody, nil)
	if status != http.StatusForbidden {
		t.Fatalf("status %d, want 403: %s", status, body)
	}
	ch := hdr.Values("Www-Authenticate")
	if len(ch) != 1 || !strings.Contains(ch[0], `error="insufficient_scope"`) || !strings.Contains(ch[0], `scope="files:write"`) ||
		!strings.Contains(ch[0], `resource_metadata="`+e.base+`/.well-known/oauth-protected-resource/scoped"`) {
		t.Errorf("challenge %q", ch)
	}
	// The client's query never names the route (Caddy keeps it on the
	// check URL unless told otherwise): /scoped stays scoped.
	status, _, body = rawMCP(t, e.base+"/scoped?route=open", tok, initializeBody, nil)
	if status != http.StatusForbidden {
		t.Errorf("route named in the query: status %d, want 403: %s", status, body)
	}
	for _, sdk := range sdks {
		out := nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + "/scoped", "token": tok, "scenario": "discover"}, nil)
		last := out[len(out)-1]
		u, err := url.Parse(last.AuthorizationURL)
		if err != nil || last.AuthorizationURL == "" {
			t.Fatalf("TypeScript SDK %s did not step up: %+v", sdk, last)
		}
		if scope := u.Query().Get("scope"); !slices.Contains(strings.Fields(scope), "files:write") {
			t.Errorf("TypeScript SDK %s stepped up to scope %q, want files:write", sdk, scope)
		}
	}
}

// testClientAddress: a rule on request.source.address sees the address the
// proxy took the request from, never the client's own X-Forwarded-For (nginx
// passes it on to the auth subrequest as it is unless told otherwise).
func (e *feEnv) testClientAddress(t *testing.T) {
	tok := e.token(t, nil)
	for _, xff := range [][]string{nil, {"192.0.2.1"}, {"198.51.100.7, 192.0.2.1"}, {"not-an-address"}} {
		hdr := http.Header{"Mcp-Method": {"initialize"}}
		if xff != nil {
			hdr["X-Forwarded-For"] = xff
		}
		status, _, body := rawMCP(t, e.base+"/addressed", tok, initializeBody, hdr)
		if status != http.StatusForbidden {
			t.Errorf("X-Forwarded-For %q: status %d, want 403: %s", xff, status, body)
		}
	}
}

// testTwoHosts: nginx chooses its server by the host of a request line in
// absolute form, while the check and the upstream read the Host header; the
// request must not reach the upstream.
func (e *feEnv) testTwoHosts(t *testing.T) {
	tok := e.token(t, nil)
	u, err := url.Parse(e.base)
	if err != nil {
		t.Fatal(err)
	}
	status, body := rawHTTP(t, u.Host, "POST http://other.e2e.test/mcp HTTP/1.1\r\nHost: "+u.Host+"\r\nAuthorization: Bearer "+tok+
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n"+
		"Content-Length: "+strconv.Itoa(len(initializeBody))+"\r\n\r\n"+initializeBody)
	if strings.Contains(body, "serverInfo") {
		t.Fatalf("the upstream answered: %d %s", status, body)
	}
}

// rawHTTP writes request, as it is, on a new connection to addr and
// returns the answer's status and body: for requests net/http would not
// send.
func rawHTTP(t *testing.T, addr, request string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// testTransferCodings: a body in a transfer coding other than chunked
// alone (gzip, chunked; chunked twice) is one the service and the server
// could read differently: the service is asked with the bytes the proxy
// decoded, and a server that undoes the gzip reads another message. Each
// proxy refuses such a request itself (501) before any check, so neither
// the service nor the server reads it; the same message chunked alone
// passes.
func (e *feEnv) testTransferCodings(t *testing.T) {
	tok := e.token(t, nil)
	u, err := url.Parse(e.base)
	if err != nil {
		t.Fatal(err)
	}
	request := func(te string) string {
		return "POST /mcp HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + tok +
			"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\n" +
			"Transfer-Encoding: " + te + "\r\n\r\n" + strconv.FormatInt(int64(len(initializeBody)), 16) + "\r\n" + initializeBody + "\r\n0\r\n\r\n"
	}
	for _, te := range []string{"gzip, chunked", "deflate, chunked", "identity, chunked", "chunked, chunked", "gzip"} {
		t.Run(te, func(t *testing.T) {
			status, body := rawHTTP(t, u.Host, request(te))
			if status != http.StatusNotImplemented || strings.Contains(body, "serverInfo") {
				t.Errorf("status %d, want the proxy's 501: %s", status, body)
			}
		})
	}
	t.Run("chunked alone", func(t *testing.T) {
		if status, body := rawHTTP(t, u.Host, request("chunked")); status != http.StatusOK || !strings.Contains(body, "serverInfo") {
			t.Fatalf("status %d, want the server's answer: %s", status, body)
		}
	})
}

func (e *feEnv) testErrors(t *testing.T) {
	tok := e.token(t, nil)
	// A request the service refuses itself: nginx would make it a 500.
	status, _, body := rawMCP(t, e.base+"/mcp/%2e%2e/mcp", tok, initializeBody, nil)
	if status != http.StatusBadRequest || !strings.Contains(body, `"invalid_request"`) {
		t.Errorf("dot segments: %d %s, want the service's 400", status, body)
	}
	// The token service down: 503 with Retry-After and a JSON-RPC error.
	e.sts.SetFault(failure503)
	defer e.sts.SetFault(noFault)
	bob := e.token(t, jwt.MapClaims{"sub": "bob"})
	status, hdr, body := rawMCP(t, e.base+"/exchange", bob, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"whoami"}}`, nil)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Errorf("STS down: %d Retry-After %q: %s", status, hdr.Get("Retry-After"), body)
	}
	if got := decodeRPCError(t, body); got.Error.Data.Error != "temporarily_unavailable" {
		t.Errorf("body %s", body)
	}
}

func (e *feEnv) testRules(t *testing.T) {
	tok := e.token(t, nil)
	ctx := testContext(t)
	deleted := func() int {
		n := 0
		for _, c := range e.toolCalls() {
			if c.Tool == testpeers.ToolDeleteFile {
				n++
			}
		}
		return n
	}
	// A live session of the MCP server, opened on the route without rules.
	cs, err := testpeers.NewMCPClient(ctx, e.base+"/mcp", testpeers.NewHTTPClient(tok, nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	session := http.Header{"Mcp-Session-Id": {cs.ID()}, "Mcp-Protocol-Version": {testpeers.MCPVersion20250618}}
	deleteCall := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/x"}}}`

	// Control: in that session, where no rule applies, the call runs.
	before := deleted()
	if status, _, body := rawMCP(t, e.base+"/mcp", tok, deleteCall, session); status != 200 || deleted() != before+1 {
		t.Fatalf("control call: %d %s; delete_file ran %d times", status, body, deleted()-before)
	}

	before = deleted()
	lying := session.Clone()
	lying["Mcp-Method"] = []string{"tools/call"}
	lying["Mcp-Name"] = []string{"echo"}
	status, _, body := rawMCP(t, e.base+"/rules", tok, deleteCall, lying)
	if status != http.StatusBadRequest {
		t.Errorf("lying Mcp-Name: status %d, want 400: %s", status, body)
	}
	wantCode := -32600 // headers only: not enough to allow
	if e.fe.body {
		wantCode = -32020 // the header disagrees with the body
	}
	if got := decodeRPCError(t, body); got.Error.Code != wantCode {
		t.Errorf("lying Mcp-Name: code %d, want %d: %s", got.Error.Code, wantCode, body)
	}
	honest := session.Clone()
	honest["Mcp-Method"] = []string{"tools/call"}
	honest["Mcp-Name"] = []string{"delete_file"}
	if status, _, body := rawMCP(t, e.base+"/rules", tok, deleteCall, honest); status != http.StatusForbidden {
		t.Errorf("denied tool: status %d, want 403: %s", status, body)
	}
	if n := deleted() - before; n != 0 {
		t.Errorf("delete_file ran %d times on the route that denies it", n)
	}

	// Clients that name their calls only in the body (the v1 TypeScript
	// SDK, the Go SDK) use a route with rules when the body is sent.
	out := nodeClient(t, map[string]any{"sdk": "v1", "url": e.base + "/rules", "token": tok, "scenario": "call", "tool": "echo", "arguments": map[string]string{"text": "hi"}}, nil)
	last := out[len(out)-1]
	if e.fe.body {
		if !last.OK || last.Text != "hi" {
			t.Errorf("TypeScript SDK v1 on a route with rules: %+v", last)
		}
		cs, err := testpeers.NewMCPClient(ctx, e.base+"/rules", testpeers.NewHTTPClient(tok, nil, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		if _, err := testpeers.WhoAmI(ctx, cs); err != nil {
			t.Errorf("Go SDK on a route with rules: %v", err)
		}
	} else if last.OK || !strings.Contains(last.Message, "upstream_validates_mcp_headers") {
		t.Errorf("without the body a route with rules must refuse, naming the remedy: %+v", last)
	}
}

func (e *feEnv) testExchange(t *testing.T) {
	tok := e.token(t, jwt.MapClaims{"sub": "carol"})
	ctx := testContext(t)
	cs, err := testpeers.NewMCPClient(ctx, e.base+"/exchange", testpeers.NewHTTPClient(tok, nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	seen, err := testpeers.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	// Without the body the method is unknown: exchanged all the same.
	if !seen.Authorization || !e.issuedFingerprints()[seen.AuthorizationSHA256] {
		t.Errorf("the tool saw authorization %v %q, want a token the STS issued", seen.Authorization, seen.AuthorizationSHA256)
	}
	if seen.AuthorizationSHA256 == testpeers.Fingerprint("Bearer "+tok) {
		t.Error("the client's own token passed through")
	}
}

func (e *feEnv) testElicitation(t *testing.T) {
	for _, sdk := range sdks {
		t.Run(sdk, func(t *testing.T) {
			tok := e.token(t, jwt.MapClaims{"sub": "dave-" + sdk + "-" + e.fe.name})
			before := len(e.toolCalls())
			var elicited bool
			out := nodeClient(t, map[string]any{"sdk": sdk, "url": e.base + "/consent", "token": tok, "scenario": "elicit", "tool": "whoami"}, func(r nodeResult) {
				elicited = true
				if r.Error != "UrlElicitationRequiredError" || len(r.Elicitations) != 1 || r.Elicitations[0].Mode != "url" {
					t.Errorf("elicitation %+v", r)
					return
				}
				if len(e.toolCalls()) != before {
					t.Error("the tool ran before the user authorized")
				}
				e.completeElicitation(t, r.Elicitations[0].ElicitationID, r.Elicitations[0].URL)
			})
			last := out[len(out)-1]
			if !e.fe.body {
				// Without the body neither the tool (which picks the
				// token) nor the client's URL elicitation support is
				// known: refused, naming the remedy.
				if elicited || last.OK || !strings.Contains(last.Message, "upstream_validates_mcp_headers") {
					t.Errorf("without the body: %+v", out)
				}
				if len(e.toolCalls()) != before {
					t.Error("the tool ran")
				}
				return
			}
			if !elicited || !last.OK {
				t.Fatalf("results %+v", out)
			}
			o, err := testpeers.ParseObservation(last.Text)
			if err != nil {
				t.Fatal(err)
			}
			if !o.Authorization || !e.issuedFingerprints()[o.AuthorizationSHA256] {
				t.Errorf("the retried call carried authorization %v %q, want the exchanged token", o.Authorization, o.AuthorizationSHA256)
			}
		})
	}
}

// testDelete405: the owner's DELETE is answered 405 by the server, which
// keeps the session; another user's request on it is still refused and
// runs nothing, and the owner goes on using it.
func (e *feEnv) testDelete405(t *testing.T) {
	ctx := testContext(t)
	alice := e.token(t, jwt.MapClaims{"sub": "alice-405-" + e.fe.name})
	cs, err := testpeers.NewMCPClient(ctx, e.base+"/mcp", testpeers.NewHTTPClient(alice, nil, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	session := cs.ID()
	if session == "" {
		t.Fatal("the server gave no session")
	}
	del, err := http.NewRequestWithContext(ctx, http.MethodDelete, e.base+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	del.Header.Set("Authorization", "Bearer "+alice)
	del.Header.Set("Mcp-Session-Id", session)
	res, err := http.DefaultClient.Do(del)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("owner's DELETE: %d, want the server's 405", res.StatusCode)
	}

	before := len(e.toolCalls())
	bob := e.token(t, jwt.MapClaims{"sub": "bob-405-" + e.fe.name})
	status, _, body := rawMCP(t, e.base+"/mcp", bob, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"whoami"}}`,
		http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {"2025-06-18"}})
	if status != http.StatusForbidden || !strings.Contains(body, "another user") {
		t.Errorf("another user in the deleted session: %d %s, want 403", status, body)
	}
	if n := len(e.toolCalls()) - before; n != 0 {
		t.Errorf("%d tool calls ran in the victim's session", n)
	}
	seen, err := testpeers.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatalf("the owner lost the session: %v", err)
	}
	wantHeaders(t, "owner after DELETE", seen, map[string]string{"X-User-Id": "alice-405-" + e.fe.name})
}

// testToolsHeader: the documented proxy configuration carries the signed
// tools header of a route with tools_header to the MCP server, in place of
// the client's own, and removes a client's copy on a route without it.
func (e *feEnv) testToolsHeader(t *testing.T) {
	tok := e.token(t, nil)
	forged := http.Header{"X-Extauthz-Tools": {"forged.tools.token"}}
	for _, tc := range []struct {
		path   string
		signed bool
	}{{"/tools", true}, {"/mcp", false}} {
		seen := whoAmIWith(t, e.base+tc.path, tok, forged)
		values := seen.Headers.Values("X-Extauthz-Tools")
		if !tc.signed {
			if len(values) != 0 {
				t.Errorf("%s: the client's tools header reached the server: %q", tc.path, values)
			}
			continue
		}
		if len(values) != 1 {
			t.Fatalf("%s: tools headers %q, want the service's one", tc.path, values)
		}
		var claims struct {
			Tools []string `json:"tools"`
			jwt.RegisteredClaims
		}
		_, err := jwt.ParseWithClaims(values[0], &claims, func(*jwt.Token) (any, error) { return e.lineageKey, nil },
			jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithAudience("tools"), jwt.WithIssuer("https://extauthz.e2e.test"))
		if err != nil {
			t.Fatalf("%s: the tools header does not verify with the lineage key: %v", tc.path, err)
		}
		if claims.Subject != "alice" || !slices.Equal(claims.Tools, []string{"whoami", "echo", "delete_file"}) {
			t.Errorf("%s: sub %q tools %v", tc.path, claims.Subject, claims.Tools)
		}
	}
}

// testOwnedHeaders: every header name the service may own, whatever the
// configuration, is set from the service's answer or removed: the dry-run
// decision of a dry-run route, and kagent's lineage names under
// lineage.preset kagent. A client's forged "allow" on a request the route
// would deny would otherwise tell the upstream the request was allowed.
func (e *feEnv) testOwnedHeaders(t *testing.T) {
	tok := e.token(t, nil) // files:read: /dryrun would deny it
	forged := http.Header{
		"X-Extauthz-Dry-Run":                  {"allow"},
		testpeers.HeaderKagentRootContextID:   {"forged-root"},
		testpeers.HeaderKagentParentContextID: {"forged-parent"},
	}
	for _, tc := range []struct {
		path   string
		dryRun string // the prefix of the service's dry-run header; empty: absent
	}{{"/dryrun", "would deny: insufficient_scope"}, {"/mcp", ""}} {
		seen := whoAmIWith(t, e.base+tc.path, tok, forged)
		for name, values := range forged {
			for _, got := range seen.Headers.Values(name) {
				if slices.Contains(values, got) {
					t.Errorf("%s: the client's %s reached the server: %q", tc.path, name, got)
				}
			}
		}
		got := seen.Headers.Values("X-Extauthz-Dry-Run")
		switch {
		case tc.dryRun == "" && len(got) != 0:
			t.Errorf("%s: dry-run header %q, want it absent", tc.path, got)
		case tc.dryRun != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.dryRun)):
			t.Errorf("%s: dry-run header %q, want the service's one (%s...)", tc.path, got, tc.dryRun)
		}
	}
}

// testCredentialCookie: on a route that reads the token from a cookie, the
// cookie is taken out of the upstream's Cookie header (the others kept in
// order, the header removed when it was the only one); on every other route
// the client's cookies pass untouched, a cookie of that name included.
func (e *feEnv) testCredentialCookie(t *testing.T) {
	tok := e.token(t, nil)
	ctx := testContext(t)
	for _, tc := range []struct {
		name   string
		path   string
		bearer string   // the Authorization token; none when empty
		cookie []string // the Cookie header lines
		want   []string // the cookie names the server must see, in order
	}{
		{"the credential among others", "/cookie", "", []string{"theme=dark; at=" + tok + "; lang=en"}, []string{"theme", "lang"}},
		{"the credential alone", "/cookie", "", []string{"at=" + tok}, nil},
		{"the credential next to a bearer token", "/cookie", tok, []string{"at=" + tok + "; theme=dark"}, []string{"theme"}},
		{"the credential in a second Cookie line", "/cookie", "", []string{"theme=dark", "at=" + tok}, []string{"theme"}},
		// The rest the service answers reads like Caddy's placeholder for
		// an absent header: the proxy must still apply it.
		{"a rest that reads like a placeholder", "/cookie", "", []string{"{http.reverse_proxy.header.Cookie}; at=" + tok}, nil},
		{"no credential cookie sent", "/cookie", tok, []string{"theme=dark; lang=en"}, []string{"theme", "lang"}},
		{"a route without a credential cookie", "/mcp", tok, []string{"theme=dark; at=opaque"}, []string{"theme", "at"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := testpeers.NewMCPClient(ctx, e.base+tc.path, testpeers.NewHTTPClient(tc.bearer, http.Header{"Cookie": tc.cookie}, nil), nil)
			if err != nil {
				t.Fatal(err)
			}
			seen, err := testpeers.WhoAmI(ctx, cs)
			cs.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seen.Cookies, tc.want) {
				t.Errorf("the server saw cookies %q, want %q", seen.Cookies, tc.want)
			}
			if got := seen.Headers.Get("X-User-Id"); got != "alice" {
				t.Errorf("X-User-Id %q, want alice", got)
			}
		})
	}
}

// whoAmIWith is what the server saw of one whoami through url by the Go
// SDK client, with tok and the extra headers.
func whoAmIWith(t *testing.T, url, tok string, extra http.Header) testpeers.Observation {
	t.Helper()
	ctx := testContext(t)
	cs, err := testpeers.NewMCPClient(ctx, url, testpeers.NewHTTPClient(tok, extra, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	seen, err := testpeers.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// testDPoP: the v2 TypeScript SDK's withDpop signs a proof of the URL it
// calls, which the service rebuilds from what the proxy reports; the call
// passes. The same token sent as a bearer token (a thief without the key)
// is refused with the DPoP challenge, and never reaches the server.
func (e *feEnv) testDPoP(t *testing.T) {
	key := testtoken.EC(t, "")
	tok := e.token(t, jwt.MapClaims{"cnf": map[string]any{"jkt": key.Thumbprint(t)}})
	res := nodeClient(t, map[string]any{"sdk": "v2", "url": e.base + "/mcp", "token": tok, "scenario": "dpop", "tool": "whoami",
		"dpopKey": key.PrivateJWK(t), "jkt": key.Thumbprint(t)}, nil)
	last := res[len(res)-1]
	if !last.OK {
		t.Fatalf("TypeScript SDK v2 with DPoP: %+v", last)
	}
	o, err := testpeers.ParseObservation(last.Text)
	if err != nil {
		t.Fatal(err)
	}
	wantHeaders(t, "TypeScript SDK v2's DPoP tool call", o, map[string]string{"X-User-Id": "alice"})

	before := len(e.toolCalls())
	status, hdr, body := rawMCP(t, e.base+"/mcp", tok, initializeBody, nil)
	if status != http.StatusUnauthorized {
		t.Fatalf("the bound token as a bearer token: status %d, want 401: %s", status, body)
	}
	if ch := hdr.Get("Www-Authenticate"); !strings.HasPrefix(ch, `DPoP error="invalid_token"`) {
		t.Errorf("challenge %q, want the DPoP one", ch)
	}
	if after := len(e.toolCalls()); after != before {
		t.Errorf("the server saw %d calls of a refused token", after-before)
	}
}

// testUnderscoreNames: a client's X_User_Id, which CGI-style servers
// (WSGI, PHP, FastCGI gateways) fold into the same key as X-User-Id, never
// reaches the server beside the service's header. nginx drops such names
// (underscores_in_headers off); Caddy passes every header on, so the
// service refuses the request, and lets through an underscore name that
// spells nothing it reads.
func (e *feEnv) testUnderscoreNames(t *testing.T) {
	tok := e.token(t, nil)
	forged := http.Header{"X_user_id": {"mallory"}, "X_actor_chain": {"mallory"}}
	if e.fe.name != "caddy" {
		seen := whoAmIWith(t, e.base+"/mcp", tok, forged)
		for name := range forged {
			if got := seen.Headers.Values(name); len(got) != 0 {
				t.Errorf("the client's %s reached the server: %q", name, got)
			}
		}
		return
	}
	for name := range forged {
		status, _, body := rawMCP(t, e.base+"/mcp", tok, initializeBody, http.Header{name: {"mallory"}})
		if status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", name, status, body)
		}
		// Caddy sends the check no body: no call id to answer with.
		if !strings.Contains(body, `"invalid_request"`) || !strings.Contains(body, strings.ToLower(name)+" spells") {
			t.Errorf("%s: %s, want invalid_request naming the header", name, body)
		}
	}
	if status, _, body := rawMCP(t, e.base+"/mcp", tok, initializeBody, http.Header{"X_custom_tag": {"a"}}); status != http.StatusOK {
		t.Errorf("an underscore name the service does not read: status %d, want 200: %s", status, body)
	}
}
