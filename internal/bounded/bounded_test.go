package bounded

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		limit   int64
		wantErr error
	}{
		{name: "under the limit", body: "abc", limit: 4},
		{name: "at the limit", body: "abcd", limit: 4},
		{name: "one byte over", body: "abcde", limit: 4, wantErr: ErrTooLarge},
		{name: "empty", body: "", limit: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read(strings.NewReader(tc.body), tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Read() error = %v, want %v", err, tc.wantErr)
			}
			if err == nil && string(got) != tc.body {
				t.Fatalf("Read() = %q, want %q", got, tc.body)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "https://idp.example/t/1", "https://idp.example/t/1"},
		{"userinfo", "https://user:pass@idp.example/jwks", "https://idp.example/jwks"},
		{"query and fragment", "https://idp.example/jwks?api_key=s3cret#frag", "https://idp.example/jwks"},
		{"unparsable", "https://idp.example/%zz?k=s3cret", "(unparsable URL)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Redact(tc.in); got != tc.want {
				t.Fatalf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte("doc"))
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 100)))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	withSecret := func(base, path string) string {
		return strings.Replace(base, "http://", "http://user:s3cret@", 1) + path + "?token=s3cret"
	}
	tests := []struct {
		name, url, want, wantErr string
	}{
		{name: "200", url: srv.URL + "/ok", want: "doc"},
		{name: "404", url: withSecret(srv.URL, "/missing"), wantErr: "status 404"},
		{name: "too large", url: withSecret(srv.URL, "/big"), wantErr: "larger than the limit"},
		{name: "unreachable", url: withSecret(downURL, "/ok"), wantErr: "GET http://"},
		{name: "not a URL", url: "http://%zz/?token=s3cret", wantErr: "parse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Get(t.Context(), srv.Client(), tc.url, "application/json", 10)
			if tc.wantErr == "" {
				if err != nil || string(got) != tc.want {
					t.Fatalf("Get() = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Get() error = %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("Get() error shows a credential: %v", err)
			}
		})
	}
}

func TestNoRedirects(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"active":true}`))
	}))
	defer elsewhere.Close()
	asked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	defer asked.Close()
	timeout := &http.Client{Timeout: 7 * time.Second}
	tests := []struct {
		name string
		base *http.Client
	}{
		{name: "no base", base: nil},
		{name: "a base that follows redirects", base: timeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NoRedirects(tt.base)
			resp, err := c.Post(asked.URL, "application/x-www-form-urlencoded", strings.NewReader("token=x"))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusTemporaryRedirect {
				t.Fatalf("status %d: the redirect was followed", resp.StatusCode)
			}
			if tt.base != nil && (c.Timeout != tt.base.Timeout || tt.base.CheckRedirect != nil) {
				t.Fatal("the copy lost the base's settings, or the base was changed")
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   string
		want time.Duration
	}{
		{"absent", "", 0},
		{"unreadable", "junk", 0},
		{"negative", "-1", 0},
		{"a fraction", "1.5", 0},
		{"zero is the floor", "0", time.Second},
		{"seconds", "42", 42 * time.Second},
		{"padded", " 42 ", 42 * time.Second},
		{"beyond the ceiling", "999999", 5 * time.Minute},
		{"beyond 32 bits", "99999999999", 0},
		{"a date ahead", "Fri, 15 Jan 2027 08:00:30 GMT", 30 * time.Second},
		{"a date past", "Fri, 15 Jan 2027 07:00:00 GMT", time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryAfter(tt.in, now, time.Second, 5*time.Minute); got != tt.want {
				t.Errorf("RetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}
