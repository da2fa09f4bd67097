// Package bounded reads what comes from outside the process (an HTTP body,
// a file named in configuration) with a size limit, so that a peer or a
// misconfigured path cannot make the service read without end, names
// URLs in its errors without the credentials or query they may carry, and
// keeps a call's answer to the server asked (NoRedirects), and reads how
// long a server asks to be left alone (RetryAfter) within bounds.
package bounded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrTooLarge reports a body or file longer than its limit.
var ErrTooLarge = errors.New("larger than the limit")

// Read reads r to the end, failing with ErrTooLarge when it holds more
// than limit bytes.
func Read(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w of %d bytes", ErrTooLarge, limit)
	}
	return b, nil
}

// ReadFile reads the file at path, failing with ErrTooLarge when it holds
// more than limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := Read(f, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// Get fetches u with an Accept header of accept and returns its body,
// which must come with status 200 and hold at most limit bytes. Errors
// name u without userinfo or query (Redact).
func Get(ctx context.Context, client *http.Client, u, accept string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", Redact(u), ScrubURLError(err))
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", Redact(u), ScrubURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		Drain(resp.Body)
		return nil, fmt.Errorf("GET %s: status %d", Redact(u), resp.StatusCode)
	}
	b, err := Read(resp.Body, limit)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", Redact(u), err)
	}
	return b, nil
}

// Drain reads and drops a little of a body nobody wants, so that its
// connection can be reused.
func Drain(r io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 4<<10))
}

// NoRedirects returns a copy of base (of a zero client when nil) that
// follows no redirect: a 3xx is the answer, and the caller fails on it. A
// POST to a token, introspection or decision endpoint that a redirect
// turned into a GET to wherever Location says would take its answer from a
// server nobody configured. base itself is not changed.
func NoRedirects(base *http.Client) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// Redact returns u without userinfo, query or fragment, fit for an error
// or a log line: configuration may put credentials in any of them.
// A string that does not parse as a URL is replaced entirely.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	p.User, p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment = nil, "", false, "", ""
	return p.String()
}

// ScrubURLError keeps the cause of a *url.Error but drops its URL, which
// may carry credentials from configuration.
func ScrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// RetryAfter reads an HTTP Retry-After (delay-seconds or an HTTP-date,
// RFC 9110 section 10.2.3) at now, clamped to [lo, hi]: a server cannot
// make the service wait without end, nor hammer it at once. It is 0 when
// v is absent, negative or unreadable.
func RetryAfter(v string, now time.Time, lo, hi time.Duration) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0
	}
	return min(max(d, lo), hi)
}
