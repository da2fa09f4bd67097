package credential

import (
	"errors"
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
	}{
		{"bearer", hdr{"authorization": "Bearer " + tok}, Source{}, tok, nil},
		{"scheme case-insensitive", hdr{"authorization": "bEaReR " + tok}, Source{}, tok, nil},
		{"extra spaces", hdr{"authorization": "Bearer   " + tok + " "}, Source{}, tok, nil},
		{"missing", hdr{}, Source{}, "", ErrMissing},
		{"basic is not ours", hdr{"authorization": "Basic dXNlcjpwYXNz"}, Source{}, "", ErrMissing},
		{"bearer without token", hdr{"authorization": "Bearer "}, Source{}, "", ErrMalformed},
		{"no space after scheme", hdr{"authorization": "Bearer" + tok}, Source{}, "", ErrMissing},
		{"two headers joined by envoy", hdr{"authorization": "Bearer a.b.c,Bearer d.e.f"}, Source{}, "", ErrMalformed},
		{"control characters", hdr{"authorization": "Bearer a.b\r\nx-user-id: x"}, Source{}, "", ErrMalformed},
		{"padding then data", hdr{"authorization": "Bearer ab=c"}, Source{}, "", ErrMalformed},
		{"too large", hdr{"authorization": "Bearer " + strings.Repeat("a", MaxTokenSize+1)}, Source{}, "", ErrTooLarge},
		{"alternative header bare", hdr{"x-api-token": tok}, Source{Header: "x-api-token"}, tok, nil},
		{"alternative header bearer", hdr{"x-api-token": "Bearer " + tok}, Source{Header: "x-api-token"}, tok, nil},
		{"authorization wins over header", hdr{"authorization": "Bearer a.b.c", "x-api-token": tok}, Source{Header: "x-api-token"}, "a.b.c", nil},
		{"cookie", hdr{"cookie": "theme=dark; sess=" + tok + "; x=1"}, Source{Cookie: "sess"}, tok, nil},
		{"cookie absent", hdr{"cookie": "theme=dark"}, Source{Cookie: "sess"}, "", ErrMissing},
		{"cookie not configured", hdr{"cookie": "sess=" + tok}, Source{}, "", ErrMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findChecked(tt.h, tt.src)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("Find = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzFind(f *testing.F) {
	f.Add("Bearer a.b.c", "sess=x")
	f.Add("bearer\t=", "")
	f.Fuzz(func(t *testing.T, auth, cookie string) {
		tok, err := findChecked(hdr{"authorization": auth, "cookie": cookie}, Source{Cookie: "sess"})
		if err == nil && (tok == "" || strings.ContainsAny(tok, " \r\n\t,;")) {
			t.Fatalf("accepted unusable token %q", tok)
		}
	})
}

// findChecked is Find followed by Syntax, as the pipeline runs them for a
// token it has not seen.
func findChecked(h Headers, src Source) (string, error) {
	tok, err := Find(h, src)
	if err != nil {
		return "", err
	}
	if err := Syntax(tok); err != nil {
		return "", err
	}
	return tok, nil
}
