// Package compose holds the offline checks of the compose example: no Docker
// engine runs them, so they prove what can be proved from the files. The
// compose file's services, builds, mounts and ports must fit together; the
// Envoy configuration it mounts must pass the strict Envoy check and point at
// the services; the extauthz configurations must parse and name the routes
// Envoy sends; and the Keycloak realm must hold the clients, audiences and
// token exchange setting the configurations rely on.
package compose

import (
	"bytes"
	"encoding/json"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/envoyconfig"
)

type composeFile struct {
	Name     string             `yaml:"name"`
	Services map[string]service `yaml:"services"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       *build            `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   yaml.Node         `yaml:"depends_on"`
	Healthcheck map[string]any    `yaml:"healthcheck"`
}

type build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	return c
}

// interpolate expands ${VAR:-default} and ${VAR} the way compose does, with
// env as the environment.
var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

func interpolate(s string, env map[string]string) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		parts := varRE.FindStringSubmatch(m)
		if v := env[parts[1]]; v != "" {
			return v
		}
		return parts[3]
	})
}

// mounts maps each container path of a service's bind mounts to the host
// path, relative to this directory.
func mounts(t *testing.T, s service) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
			t.Fatalf("volume %q is not a relative bind mount", v)
		}
		out[parts[1]] = parts[0]
	}
	return out
}

// flagValue returns the value after name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("%v has no %s", args, name)
	}
	return args[i+1]
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	want := []string{"a2a-agent", "envoy", "extauthz", "keycloak", "mcp-server"}
	if got := slices.Sorted(maps.Keys(c.Services)); !slices.Equal(got, want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
	for name, s := range c.Services {
		t.Run(name, func(t *testing.T) {
			if (s.Image == "") == (s.Build == nil) {
				t.Fatal("needs exactly one of image and build")
			}
			if s.Build != nil {
				if _, err := os.Stat(filepath.Join(s.Build.Context, "go.mod")); err != nil {
					t.Errorf("build context %s is not the module root: %v", s.Build.Context, err)
				}
				if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
					t.Errorf("dockerfile: %v", err)
				}
			}
			for _, host := range mounts(t, s) {
				if _, err := os.Stat(host); err != nil {
					t.Errorf("mounted file: %v", err)
				}
			}
			var deps []string
			switch s.DependsOn.Kind {
			case yaml.SequenceNode:
				if err := s.DependsOn.Decode(&deps); err != nil {
					t.Fatal(err)
				}
			case yaml.MappingNode:
				var m map[string]any
				if err := s.DependsOn.Decode(&m); err != nil {
					t.Fatal(err)
				}
				deps = slices.Collect(maps.Keys(m))
			}
			for _, d := range deps {
				if _, ok := c.Services[d]; !ok {
					t.Errorf("depends on %q, which is not a service", d)
				}
			}
			for _, p := range s.Ports {
				if host, container, ok := strings.Cut(p, ":"); !ok || host == "" || container == "" {
					t.Errorf("port %q is not host:container", p)
				}
			}
		})
	}
	// Upstreams are reachable only through Envoy.
	for _, name := range []string{"mcp-server", "a2a-agent"} {
		if len(c.Services[name].Ports) > 0 {
			t.Errorf("%s publishes ports: clients could go around Envoy", name)
		}
	}
}

