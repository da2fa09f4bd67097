package configcheck

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const repoRoot = "../.."

// anyEnv answers every variable with a value any key accepts: 44 bytes
// (long enough for an HMAC secret) that are the base64 of 32 bytes (an
// encryption key).
func anyEnv(string) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)) }

// fixtures writes one valid file per kind of file a configuration names,
// by key.
func fixtures(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(edKey)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis-ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ecKey.PublicKey, ecKey)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"jwks_file":          write("jwks.json", testtoken.JWKS(t, testtoken.RSA(t, "k1"))),
		"secret_file":        write("secret", []byte(strings.Repeat("s", 40)+"\n")),
		"key_file":           write("lineage.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: edDER})),
		"private_key_file":   write("client.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})),
		"tls_ca_file":        write("ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert})),
		"actor_token_file":   write("actor", []byte(testtoken.RSA(t, "a").Sign(t, map[string]any{"sub": "extauthz"}))),
		"client_secret_file": write("client-secret", []byte("s3cret\n")),
		"file":               write("api-keys.yaml", []byte("keys:\n  - {id: k1, subject: agent, hash: sha256:"+strings.Repeat("ab", 32)+"}\n")),
	}
}

// useFixtures points every *_file key of the document at the fixture for
// that key; a key without a fixture fails the test, so that a new kind of
// file gets one.
func useFixtures(t *testing.T, n *yaml.Node, files map[string]string) {
	t.Helper()
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			if (strings.HasSuffix(k, "_file") || k == "file") && v.Kind == yaml.ScalarNode {
				f, ok := files[k]
				if !ok {
					t.Fatalf("no fixture for %s: add one to fixtures()", k)
				}
				v.Value = f
			}
		}
	}
	for _, c := range n.Content {
		useFixtures(t, c, files)
	}
}

// configBlock is one configuration found in the repository.
type configBlock struct {
	where string // file:line
	doc   []byte
}

var fence = regexp.MustCompile("(?ms)^```ya?ml\\n(.*?)^```")

