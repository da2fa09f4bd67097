package peer

import (
	"net/url"
	"reflect"
	"testing"
)

// FuzzParseID compares ParseID with net/url: whatever ParseID accepts,
// net/url reads as the same scheme, host and path with nothing else, and
// the ID prints back as its input.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"spiffe://cluster.local/ns/a/sa/b", "spiffe://x", "spiffe://x/", "spiffe://x:1/a", "spiffe://u@x/a", "spiffe://x/a%2Fb", "spiffe://x/a/../b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		if id.String() != s {
			t.Fatalf("%q prints as %q", s, id.String())
		}
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("accepted %q that net/url refuses: %v", s, err)
		}
		if u.Scheme != "spiffe" || u.Host != id.TrustDomain || u.Path != id.Path || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Port() != "" || u.RawPath != "" {
			t.Fatalf("%q: net/url reads %#v, ParseID %+v", s, u, id)
		}
	})
}

// FuzzParseXFCC: what ParseXFCC accepts, FormatXFCC writes back to a
// header that parses to the same elements.
func FuzzParseXFCC(f *testing.F) {
	for _, s := range []string{
		`By=http://frontend.lyft.com;Hash=468e;Subject="/C=US/CN=Test Client";URI=http://testclient.lyft.com`,
		`URI=spiffe://a/b,By=spiffe://a/gw;URI=spiffe://a/c;DNS=x;DNS=y`,
		`Subject="a\"b\\c,d;e=f"`,
		`Subject="a\b"`,
		`URI=`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		els, err := ParseXFCC(s)
		if err != nil {
			return
		}
		for _, el := range els {
			if reflect.DeepEqual(el, Element{}) {
				return // only unknown keys: nothing to write back
			}
		}
		again, err := ParseXFCC(FormatXFCC(els))
		if err != nil || !reflect.DeepEqual(again, els) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, els, FormatXFCC(els), again, err)
		}
	})
}