// envoyConfig returns the Envoy configuration the envoy service runs, after
// checking that the command names the mounted file.
func envoyConfig(t *testing.T, c composeFile) []byte {
	t.Helper()
	envoy := c.Services["envoy"]
	path := flagValue(t, envoy.Command, "-c")
	host, ok := mounts(t, envoy)[path]
	if !ok {
		t.Fatalf("envoy runs %s, which is not mounted", path)
	}
	b, err := os.ReadFile(host)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnvoyConfigFitsServices(t *testing.T) {
	c := loadCompose(t)
	doc := envoyConfig(t, c)
	if err := envoyconfig.Check(doc); err != nil {
		t.Fatalf("the mounted Envoy configuration fails the check:\n%v", err)
	}
	b, err := envoyconfig.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}

	// Each cluster points at a service, on the port that service listens on.
	listens := map[string]string{
		"extauthz":   port(t, flagValue(t, c.Services["extauthz"].Command, "--grpc-addr")),
		"mcp-server": port(t, flagValue(t, c.Services["mcp-server"].Command, "-addr")),
		"a2a-agent":  port(t, flagValue(t, c.Services["a2a-agent"].Command, "-addr")),
	}
	for _, cl := range b.GetStaticResources().GetClusters() {
		for _, eps := range cl.GetLoadAssignment().GetEndpoints() {
			for _, ep := range eps.GetLbEndpoints() {
				sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
				want, ok := listens[sa.GetAddress()]
				if !ok {
					t.Errorf("cluster %s points at %q, which is no service listening here", cl.GetName(), sa.GetAddress())
					continue
				}
				if got := sa.GetPortValue(); strconv.FormatUint(uint64(got), 10) != want {
					t.Errorf("cluster %s uses port %d, the service listens on %s", cl.GetName(), got, want)
				}
			}
		}
	}

	// Envoy listens on the port compose publishes.
	published := map[string]bool{}
	for _, p := range c.Services["envoy"].Ports {
		_, container, _ := strings.Cut(p, ":")
		published[container] = true
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		if p := strconv.FormatUint(uint64(l.GetAddress().GetSocketAddress().GetPortValue()), 10); !published[p] {
			t.Errorf("listener %s on port %s is not published", l.GetName(), p)
		}
	}
}

