package credential

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

type hdr map[string]string

func (h hdr) Get(k string) string { return h[k] }

func TestFind(t *testing.T) {
	const tok = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln"
	tests := []struct {
		name    string
		h       hdr
		src     Source
		want    string
		wantErr error
		scheme  Scheme
		place   Place
	}{
		{"bearer", hdr{"authorization": "Bearer " + tok}, Source{}, tok, nil, Bearer, InAuthorization},
		{"scheme case-insensitive", hdr{"authorization": "bEaReR " + tok}, Source{}, tok, nil, Bearer, InAuthorization},
		{"extra spaces", hdr{"authorization": "Bearer   " + tok + " "}, Source{}, tok, nil, Bearer, InAuthorization},
		{"missing", hdr{}, Source{}, "", ErrMissing, Bearer, InAuthorization},
		{"basic is not ours", hdr{"authorization": "Basic dXNlcjpwYXNz"}, Source{}, "", ErrMissing, Bearer, InAuthorization},
		{"bearer without token", hdr{"authorization": "Bearer "}, Source{}, "", ErrMalformed, Bearer, InAuthorization},
		{"no space after scheme", hdr{"authorization": "Bearer" + tok}, Source{}, "", ErrMissing, Bearer, InAuthorization},
		{"two headers joined by envoy", hdr{"authorization": "Bearer a.b.c,Bearer d.e.f"}, Source{}, "", ErrMalformed, Bearer, InAuthorization},
		{"control characters", hdr{"authorization": "Bearer a.b\r\nx-user-id: x"}, Source{}, "", ErrMalformed, Bearer, InAuthorization},
		{"padding then data", hdr{"authorization": "Bearer ab=c"}, Source{}, "", ErrMalformed, Bearer, InAuthorization},
		{"too large", hdr{"authorization": "Bearer " + strings.Repeat("a", MaxTokenSize+1)}, Source{}, "", ErrTooLarge, Bearer, InAuthorization},
		{"alternative header bare", hdr{"x-api-token": tok}, Source{Header: "x-api-token"}, tok, nil, Bearer, InHeader},
		{"alternative header bearer", hdr{"x-api-token": "Bearer " + tok}, Source{Header: "x-api-token"}, tok, nil, Bearer, InHeader},
		{"authorization wins over header", hdr{"authorization": "Bearer a.b.c", "x-api-token": tok}, Source{Header: "x-api-token"}, "a.b.c", nil, Bearer, InAuthorization},
		{"cookie", hdr{"cookie": "theme=dark; sess=" + tok + "; x=1"}, Source{Cookie: "sess"}, tok, nil, Bearer, InCookie},
		{"cookie absent", hdr{"cookie": "theme=dark"}, Source{Cookie: "sess"}, "", ErrMissing, Bearer, InAuthorization},
		{"cookie not configured", hdr{"cookie": "sess=" + tok}, Source{}, "", ErrMissing, Bearer, InAuthorization},
		{"dpop scheme", hdr{"authorization": "DPoP " + tok}, Source{}, tok, nil, DPoP, InAuthorization},
		{"dpop scheme case-insensitive", hdr{"authorization": "dpop " + tok}, Source{}, tok, nil, DPoP, InAuthorization},
		{"dpop without token", hdr{"authorization": "DPoP "}, Source{}, "", ErrMalformed, DPoP, InAuthorization},
		{"dpop and bearer joined by envoy", hdr{"authorization": "DPoP a.b.c,Bearer d.e.f"}, Source{}, "", ErrMalformed, DPoP, InAuthorization},
		{"dpop in the alternative header is a bearer token", hdr{"x-api-token": "DPoP " + tok}, Source{Header: "x-api-token"}, "", ErrMalformed, Bearer, InHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, scheme, place, err := findChecked(tt.h, tt.src)
			if !errors.Is(err, tt.wantErr) || got != tt.want || scheme != tt.scheme || place != tt.place {
				t.Fatalf("Find = %q, %v, %v, %v; want %q, %v, %v, %v", got, scheme, place, err, tt.want, tt.scheme, tt.place, tt.wantErr)
			}
		})
	}
}

func FuzzFind(f *testing.F) {
	f.Add("Bearer a.b.c", "sess=x")
	f.Add("bearer\t=", "")
	f.Fuzz(func(t *testing.T, auth, cookie string) {
		tok, _, _, err := findChecked(hdr{"authorization": auth, "cookie": cookie}, Source{Cookie: "sess"})
		if err == nil && (tok == "" || strings.ContainsAny(tok, " \r\n\t,;")) {
			t.Fatalf("accepted unusable token %q", tok)
		}
	})
}