// repositoryConfigs finds every extauthz configuration in the repository:
// configuration files, ConfigMaps holding one, and YAML blocks in the
// Markdown documentation whose keys are all configuration keys.
func repositoryConfigs(t *testing.T) []configBlock {
	t.Helper()
	top := config.Keys(reflect.TypeFor[config.File]())
	isConfig := func(doc []byte) bool {
		var m map[string]any
		if yaml.Unmarshal(doc, &m) != nil || len(m) == 0 {
			return false
		}
		for k := range m {
			if !slices.Contains(top, k) {
				return false
			}
		}
		// Envoy's route configuration also has routes, with a match.
		if routes, ok := m["routes"].([]any); ok {
			for _, r := range routes {
				if r, ok := r.(map[string]any); ok && r["match"] != nil {
					return false
				}
			}
		}
		return true
	}
	var found []configBlock
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "templates" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch filepath.Ext(path) {
		case ".md":
			for _, m := range fence.FindAllSubmatchIndex(b, -1) {
				block := b[m[2]:m[3]]
				if isConfig(block) {
					line := bytes.Count(b[:m[2]], []byte("\n")) + 1
					found = append(found, configBlock{fmt.Sprintf("%s:%d", rel, line), block})
				}
			}
		case ".yaml", ".yml":
			dec := yaml.NewDecoder(bytes.NewReader(b))
			for {
				var doc struct {
					Kind string            `yaml:"kind"`
					Data map[string]string `yaml:"data"`
				}
				var n yaml.Node
				if dec.Decode(&n) != nil {
					break
				}
				if n.Decode(&doc) == nil && doc.Kind == "ConfigMap" {
					for k, v := range doc.Data {
						if isConfig([]byte(v)) {
							found = append(found, configBlock{rel + ": " + k, []byte(v)})
						}
					}
					continue
				}
				if out, err := yaml.Marshal(&n); err == nil && isConfig(out) {
					found = append(found, configBlock{rel, out})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// base completes a fragment (say the Redis block) into a file: one issuer
// and one route.
const base = "issuers: [{name: base, secret_env: BASE_SECRET}]\nroutes: [{name: base, default: true, issuers: [base]}]\n"

// TestRepositoryConfigsValidate runs validate's checks on every
// configuration the repository ships or documents, with every variable set
// and every file it names replaced by a valid one.
func TestRepositoryConfigsValidate(t *testing.T) {
	files := fixtures(t)
	blocks := repositoryConfigs(t)
	var names []string
	for _, b := range blocks {
		names = append(names, b.where)
	}
	for _, want := range []string{"docs/configuration.md", "docs/mcp-a2a.md", "docs/scaling.md", "examples/compose/extauthz.yaml", "deploy/kubernetes/configmap.yaml"} {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("no configuration found in %s (found %v)", want, names)
		}
	}
	for _, b := range blocks {
		t.Run(b.where, func(t *testing.T) {
			var m map[string]any
			yaml.Unmarshal(b.doc, &m)
			doc := b.doc
			if m["issuers"] == nil && m["routes"] == nil {
				doc = append([]byte(base), doc...)
			}
			var n yaml.Node
			if err := yaml.Unmarshal(doc, &n); err != nil {
				t.Fatal(err)
			}
			useFixtures(t, &n, files)
			out, err := yaml.Marshal(&n)
			if err != nil {
				t.Fatal(err)
			}
			r := Bytes(t.Context(), out, Options{Getenv: anyEnv})
			if len(r.Problems) > 0 {
				t.Fatalf("%s does not validate:\n%s", b.where, strings.Join(r.Problems, "\n"))
			}
		})
	}
}

// TestReportsEverythingServeNeeds: what serve needs from its surroundings is
// checked, every problem at once, each with its line.
func TestReportsEverythingServeNeeds(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not a key"), 0o600)
	missing := filepath.Join(dir, "missing")
	doc := fmt.Sprintf(`issuers:
  - name: hmac
    secret_env: JWT_SECRET
  - name: short
    secret: too-short
  - name: keys
    jwks_file: %[1]s
  - name: gone
    jwks_file: %[2]s
routes:
  - {name: r, default: true, issuers: [hmac, short, keys, gone], exchange: {sts: sts, audience: [x]}}
lineage:
  signing: {key_file: %[1]s, issuer: https://extauthz.example.com}
  peers: [{issuer: https://peer.example.com, jwks_file: %[2]s}]
exchanges:
  - name: sts
    token_endpoint: https://sts.example.com/token
    client_auth: {method: private_key_jwt, client_id: extauthz, private_key_file: %[1]s}
    actor_token_file: %[2]s
redis:
  addrs: [127.0.0.1:6379]
  password_env: REDIS_PASSWORD
  tls: true
  tls_ca_file: %[1]s
  encryption_key_env: TOKEN_KEY
`, garbage, missing)
	env := map[string]string{"TOKEN_KEY": "c2hvcnQ="}
	r := Bytes(t.Context(), []byte(doc), Options{Getenv: func(k string) string { return env[k] }})
	want := []string{
		"line 3: issuers[0] (hmac).secret_env: environment variable JWT_SECRET is not set",
		"line 5: issuers[1] (short).secret: the secret is 9 bytes, at least 32 are required",
		"line 7: issuers[2] (keys).jwks_file: decode JWK set",
		"line 9: issuers[3] (gone).jwks_file: open " + missing + ": no such file or directory",
		"line 13: lineage.signing.key_file: lineage signer",
		"line 14: lineage.peers[0].jwks_file: open " + missing,
		"line 18: exchanges[0] (sts).client_auth.private_key_file: " + garbage,
		"line 19: exchanges[0] (sts).actor_token_file: open " + missing,
		"line 22: redis.password_env: environment variable REDIS_PASSWORD is not set",
		"line 24: redis.tls_ca_file: " + garbage + " holds no PEM certificate",
		"line 25: redis.encryption_key_env: TOKEN_KEY must hold a base64-encoded 32-byte key",
	}
	got := strings.Join(r.Problems, "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("problems lack %q:\n%s", w, got)
		}
	}
	if len(r.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(r.Problems), len(want), got)
	}
}

// TestOnline fetches the key sets serve would fetch, and only with Online.
func TestOnline(t *testing.T) {
	jwks := testtoken.JWKS(t, testtoken.EC(t, "k1"))
	var hits atomic.Int64 // key sets are fetched concurrently
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/jwks":
			w.Write(jwks)
		case "/.well-known/openid-configuration":
			fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, "http://"+r.Host, "http://"+r.Host+"/jwks")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	doc := func(jwksPath string) []byte {
		return fmt.Appendf(nil, `issuers:
  - {name: url, algorithms: [ES256], jwks_url: %[1]s%[2]s}
  - {name: disc, algorithms: [ES256], discovery: true, issuer: %[1]s}
routes: [{name: r, default: true, issuers: [url, disc]}]
`, srv.URL, jwksPath)
	}
	if r := Bytes(t.Context(), doc("/nothing"), Options{}); len(r.Problems) > 0 || hits.Load() > 0 {
		t.Fatalf("offline: %d requests, problems %v", hits.Load(), r.Problems)
	}
	if r := Bytes(t.Context(), doc("/jwks"), Options{Online: true, HTTPClient: srv.Client()}); len(r.Problems) > 0 {
		t.Fatalf("online, all reachable: %v", r.Problems)
	}
	r := Bytes(t.Context(), doc("/nothing"), Options{Online: true, HTTPClient: srv.Client()})
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "line 2: issuers[0] (url).jwks_url: GET "+srv.URL+"/nothing: status 404") {
		t.Fatalf("online, one missing key set: %v", r.Problems)
	}
}

