package canon

import (
	"errors"
	"net/url"
	"path"
	"strings"
	"testing"
)

func TestTarget(t *testing.T) {
	tests := []struct {
		name, in, path, query string
		err                   error
	}{
		{"root", "/", "/", "", nil},
		{"plain", "/mcp", "/mcp", "", nil},
		{"trailing slash", "/mcp/", "/mcp/", "", nil},
		{"query kept as sent", "/mcp?a=%2e%2E/../x", "/mcp", "a=%2e%2E/../x", nil},
		{"reserved escape upper-cased", "/a%3bb%c3%a4", "/a%3Bb%C3%A4", "", nil},
		{"dots inside names", "/a/b.c/..d/.e/...", "/a/b.c/..d/.e/...", "", nil},
		{"empty", "", "", "", ErrEmpty},
		{"absolute-form", "http://host/mcp", "", "", ErrNotOriginForm},
		{"asterisk-form", "*", "", "", ErrNotOriginForm},
		{"dot dot", "/.well-known/oauth-protected-resource/../../mcp", "", "", ErrDotSegment},
		{"dot", "/./mcp", "", "", ErrDotSegment},
		{"final dot dot", "/mcp/..", "", "", ErrDotSegment},
		{"encoded dot dot", "/x/%2e%2e/mcp", "", "", ErrEncodedUnreserved},
		{"encoded dot dot upper", "/x/%2E%2E/mcp", "", "", ErrEncodedUnreserved},
		{"encoded slash", "/x%2f..%2fmcp", "", "", ErrEncodedSlash},
		{"encoded slash upper", "/x%2F", "", "", ErrEncodedSlash},
		{"encoded backslash", "/x%5cmcp", "", "", ErrEncodedSlash},
		{"path parameters", "/mcp;jsessionid=1", "", "", ErrPathParams},
		{"double slash", "//mcp", "", "", ErrEmptySegment},
		{"inner double slash", "/a//mcp", "", "", ErrEmptySegment},
		{"encoded unreserved letter", "/%6dcp", "", "", ErrEncodedUnreserved},
		{"encoded tilde", "/%7Euser", "", "", ErrEncodedUnreserved},
		{"backslash", `/x\..\mcp`, "", "", ErrBackslash},
		{"encoded NUL", "/mcp%00.json", "", "", ErrEncodedControl},
		{"double-encoded dot segments", "/public/%252e%252e/mcp", "", "", ErrEncodedPercent},
		{"encoded percent", "/100%25", "", "", ErrEncodedPercent},
		{"encoded newline", "/mcp%0a", "", "", ErrEncodedControl},
		{"raw NUL", "/mcp\x00", "", "", ErrControl},
		{"space", "/m cp", "", "", ErrControl},
		{"tab in query", "/mcp?a=\t", "", "", ErrControl},
		{"raw high byte", "/m\xc3\xa4", "", "", ErrNonASCII},
		{"overlong dot", "/x/%c0%ae%c0%ae/mcp", "", "", ErrBadUTF8},
		{"overlong slash", "/x%c0%afmcp", "", "", ErrBadUTF8},
		{"three-byte overlong", "/x%e0%80%af", "", "", ErrBadUTF8},
		{"surrogate", "/x%ed%a0%80", "", "", ErrBadUTF8},
		{"cut rune", "/x%c3", "", "", ErrBadUTF8},
		{"cut rune then ascii escape", "/x%c3%20", "", "", ErrBadUTF8},
		{"lone continuation", "/x%80", "", "", ErrBadUTF8},
		{"bad escape", "/x%zz", "", "", ErrBadEscape},
		{"short escape", "/x%4", "", "", ErrBadEscape},
		{"fragment", "/mcp#frag", "", "", ErrFragment},
		{"fragment in query", "/mcp?a#b", "", "", ErrFragment},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, query, err := Target(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Target(%q) error %v, want %v", tt.in, err, tt.err)
			}
			if path != tt.path || query != tt.query {
				t.Fatalf("Target(%q) = %q, %q; want %q, %q", tt.in, path, query, tt.path, tt.query)
			}
		})
	}
}

