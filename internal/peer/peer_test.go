package peer_test

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/peer"
)

var epoch = time.Unix(1_800_000_000, 0)

func TestParseID(t *testing.T) {
	tests := []struct {
		in     string
		wantTD string
		wantP  string
		ok     bool
	}{
		{"spiffe://cluster.local/ns/agents/sa/billing", "cluster.local", "/ns/agents/sa/billing", true},
		{"spiffe://example.org", "example.org", "", true},
		{"spiffe://td_1-x.org/A.b-c_d", "td_1-x.org", "/A.b-c_d", true},
		{"SPIFFE://example.org/x", "", "", false},
		{"spiffe://Example.org/x", "", "", false},
		{"spiffe://example.org/", "", "", false},
		{"spiffe://example.org/a//b", "", "", false},
		{"spiffe://example.org/a/../b", "", "", false},
		{"spiffe://example.org/a/./b", "", "", false},
		{"spiffe://example.org:8080/a", "", "", false},
		{"spiffe://user@example.org/a", "", "", false},
		{"spiffe://example.org/a?b", "", "", false},
		{"spiffe://example.org/a#b", "", "", false},
		{"spiffe://example.org/a%20b", "", "", false},
		{"spiffe:///a", "", "", false},
		{"spiffe://", "", "", false},
		{"https://example.org/a", "", "", false},
		{"spiffe://" + strings.Repeat("a", 256), "", "", false},
		{"spiffe://example.org/" + strings.Repeat("a", 2048), "", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in[:min(len(tc.in), 60)], func(t *testing.T) {
			id, err := peer.ParseID(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && (id.TrustDomain != tc.wantTD || id.Path != tc.wantP || id.String() != tc.in) {
				t.Errorf("ID = %+v", id)
			}
			if err != nil && strings.Contains(err.Error(), "example") {
				t.Errorf("error quotes the input: %v", err)
			}
		})
	}
}

func TestParseXFCC(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []peer.Element
	}{
		{"Envoy's documented example",
			`By=http://frontend.lyft.com;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject="/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=Test Client";URI=http://testclient.lyft.com`,
			[]peer.Element{{By: []string{"http://frontend.lyft.com"}, Hash: "468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688",
				Subject: "/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=Test Client", URI: []string{"http://testclient.lyft.com"}}}},
		{"two elements, DNS repeated, keys in any case",
			`By=spiffe://mesh/gw;uri=spiffe://mesh/a,BY=spiffe://mesh/edge;Hash=ab;URI=spiffe://mesh/b;DNS=b.example;DNS=c.example`,
			[]peer.Element{{By: []string{"spiffe://mesh/gw"}, URI: []string{"spiffe://mesh/a"}},
				{By: []string{"spiffe://mesh/edge"}, Hash: "ab", URI: []string{"spiffe://mesh/b"}, DNS: []string{"b.example", "c.example"}}}},
		{"quoted value with escapes", `Subject="CN=a\"b\\c,O=x;y"`, []peer.Element{{Subject: `CN=a"b\c,O=x;y`}}},
		{"unknown keys ignored", `Foo=bar;URI=spiffe://a/b`, []peer.Element{{URI: []string{"spiffe://a/b"}}}},
		{"empty value", `URI=`, []peer.Element{{URI: []string{""}}}},
		{"empty", ``, nil},
		{"no value", `URI`, nil},
		{"no key", `=x`, nil},
		{"unterminated quote", `Subject="CN=a`, nil},
		{"quote inside unquoted value", `URI=a"b`, nil},
		{"equals inside unquoted value", `URI=a=b`, nil},
		{"trailing semicolon", `URI=a;`, nil},
		{"trailing comma", `URI=a,`, nil},
		{"text after a quoted value", `Subject="a"b`, nil},
		{"repeated Hash", `Hash=a;Hash=b`, nil},
		{"too many elements", strings.Repeat("URI=a,", 16) + "URI=a", nil},
		{"too large", "Cert=" + strings.Repeat("a", peer.MaxXFCCBytes), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := peer.ParseXFCC(tc.in)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("parsed %+v, want an error", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseXFCC = %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

func newPolicy(t *testing.T, cfg peer.Config) *peer.Policy {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "mesh"
	}
	p, err := peer.New(cfg, func() time.Time { return epoch })
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFromPrincipal(t *testing.T) {
	p := newPolicy(t, peer.Config{
		TrustDomains: []string{"cluster.local", "partner.example"},
		Paths:        []string{"/ns/agents/sa/*", "/ns/tools/**"},
		Subject:      "{{index .Segments 1}}/{{index .Segments 3}}",
	})
	tests := []struct {
		name, principal, wantSub string
		wantErr                  error
	}{
		{"agent", "spiffe://cluster.local/ns/agents/sa/billing", "agents/billing", nil},
		{"other trust domain on the list", "spiffe://partner.example/ns/agents/sa/x", "agents/x", nil},
		{"tools, deeper path", "spiffe://cluster.local/ns/tools/sa/search/v2", "tools/search", nil},
		{"path not allowed", "spiffe://cluster.local/ns/default/sa/billing", "", peer.ErrPath},
		{"allowed pattern, too deep for *", "spiffe://cluster.local/ns/agents/sa/billing/x", "", peer.ErrPath},
		{"path too short for the template", "spiffe://cluster.local/ns/tools", "", peer.ErrPath},
		{"unknown trust domain", "spiffe://evil.example/ns/agents/sa/billing", "", peer.ErrTrustDomain},
		{"suffix of a trust domain", "spiffe://xcluster.local/ns/agents/sa/billing", "", peer.ErrTrustDomain},
		{"not SPIFFE", "cluster.local/ns/agents/sa/billing", "", peer.ErrMalformed},
		{"dot segments", "spiffe://cluster.local/ns/agents/sa/../../tools/sa/x", "", peer.ErrMalformed},
		{"none", "", "", peer.ErrNoIdentity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := p.FromPrincipal(tc.principal)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if c.Subject != tc.wantSub || c.Raw["sub"] != tc.wantSub || c.Raw["spiffe_id"] != tc.principal || c.IssuerName != "mesh" || !c.ExpiresAt.Equal(epoch.Add(peer.DefaultCacheTTL)) {
				t.Errorf("claims = %+v", c)
			}
		})
	}
}

func TestFromXFCC(t *testing.T) {
	p := newPolicy(t, peer.Config{
		TrustDomains: []string{"cluster.local"},
		XFCCFrom:     []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("::1/128")},
	})
	proxy := netip.MustParseAddr("10.0.0.7")
	tests := []struct {
		name    string
		remote  netip.Addr
		header  string
		wantSub string
		wantErr error
	}{
		{"from the trusted proxy", proxy, `Hash=ab;URI=spiffe://cluster.local/ns/a/sa/b`, "spiffe://cluster.local/ns/a/sa/b", nil},
		{"IPv4-mapped trusted proxy", netip.MustParseAddr("::ffff:10.0.0.7"), `URI=spiffe://cluster.local/ns/a/sa/b`, "spiffe://cluster.local/ns/a/sa/b", nil},
		{"IPv6 trusted proxy", netip.MustParseAddr("::1"), `URI=spiffe://cluster.local/x`, "spiffe://cluster.local/x", nil},
		{"spoofed from an untrusted peer", netip.MustParseAddr("192.0.2.1"), `URI=spiffe://cluster.local/ns/a/sa/b`, "", peer.ErrUntrustedProxy},
		{"the nearest proxy's element counts", proxy, `URI=spiffe://cluster.local/ns/spoofed,URI=spiffe://cluster.local/ns/real`, "spiffe://cluster.local/ns/real", nil},
		{"a client's element appended before the proxy's is not read", proxy, `URI=spiffe://cluster.local/ns/real,URI=spiffe://evil.example/x`, "", peer.ErrTrustDomain},
		{"two SPIFFE IDs in one element", proxy, `URI=spiffe://cluster.local/a;URI=spiffe://cluster.local/b`, "", peer.ErrMalformed},
		{"no SPIFFE ID", proxy, `URI=https://a.example;DNS=a.example`, "", peer.ErrNoIdentity},
		{"malformed header", proxy, `URI="spiffe://cluster.local/a`, "", peer.ErrMalformed},
		{"no header", proxy, ``, "", peer.ErrNoIdentity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := p.FromXFCC(tc.remote, tc.header)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && c.Subject != tc.wantSub {
				t.Errorf("subject = %q, want %q", c.Subject, tc.wantSub)
			}
		})
	}
	none := newPolicy(t, peer.Config{TrustDomains: []string{"cluster.local"}})
	if _, err := none.FromXFCC(proxy, `URI=spiffe://cluster.local/a`); !errors.Is(err, peer.ErrUntrustedProxy) {
		t.Errorf("no trusted proxies configured: %v", err)
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  peer.Config
		want string
	}{
		{"no trust domain", peer.Config{Name: "m"}, "at least one trust domain"},
		{"trust domain with a path", peer.Config{Name: "m", TrustDomains: []string{"a/b"}}, "not a SPIFFE trust domain"},
		{"trust domain upper case", peer.Config{Name: "m", TrustDomains: []string{"Cluster.local"}}, "not a SPIFFE trust domain"},
		{"pattern without slash", peer.Config{Name: "m", TrustDomains: []string{"a"}, Paths: []string{"ns/*"}}, "starts with '/'"},
		{"pattern with ** inside", peer.Config{Name: "m", TrustDomains: []string{"a"}, Paths: []string{"/ns/**/sa"}}, "segment"},
		{"template with an unknown field", peer.Config{Name: "m", TrustDomains: []string{"a"}, Subject: "{{.Namespace}}"}, "subject template"},
		{"template that does not parse", peer.Config{Name: "m", TrustDomains: []string{"a"}, Subject: "{{"}, "subject template"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := peer.New(tc.cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPresented: one request's identity, read once, is judged by each
// policy on its own: a policy that does not trust the proxy refuses it
// without reading it, one of another trust domain refuses the ID, and the
// accepting one sees the ID and the certificate hash; the key names the
// identity within its scope.
func TestPresented(t *testing.T) {
	const id = "spiffe://cluster.local/ns/agents/sa/billing"
	proxy := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	mk := func(name, td string, from []netip.Prefix) *peer.Policy {
		p, err := peer.New(peer.Config{Name: name, TrustDomains: []string{td}, XFCCFrom: from}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	untrusting, partner, mesh := mk("untrusting", "cluster.local", nil), mk("partner", "partner.example", proxy), mk("mesh", "cluster.local", proxy)
	pr := peer.Present("route-a", "", netip.MustParseAddr("10.1.2.3"), "Hash=ab12;URI="+id)
	if _, err := untrusting.Accept(&pr); !errors.Is(err, peer.ErrUntrustedProxy) {
		t.Errorf("untrusting: %v", err)
	}
	if _, err := partner.Accept(&pr); !errors.Is(err, peer.ErrTrustDomain) {
		t.Errorf("partner: %v", err)
	}
	c, err := mesh.Accept(&pr)
	if err != nil || c.Raw["spiffe_id"] != id || c.Raw["x5t_s256_hex"] != "ab12" {
		t.Fatalf("mesh: %+v, %v", c, err)
	}
	if pr.ID() != id || pr.Hash() != "ab12" {
		t.Errorf("ID %q, Hash %q", pr.ID(), pr.Hash())
	}
	other := peer.Present("route-b", "", netip.MustParseAddr("10.1.2.3"), "Hash=ab12;URI="+id)
	again := peer.Present("route-a", "", netip.MustParseAddr("10.9.9.9"), "Hash=ab12;URI="+id)
	if other.Key() == pr.Key() || again.Key() != pr.Key() {
		t.Error("the key is not the identity within its scope")
	}
	for name, tc := range map[string]struct {
		principal, header string
		remote            netip.Addr
		want              error
	}{
		"nothing":                  {"", "", netip.Addr{}, peer.ErrNoIdentity},
		"no header":                {"", "", netip.MustParseAddr("10.1.2.3"), peer.ErrNoIdentity},
		"two SPIFFE IDs":           {"", "URI=" + id + ";URI=spiffe://cluster.local/x", netip.MustParseAddr("10.1.2.3"), peer.ErrMalformed},
		"no SPIFFE ID":             {"", "URI=https://example.com", netip.MustParseAddr("10.1.2.3"), peer.ErrNoIdentity},
		"not a SPIFFE ID":          {"spiffe://Cluster.local/x", "", netip.Addr{}, peer.ErrMalformed},
		"a principal wins":         {id, "URI=spiffe://cluster.local/ns/agents/sa/other", netip.MustParseAddr("10.1.2.3"), nil},
		"header from an untrusted": {"", "URI=" + id, netip.MustParseAddr("192.0.2.1"), peer.ErrUntrustedProxy},
	} {
		t.Run(name, func(t *testing.T) {
			pr := peer.Present("r", tc.principal, tc.remote, tc.header)
			c, err := mesh.Accept(&pr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil && c.Raw["spiffe_id"] != id {
				t.Errorf("claims of %v", c.Raw["spiffe_id"])
			}
		})
	}
}