// TestInvalidAndMissingTogether: validation problems and missing
// surroundings come in one report, ordered by line.
func TestInvalidAndMissingTogether(t *testing.T) {
	doc := "issuers:\n  - name: a\n    secret_env: UNSET\n    leeway: 2h\nroutes:\n  - name: r\n    issuers: [nobody]\n"
	r := Bytes(t.Context(), []byte(doc), Options{Getenv: func(string) string { return "" }})
	want := []string{
		"line 3: issuers[0] (a).secret_env: environment variable UNSET is not set",
		"line 4: issuers[0] (a).leeway: must be between 0 and 1h",
		`line 7: routes[0] (r).issuers: unknown issuer "nobody"`,
	}
	if !slices.Equal(r.Problems, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(r.Problems, "\n"), strings.Join(want, "\n"))
	}
	if r.File != nil {
		t.Error("an invalid file is returned as if serve could run it")
	}
}

// TestRuleWarnings: a rule reading the arguments on a route without the
// body is run, but warned about; a decision point's secret is checked.
func TestRuleWarnings(t *testing.T) {
	doc := `issuers:
  - {name: dev, secret_env: DEV_SECRET}
sessions: {task_ownership: false}
routes:
  - name: headers-only
    issuers: [dev]
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - name: workspace
        methods: [tools/call]
        when: mcp.arguments.path.startsWith("/workspace/")
      - name: tokens only
        when: '"admin" in identity.scopes'
      - name: pdp
        authzen: {endpoint: "https://pdp.example.com/access/v1/evaluation", client_auth: {client_id: x, client_secret_env: PDP_SECRET}}
`
	env := map[string]string{"DEV_SECRET": strings.Repeat("s", 32)}
	r := Bytes(t.Context(), []byte(doc), Options{Getenv: func(k string) string { return env[k] }})
	if len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0], "line 12: routes[0] (headers-only).rules[0] (workspace).when: reads mcp.arguments") {
		t.Errorf("warnings = %q", r.Warnings)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "PDP_SECRET") {
		t.Errorf("problems = %q", r.Problems)
	}
}

// TestTaskOwnershipWithoutTheBody: tasks cannot be bound on a route whose
// front end withholds the body: refused for A2A (auto included), warned
// about for MCP (clients before 2026-07-28 send no Mcp-Method).
func TestTaskOwnershipWithoutTheBody(t *testing.T) {
	env := map[string]string{"DEV_SECRET": strings.Repeat("s", 32)}
	o := Options{Getenv: func(k string) string { return env[k] }}
	const head = "issuers:\n  - {name: dev, secret_env: DEV_SECRET}\n"
	route := func(protocol string) string {
		return "routes:\n  - name: r\n    issuers: [dev]\n    protocol: " + protocol + "\n    request_body: none\n"
	}
	r := Bytes(t.Context(), []byte(head+route("a2a")), o)
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "task_ownership") {
		t.Errorf("a2a: problems = %q", r.Problems)
	}
	r = Bytes(t.Context(), []byte(head+route("mcp")), o)
	if len(r.Problems) != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "routes[0].request_body: is none: sessions.task_ownership") {
		t.Errorf("mcp: problems = %q, warnings = %q", r.Problems, r.Warnings)
	}
	for _, doc := range []string{head + "sessions: {task_ownership: false}\n" + route("a2a"), head + "sessions: {task_ownership: false}\n" + route("mcp"), head + route("http")} {
		if r := Bytes(t.Context(), []byte(doc), o); len(r.Problems) != 0 || len(r.Warnings) != 0 {
			t.Errorf("%s: problems = %q, warnings = %q", doc, r.Problems, r.Warnings)
		}
	}
	// A declaration that scopes task lists where none is refused.
	scoped := "    upstream_scopes_task_lists: true\n"
	r = Bytes(t.Context(), []byte(head+"sessions: {task_ownership: false}\n"+route("a2a")+scoped), o)
	if len(r.Problems) != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "upstream_scopes_task_lists: has no effect") {
		t.Errorf("scoped lists without task ownership: problems = %q, warnings = %q", r.Problems, r.Warnings)
	}
	withBody := "routes:\n  - name: r\n    issuers: [dev]\n    protocol: a2a\n" + scoped
	if r := Bytes(t.Context(), []byte(head+withBody), o); len(r.Problems) != 0 || len(r.Warnings) != 0 {
		t.Errorf("scoped lists where tasks are bound: problems = %q, warnings = %q", r.Problems, r.Warnings)
	}
}