func TestHost(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"empty", "", "", nil},
		{"name", "files.example.test", "files.example.test", nil},
		{"upper case", "FILES.Example.TEST", "files.example.test", nil},
		{"port", "files.example.test:8443", "files.example.test:8443", nil},
		{"upper case with port", "Files.example.test:443", "files.example.test:443", nil},
		{"ipv4", "127.0.0.1:80", "127.0.0.1:80", nil},
		{"ipv6", "[::1]:8080", "[::1]:8080", nil},
		{"ipv6 upper", "[FE80::1]", "[fe80::1]", nil},
		{"underscore", "my_host", "my_host", nil},
		{"trailing dot", "files.example.test.", "", ErrTrailingDot},
		{"trailing dot with port", "files.example.test.:443", "", ErrTrailingDot},
		{"empty label", "files..example.test", "", ErrHost},
		{"leading dot", ".example.test", "", ErrHost},
		{"joined", "a.example.test,b.example.test", "", ErrHost},
		{"userinfo", "user@files.example.test", "", ErrHost},
		{"encoded", "files%2eexample.test", "", ErrHost},
		{"path", "files.example.test/x", "", ErrHost},
		{"space", "files example", "", ErrHost},
		{"empty port", "files.example.test:", "", ErrHost},
		{"port zero", "files.example.test:0", "", ErrHost},
		{"port too big", "files.example.test:65536", "", ErrHost},
		{"signed port", "files.example.test:+80", "", ErrHost},
		{"ipv6 zone", "[fe80::1%25eth0]", "", ErrHost},
		{"ipv6 unclosed", "[::1", "", ErrHost},
		{"ipv4 in brackets", "[127.0.0.1]", "", ErrHost},
		{"only port", ":80", "", ErrHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Host(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("Host(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestURI(t *testing.T) {
	const etc = "file:///etc/passwd"
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"canonical", etc, etc, nil},
		{"encoded letter", "file:///%65tc/passwd", etc, nil},
		{"localhost", "file://localhost/etc/passwd", etc, nil},
		{"LOCALHOST", "file://LOCALHOST/etc/passwd", etc, nil},
		{"scheme case", "FILE:///etc/passwd", etc, nil},
		{"no authority", "file:/etc/passwd", etc, nil},
		{"four slashes", "file:////etc/passwd", etc, nil},
		{"inner slashes", "file:///etc//passwd", etc, nil},
		{"trailing slash kept", "file:///etc/", "file:///etc/", nil},
		{"root", "file:///", "file:///", nil},
		{"reserved escape kept", "file:///a%3fb", "file:///a%3Fb", nil},
		{"non-ascii encoded", "file:///caf\u00e9", "file:///caf%C3%A9", nil},
		{"non-ascii escape upper", "file:///caf%c3%a9", "file:///caf%C3%A9", nil},
		{"http host case", "HTTPS://Example.COM/b?x=%7e", "https://example.com/b?x=~", nil},
		{"http empty path", "https://example.com", "https://example.com/", nil},
		{"custom scheme", "peer://whoami", "peer://whoami", nil},
		{"custom scheme case", "Peer://WhoAmI", "peer://whoami", nil},
		{"urn", "urn:ISBN:0451450523", "urn:ISBN:0451450523", nil},
		{"dot dot", "file:///tmp/../etc/passwd", "", ErrDotSegment},
		{"dot dot through a symbolic link", "file:///var/run/../etc/shadow", "", ErrDotSegment},
		{"encoded dot dot", "file:///tmp/%2e%2E/etc/passwd", "", ErrDotSegment},
		{"half-encoded dot dot", "file:///tmp/.%2e/etc/passwd", "", ErrDotSegment},
		{"dot", "file:///etc/./passwd", "", ErrDotSegment},
		{"encoded dot", "file:///etc/%2E/passwd", "", ErrDotSegment},
		{"trailing dot segment", "file:///etc/x/..", "", ErrDotSegment},
		{"trailing dot", "file:///etc/.", "", ErrDotSegment},
		{"dot segments above the root", "file:///../etc/passwd", "", ErrDotSegment},
		{"http dot segments", "https://example.com/a/../b", "", ErrDotSegment},
		{"custom scheme dot segments", "peer://host/a/%2e%2e/b", "", ErrDotSegment},
		{"dots in a name", "file:///etc/..passwd/.x/x..", "file:///etc/..passwd/.x/x..", nil},
		{"encoded slash", "file:///etc%2fpasswd", "", ErrEncodedSlash},
		{"encoded NUL", "file:///etc/passwd%00.txt", "", ErrEncodedControl},
		{"double-encoded dot segments", "file:///tmp/%252e%252e/etc/passwd", "", ErrEncodedPercent},
		{"raw NUL", "file:///etc/passwd\x00", "", ErrControl},
		{"bad escape", "file:///%zz", "", ErrBadEscape},
		{"overlong", "file:///tmp/%c0%ae%c0%ae/etc", "", ErrBadUTF8},
		{"invalid utf-8", "file:///\xff", "", ErrBadUTF8},
		{"backslash", `file:///tmp\..\etc\passwd`, "", ErrBackslash},
		{"fragment", "file:///etc/passwd#x", "", ErrFragment},
		{"remote host", "file://etc/passwd", "", ErrFileHost},
		{"relative file", "file:etc/passwd", "", ErrFileRelative},
		{"file query", "file:///etc/passwd?x", "", ErrFileQuery},
		{"userinfo", "https://a@b/x", "", ErrUserinfo},
		{"trailing dot host", "https://example.com./x", "", ErrTrailingDot},
		{"no scheme", "/etc/passwd", "", ErrNoScheme},
		{"empty", "", "", ErrEmpty},
		{"rootless dot segment", "x:a/../b", "", ErrDotSegment},
		{"space", "file:///etc/pass wd", "", ErrControl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := URI(tt.in)
			if !errors.Is(err, tt.err) || got != tt.want {
				t.Fatalf("URI(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestURIPattern(t *testing.T) {
	tests := []struct {
		in, want string
		isURI    bool
		err      error
	}{
		{"file:///etc/*", "file:///etc/*", true, nil},
		{"FILE://localhost/%65tc/*", "file:///etc/*", true, nil},
		{"file:/etc/?asswd", "file:///etc/?asswd", true, nil},
		{"https://*.Example.com/*", "https://*.example.com/*", true, nil},
		{"*", "*", false, nil},
		{"*secret*", "*secret*", false, nil},
		{"delete_*", "delete_*", false, nil},
		{"file:///../*", "", true, ErrDotSegment},
		{"file:///var/run/../etc/*", "", true, ErrDotSegment},
		{"file:///etc/%2e/*", "", true, ErrDotSegment},
		{"file:///etc/.*", "file:///etc/.*", true, nil},
		{"file://remote/*", "", true, ErrFileHost},
	}
	for _, tt := range tests {
		got, isURI, err := URIPattern(tt.in)
		if !errors.Is(err, tt.err) || got != tt.want || isURI != tt.isURI {
			t.Errorf("URIPattern(%q) = %q, %v, %v; want %q, %v, %v", tt.in, got, isURI, err, tt.want, tt.isURI, tt.err)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	_, _, err := Target("/a/../b")
	if err == nil || err.Error() != "the path contains dot segments" {
		t.Fatalf("error %v", err)
	}
}

// TestCanonicalDoesNotAllocate keeps the hot path free: a canonical path or
// host comes back as it was.
func TestCanonicalDoesNotAllocate(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := Target("/mcp/tools?x=1"); err != nil {
			t.Fatal(err)
		}
		if _, err := Host("files.example.test:8443"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}

// FuzzTarget: whatever Target accepts is canonical (a fixed point), starts
// with "/", and has no dot, empty or encoded-slash segment by any decoding.
func FuzzTarget(f *testing.F) {
	for _, s := range []string{"/mcp", "/a/../b", "/%2e%2E", "//x", "/%c3%a4?q", "/x;y", "/a%2fb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		path, query, err := Target(s)
		if err != nil {
			return
		}
		again, q2, err := Target(path + "?" + query)
		if err != nil || again != path || q2 != query {
			t.Fatalf("Target(%q) = %q, not a fixed point: %q %v", s, path, again, err)
		}
		if path[0] != '/' || strings.Contains(path, "//") || strings.ContainsAny(path, `\;#`) {
			t.Fatalf("accepted %q", path)
		}
		for _, seg := range strings.Split(strings.ToLower(path), "/") {
			if seg == "." || seg == ".." || strings.Contains(seg, "%2e") || strings.Contains(seg, "%2f") {
				t.Fatalf("accepted %q", path)
			}
		}
	})
}

// FuzzURI: canonicalising twice changes nothing, and a canonical
// hierarchical URI has no dot segment (none is resolved, by any spelling),
// nor a file: URI an empty one.
func FuzzURI(f *testing.F) {
	for _, s := range []string{"file:///etc/passwd", "file:///tmp/../etc", "FILE://localhost/%65tc", "https://A/b?c=%7e", "urn:x:y", "file:///a/%2e%2E/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := URI(s)
		if err != nil {
			return
		}
		again, err := URI(c)
		if err != nil || again != c {
			t.Fatalf("URI(%q) = %q, then %q, %v", s, c, again, err)
		}
		p, _, _ := strings.Cut(c, "?")
		for _, seg := range strings.Split(strings.ToLower(p), "/") {
			if seg == "." || seg == ".." || strings.Contains(seg, "%2e") {
				t.Fatalf("URI(%q) = %q", s, c)
			}
		}
		if rest, ok := strings.CutPrefix(c, "file://"); ok {
			if !strings.HasPrefix(rest, "/") || strings.Contains(rest, "//") || strings.Contains(rest+"/", "/../") || strings.Contains(rest+"/", "/./") {
				t.Fatalf("URI(%q) = %q", s, c)
			}
		}
	})
}

func BenchmarkTarget(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Target("/mcp/tools/list?cursor=abc"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHost(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Host("files.example.test:8443"); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzHost: an accepted host is lower case, canonical (a fixed point), and
// carries none of the characters that could make it two hosts or a path.
func FuzzHost(f *testing.F) {
	for _, s := range []string{"files.example.test", "A.B:80", "[::1]:8080", "a.b.", "a,b", "[fe80::1%25x]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := Host(s)
		if err != nil {
			return
		}
		again, err := Host(h)
		if err != nil || again != h || h != strings.ToLower(s) {
			t.Fatalf("Host(%q) = %q, then %q, %v", s, h, again, err)
		}
		if strings.ContainsAny(h, ",@/%?# \\") || strings.HasSuffix(strings.Split(h, ":")[0], ".") {
			t.Fatalf("accepted %q", h)
		}
	})
}

// FuzzFileURIAgainstGo is a differential test: a file: URI the service
// accepts names the same file for a Go server that reads it with net/url
// and cleans the path (the usual way), so that a rule on the canonical form
// is a rule on the file the server opens; and the server's path holds no
// dot segment, which open() would resolve through symbolic links where
// path.Clean resolves it textually.
func FuzzFileURIAgainstGo(f *testing.F) {
	for _, s := range []string{"file:///tmp/../etc/passwd", "FILE://localhost/%65tc//passwd", "file:/etc/./x", "file:////etc/passwd", "file:///a/%2e%2E/b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := URI(s)
		if err != nil || !strings.HasPrefix(c, "file://") {
			return
		}
		theirs, err := url.Parse(s)
		if err != nil {
			return // Go refuses it: nothing to read differently
		}
		ours, err := url.Parse(c)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", c, s, err)
		}
		for _, seg := range strings.Split(theirs.Path, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q: accepted as %q, Go reads the dot segments of %q", s, c, theirs.Path)
			}
		}
		if path.Clean(theirs.Path) != path.Clean(ours.Path) {
			t.Fatalf("%q: Go reads %q, the canonical form %q names %q", s, path.Clean(theirs.Path), c, path.Clean(ours.Path))
		}
	})
}
