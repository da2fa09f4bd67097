package peer_test

import (
	"net/netip"
	"testing"

	"github.com/extauthz/extauthz/internal/peer"
)

func BenchmarkFromPrincipal(b *testing.B) {
	p, err := peer.New(peer.Config{Name: "mesh", TrustDomains: []string{"cluster.local"}, Paths: []string{"/ns/*/sa/*"},
		Subject: "{{index .Segments 1}}/{{index .Segments 3}}"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.FromPrincipal("spiffe://cluster.local/ns/agents/sa/billing"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromXFCC(b *testing.B) {
	p, err := peer.New(peer.Config{Name: "mesh", TrustDomains: []string{"cluster.local"}, XFCCFrom: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	remote := netip.MustParseAddr("10.1.2.3")
	const h = `By=spiffe://cluster.local/ns/gw/sa/envoy;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject="/CN=billing";URI=spiffe://cluster.local/ns/agents/sa/billing`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.FromXFCC(remote, h); err != nil {
			b.Fatal(err)
		}
	}
}