// findChecked is Find followed by Syntax, as the pipeline runs them for a
// token it has not seen.
func findChecked(h Headers, src Source) (string, Scheme, Place, error) {
	tok, scheme, place, err := Find(h, src)
	if err != nil {
		return "", scheme, place, err
	}
	if err := Syntax(tok); err != nil {
		return "", scheme, place, err
	}
	return tok, scheme, place, nil
}

func TestCookieNamed(t *testing.T) {
	tests := []struct {
		name, pair, want string
		named            bool
	}{
		{"the name", "at", "at", true},
		{"another name", "theme", "at", false},
		{"names are case-sensitive", "AT", "at", false},
		{"percent-encoded, as PHP decodes it", "a%74", "at", true},
		{"percent-encoded plus, as PHP decodes it", "access+token", "access_token", true},
		{"a dot for an underscore, as PHP reads it", "access.token", "access_token", true},
		{"a bracket for an underscore", "access[token", "access_token", true},
		{"a space for an underscore", "access token", "access_token", true},
		{"a bad escape is the name as written", "a%7", "at", false},
		{"an underscore for a dot", "access_token", "access.token", true},
		{"a longer name", "att", "at", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CookieNamed(tt.pair, tt.want); got != tt.named {
				t.Fatalf("CookieNamed(%q, %q) = %v, want %v", tt.pair, tt.want, got, tt.named)
			}
			if tt.named && !MayNameCookie("x=1; "+tt.pair+"=v", tt.want) {
				t.Fatalf("MayNameCookie misses %q for %q", tt.pair, tt.want)
			}
		})
	}
}

// FuzzCookiePairsCoverNetHTTP: every cookie Go's net/http reads as "at"
// in a Cookie header is a pair CookiePairs names "at" (CookieNamed), and
// MayNameCookie never says no to such a header: what the service counts
// and strips is at least what a Go upstream reads.
func FuzzCookiePairsCoverNetHTTP(f *testing.F) {
	for _, s := range []string{"at=1", "at =1; at=2", "x=1;\tat\t=2", "a%74=1", "at=1,at=2", " at = 1 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := http.Request{Header: http.Header{"Cookie": {header}}}
		theirs := 0
		for _, c := range r.Cookies() {
			if c.Name == "at" {
				theirs++
			}
		}
		ours := 0
		CookiePairs(header, func(name, _ string) {
			if CookieNamed(name, "at") {
				ours++
			}
		})
		if ours < theirs {
			t.Fatalf("net/http reads %d at cookies in %q, CookiePairs %d", theirs, header, ours)
		}
		if theirs > 0 && !MayNameCookie(header, "at") {
			t.Fatalf("MayNameCookie(%q) is false", header)
		}
	})
}

// TestElsewhere: another place holds another credential only when its
// value, read as Find reads that place, is not the token Find took.
func TestElsewhere(t *testing.T) {
	src := Source{Header: "x-api-token", Cookie: "at"}
	tests := []struct {
		name string
		h    hdr
		src  Source
		want bool
	}{
		{"Authorization alone", hdr{"authorization": "Bearer tok"}, src, false},
		{"no other place configured", hdr{"authorization": "Bearer tok", "x-api-token": "other"}, Source{}, false},
		{"the same token in every place", hdr{"authorization": "bearer  tok", "x-api-token": " Bearer tok ", "cookie": "a=1; at=tok"}, src, false},
		{"DPoP scheme, same token", hdr{"authorization": "DPoP tok", "x-api-token": "tok"}, src, false},
		{"a blank header", hdr{"authorization": "Bearer tok", "x-api-token": "  "}, src, false},
		{"other cookies only", hdr{"authorization": "Bearer tok", "cookie": "theme=dark"}, src, false},
		{"another token in the header", hdr{"authorization": "Bearer tok", "x-api-token": "other"}, src, true},
		{"another token in the cookie", hdr{"x-api-token": "tok", "cookie": "at=other"}, src, true},
		{"another scheme's credential in Authorization", hdr{"authorization": "Basic dXNlcg==", "x-api-token": "tok"}, src, true},
		{"a longer token sharing the prefix", hdr{"authorization": "Bearer tok", "x-api-token": "tokx"}, src, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Elsewhere(tt.h, tt.src, "tok"); got != tt.want {
				t.Fatalf("Elsewhere = %v, want %v", got, tt.want)
			}
		})
	}
}
