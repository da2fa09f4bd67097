package check

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/extauthz/extauthz/internal/config"
)

// peerXFCCConfig has two peer-only routes behind a trusted proxy: one with
// one peer issuer, one whose first peer issuer refuses the workload (another
// trust domain) and whose second accepts it.
func peerXFCCConfig() string {
	const issuer = `
  - name: %s
    peer:
      trust_domains: [%s]
      paths: ["/ns/agents/sa/*"]
      subject: "{{index .Segments 1}}.{{index .Segments 3}}"
      xfcc_from: [10.0.0.0/24]`
	return "issuers:" + fmt.Sprintf(issuer, "mesh", "cluster.local") + fmt.Sprintf(issuer, "partner", "partner.example") + `
routes:
  - name: one
    hosts: [one.example.com]
    issuers: [mesh]
  - name: two
    hosts: [two.example.com]
    issuers: [partner, mesh]
`
}

const peerXFCC = `By=spiffe://cluster.local/ns/gw/sa/envoy;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;Subject="/CN=billing";URI=spiffe://cluster.local/ns/agents/sa/billing`

func newPeerPipeline(tb testing.TB) *Pipeline {
	tb.Helper()
	f, err := config.Parse([]byte(peerXFCCConfig()))
	if err != nil {
		tb.Fatal(err)
	}
	clk := newClock()
	p, err := Compile(tb.Context(), f, Deps{Now: clk.Now})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	pl, err := New(p, Options{Now: clk.Now})
	if err != nil {
		tb.Fatal(err)
	}
	return pl
}

func xfccReq(host string) *Request {
	r := hostReq(host, Headers{"x-forwarded-client-cert": peerXFCC})
	r.PeerAddr = netip.MustParseAddr("10.0.0.7")
	return r
}

// TestPeerHeaderReadOnce: a route whose first peer issuer refuses the
// workload and whose second accepts it costs what a route with the one
// accepting issuer costs: the X-Forwarded-Client-Cert header is read once
// per request, not once per peer issuer.
func TestPeerHeaderReadOnce(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	pl := newPeerPipeline(t)
	allocs := map[string]float64{}
	for _, host := range []string{"one.example.com", "two.example.com"} {
		req := xfccReq(host)
		if v := pl.Check(t.Context(), req); v.Outcome != Allowed {
			t.Fatalf("%s: %v (%s)", host, v.Outcome, v.Description)
		}
		allocs[host] = testing.AllocsPerRun(100, func() { pl.Check(t.Context(), req) })
	}
	if one, two := allocs["one.example.com"], allocs["two.example.com"]; two != one {
		t.Errorf("two peer issuers: %v allocations a check, one: %v; want the header read once", two, one)
	}
}

// BenchmarkPeerXFCC: a cached peer-only check from a trusted proxy, with
// one peer issuer and with two (the first refusing).
func BenchmarkPeerXFCC(b *testing.B) {
	pl := newPeerPipeline(b)
	for _, host := range []string{"one.example.com", "two.example.com"} {
		b.Run(host[:3], func(b *testing.B) {
			req := xfccReq(host)
			if v := pl.Check(b.Context(), req); v.Outcome != Allowed {
				b.Fatalf("%v (%s)", v.Outcome, v.Description)
			}
			b.ReportAllocs()
			for b.Loop() {
				pl.Check(b.Context(), req)
			}
		})
	}
}