// routeNames returns the extauthz route names Envoy sends in
// context_extensions.
func routeNames(t *testing.T, doc []byte) []string {
	t.Helper()
	b, err := envoyconfig.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				var hcm hcmv3.HttpConnectionManager
				if f.GetTypedConfig().UnmarshalTo(&hcm) != nil {
					continue
				}
				for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
					configs := []*anypb.Any{vh.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"]}
					for _, r := range vh.GetRoutes() {
						configs = append(configs, r.GetTypedPerFilterConfig()["envoy.filters.http.ext_authz"])
					}
					for _, a := range configs {
						if a == nil {
							continue
						}
						var pr extauthzv3.ExtAuthzPerRoute
						if err := a.UnmarshalTo(&pr); err != nil {
							t.Fatal(err)
						}
						if n := pr.GetCheckSettings().GetContextExtensions()["route"]; n != "" {
							names[n] = true
						}
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// configFiles returns the extauthz configurations the extauthz service can
// run: the default and the one EXTAUTHZ_CONFIG selects for token exchange.
func configFiles(t *testing.T, c composeFile) map[string]string {
	t.Helper()
	s := c.Services["extauthz"]
	m := mounts(t, s)
	out := map[string]string{}
	for _, env := range []map[string]string{{}, {"EXTAUTHZ_CONFIG": "extauthz-exchange.yaml"}} {
		args := make([]string, len(s.Command))
		for i, a := range s.Command {
			args[i] = interpolate(a, env)
		}
		path := flagValue(t, args, "--config")
		host, ok := m[path]
		if !ok {
			t.Fatalf("extauthz runs --config %s, which is not mounted", path)
		}
		out[filepath.Base(host)] = host
	}
	if len(out) != 2 {
		t.Fatalf("EXTAUTHZ_CONFIG does not switch the configuration: %v", out)
	}
	return out
}

func TestExtauthzConfigFitsEnvoy(t *testing.T) {
	c := loadCompose(t)
	files := configFiles(t, c)
	b, err := os.ReadFile(files["extauthz.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b)
	if err != nil {
		t.Fatalf("extauthz.yaml:\n%v", err)
	}
	var routes []string
	for _, r := range cfg.Routes {
		routes = append(routes, r.Name)
	}
	sent := routeNames(t, envoyConfig(t, c))
	if len(sent) == 0 {
		t.Fatal("Envoy names no extauthz route")
	}
	for _, name := range sent {
		if !slices.Contains(routes, name) {
			t.Errorf("Envoy sends route %q, which extauthz.yaml does not define (routes: %v)", name, routes)
		}
	}

	// Listeners bind all interfaces inside the container.
	args := c.Services["extauthz"].Command
	for _, f := range []string{"--grpc-addr", "--ops-addr"} {
		if host, _, _ := net.SplitHostPort(flagValue(t, args, f)); host != "0.0.0.0" {
			t.Errorf("%s binds %q, unreachable from other containers", f, host)
		}
	}
	// The admin API has no authentication here: it stays on the
	// container's loopback (the default), and no port publishes it.
	if slices.Contains(args, "--admin-addr") {
		if host, _, _ := net.SplitHostPort(flagValue(t, args, "--admin-addr")); host != "127.0.0.1" {
			t.Errorf("--admin-addr binds %q without authentication", host)
		}
	}
	for _, p := range c.Services["extauthz"].Ports {
		if strings.Contains(p, "9092") {
			t.Errorf("port %s publishes the admin API", p)
		}
	}
}

// TestExchangeConfig checks extauthz-exchange.yaml: it parses, defines the
// routes Envoy names, and its exchange settings fit the realm and the
// compose environment.
func TestExchangeConfig(t *testing.T) {
	c := loadCompose(t)
	files := configFiles(t, c)
	b, err := os.ReadFile(files["extauthz-exchange.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b)
	if err != nil {
		t.Fatalf("extauthz-exchange.yaml:\n%v", err)
	}
	for _, name := range routeNames(t, envoyConfig(t, c)) {
		if !slices.ContainsFunc(cfg.Routes, func(r config.Route) bool { return r.Name == name }) {
			t.Errorf("Envoy sends route %q, which extauthz-exchange.yaml does not define", name)
		}
	}

	realm := loadRealm(t)
	env := c.Services["extauthz"].Environment
	if len(cfg.Exchanges) != 1 {
		t.Fatalf("%d exchanges, want 1", len(cfg.Exchanges))
	}
	ex := cfg.Exchanges[0]
	client := realm.client(t, ex.ClientAuth.ClientID)
	if client.PublicClient || client.Attributes["standard.token.exchange.enabled"] != "true" {
		t.Errorf("realm client %s is not a confidential client with standard token exchange", ex.ClientAuth.ClientID)
	}
	if secret := env[ex.ClientAuth.ClientSecretEnv]; secret == "" || secret != client.Secret {
		t.Errorf("compose sets %s to %q, the realm's secret of %s is %q", ex.ClientAuth.ClientSecretEnv, secret, ex.ClientAuth.ClientID, client.Secret)
	}
	u, err := url.Parse(ex.TokenEndpoint)
	if err != nil || u.Host != "keycloak:8080" || u.Path != "/realms/"+realm.Realm+"/protocol/openid-connect/token" {
		t.Errorf("token_endpoint %q is not the realm's endpoint on the compose network", ex.TokenEndpoint)
	}
	for _, r := range cfg.Routes {
		if r.Exchange == nil {
			t.Errorf("route %s exchanges no token", r.Name)
			continue
		}
		if r.Exchange.STS != ex.Name {
			t.Errorf("route %s uses exchange %q, want %q", r.Name, r.Exchange.STS, ex.Name)
		}
		if len(r.Exchange.Audience) == 0 {
			t.Errorf("route %s names no audience to exchange for", r.Name)
		}
		for _, aud := range r.Exchange.Audience {
			realm.client(t, aud)
			if !client.addsAudience(aud) {
				t.Errorf("route %s exchanges for %s, which the realm does not let %s ask for", r.Name, aud, ex.ClientAuth.ClientID)
			}
		}
	}
}

type realmFile struct {
	Realm   string        `json:"realm"`
	Enabled bool          `json:"enabled"`
	Users   []realmUser   `json:"users"`
	Clients []realmClient `json:"clients"`
}

type realmUser struct {
	Username      string `json:"username"`
	Email         string `json:"email"`
	EmailVerified bool   `json:"emailVerified"`
	FirstName     string `json:"firstName"`
	LastName      string `json:"lastName"`
	Credentials   []struct {
		Type      string `json:"type"`
		Value     string `json:"value"`
		Temporary bool   `json:"temporary"`
	} `json:"credentials"`
}

type realmClient struct {
	ClientID                  string            `json:"clientId"`
	PublicClient              bool              `json:"publicClient"`
	Secret                    string            `json:"secret"`
	DirectAccessGrantsEnabled bool              `json:"directAccessGrantsEnabled"`
	Attributes                map[string]string `json:"attributes"`
	ProtocolMappers           []struct {
		ProtocolMapper string            `json:"protocolMapper"`
		Config         map[string]string `json:"config"`
	} `json:"protocolMappers"`
}

func (c realmClient) addsAudience(aud string) bool {
	for _, m := range c.ProtocolMappers {
		if m.ProtocolMapper == "oidc-audience-mapper" && m.Config["included.client.audience"] == aud && m.Config["access.token.claim"] == "true" {
			return true
		}
	}
	return false
}

func loadRealm(t *testing.T) realmFile {
	t.Helper()
	b, err := os.ReadFile("keycloak/realm-demo.json")
	if err != nil {
		t.Fatal(err)
	}
	var r realmFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r realmFile) client(t *testing.T, id string) realmClient {
	t.Helper()
	for _, c := range r.Clients {
		if c.ClientID == id {
			return c
		}
	}
	t.Fatalf("the realm has no client %q", id)
	return realmClient{}
}

func TestRealmFitsConfig(t *testing.T) {
	c := loadCompose(t)
	realm := loadRealm(t)
	if !realm.Enabled {
		t.Fatal("the realm is disabled")
	}
	// The realm file is what Keycloak imports.
	if host, ok := mounts(t, c.Services["keycloak"])["/opt/keycloak/data/import/realm-demo.json"]; !ok || filepath.Clean(host) != "keycloak/realm-demo.json" {
		t.Errorf("keycloak does not import keycloak/realm-demo.json: %v", c.Services["keycloak"].Volumes)
	}
	if !slices.Contains(c.Services["keycloak"].Command, "--import-realm") {
		t.Error("keycloak does not run with --import-realm")
	}

	b, err := os.ReadFile("extauthz.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	frontend := c.Services["keycloak"].Environment["KC_HOSTNAME"]
	for _, is := range cfg.Issuers {
		if want := frontend + "/realms/" + realm.Realm; is.Issuer != want {
			t.Errorf("issuer %s expects iss %q; Keycloak issues %q", is.Name, is.Issuer, want)
		}
		u, err := url.Parse(is.JWKSURL)
		if err != nil || u.Host != "keycloak:8080" || u.Path != "/realms/"+realm.Realm+"/protocol/openid-connect/certs" {
			t.Errorf("jwks_url %q is not the realm's key set on the compose network", is.JWKSURL)
		}
	}

	// The walkthrough's client gets tokens for the gateway's audience; the
	// other client does not, so its tokens are refused.
	cli, other := realm.client(t, "demo-cli"), realm.client(t, "other-app")
	for _, r := range cfg.Routes {
		for _, aud := range r.Audiences {
			realm.client(t, aud)
			if !cli.addsAudience(aud) {
				t.Errorf("route %s wants aud %s, which demo-cli tokens do not carry", r.Name, aud)
			}
			if other.addsAudience(aud) {
				t.Errorf("other-app tokens carry aud %s: the walkthrough's denial would pass", aud)
			}
		}
	}
	if !cli.PublicClient || !cli.DirectAccessGrantsEnabled || !other.DirectAccessGrantsEnabled {
		t.Error("the walkthrough gets tokens from public clients with the password grant")
	}

	// Users with a complete profile, or Keycloak asks them to update it
	// before it issues a token.
	for _, name := range []string{"alice", "bob"} {
		i := slices.IndexFunc(realm.Users, func(u realmUser) bool { return u.Username == name })
		if i < 0 {
			t.Errorf("no user %s", name)
			continue
		}
		u := realm.Users[i]
		if u.Email == "" || !u.EmailVerified || u.FirstName == "" || u.LastName == "" {
			t.Errorf("user %s has an incomplete profile", name)
		}
		if len(u.Credentials) != 1 || u.Credentials[0].Type != "password" || u.Credentials[0].Value != name || u.Credentials[0].Temporary {
			t.Errorf("user %s has not the password the README uses", name)
		}
	}
}
