package httpauthz

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/testing/testtoken"

	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

const secret = "httpauthz-test-secret-of-sufficient-length"

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func now() time.Time { return t0 }

// testConfig has an MCP route with a scope and a rule, and a default route
// with a public prefix.
const testConfig = `
issuers:
  - {name: dev, algorithms: [HS256], secret: ` + secret + `}
routes:
  - name: files
    hosts: [files.example.com]
    path_prefix: /mcp
    protocol: mcp
    issuers: [dev]
    scopes: [files:read]
    rules:
      - {name: no-delete, methods: [tools/call], names: [delete_*], action: deny}
  - name: validated
    hosts: [files.example.com]
    path_prefix: /validated
    protocol: mcp
    issuers: [dev]
    upstream_validates_mcp_headers: true
    rules:
      - {name: no-delete, methods: [tools/call], names: [delete_*], action: deny}
  - name: agent
    default: true
    issuers: [dev]
    public_paths: [/public/*]
`

func newPipeline(t testing.TB) *check.Pipeline {
	t.Helper()
	return pipelinetest.New(t, testConfig, check.Deps{Now: now}, check.Options{Now: now})
}

// token mints an HS256 token for alice in session sess-42; claims override
// (nil deletes).
func token(t testing.TB, claims jwt.MapClaims) string {
	base := jwt.MapClaims{"sub": "alice", "session_id": "sess-42", "scope": "files:read",
		"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return testtoken.HMAC(t, "HS256", secret, base)
}

// serve starts the handler on a real loopback listener.
func serve(t testing.TB, o Options) *httptest.Server {
	t.Helper()
	return serveWith(t, newPipeline(t), o)
}

// serveWith starts the handler deciding with pl on a real loopback listener.
func serveWith(t testing.TB, pl *check.Pipeline, o Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(NewHandler(pl, o))
	t.Cleanup(srv.Close)
	return srv
}

// ask sends one authorization request: the auth URL's method and path, the
// Host, headers (repeated values as separate lines) and body.
type ask struct {
	method string
	path   string
	host   string
	header http.Header
	body   string
}

func (a ask) do(t testing.TB, srv *httptest.Server) *http.Response {
	t.Helper()
	method := a.method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if a.body != "" {
		body = strings.NewReader(a.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+a.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if a.host != "" {
		req.Host = a.host
	}
	for k, vs := range a.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func readAll(t testing.TB, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dump renders a response for golden files: status, headers sorted without
// Date, body.
func dump(t testing.TB, res *http.Response) []byte {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n", res.StatusCode)
	keys := make([]string, 0, len(res.Header))
	for k := range res.Header {
		if k != "Date" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range res.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	b.WriteString(readAll(t, res.Body))
	b.WriteString("\n")
	return b.Bytes()
}

// removed parses RemoveHeader.
func removed(res *http.Response) []string {
	var out []string
	for _, f := range strings.Split(res.Header.Get(RemoveHeader), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
