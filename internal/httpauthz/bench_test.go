package httpauthz

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// recorder is a ResponseWriter that keeps nothing, so that a benchmark
// measures the handler and not the recorder.
type recorder struct {
	h      http.Header
	status int
}

func (w *recorder) Header() http.Header         { return w.h }
func (w *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (w *recorder) WriteHeader(s int)           { w.status = s }

// BenchmarkServeHTTP is one check per proxy convention, the verdict cache
// warm.
func BenchmarkServeHTTP(b *testing.B) {
	tok := "Bearer " + token(b, nil)
	cases := []struct {
		name   string
		opts   Options
		method string
		path   string
		host   string
		header http.Header
		body   string
		status int
	}{
		{
			name: "nginx allowed", path: "/check", status: 200,
			header: http.Header{"X-Original-Uri": {"/a2a"}, "X-Original-Method": {"POST"}, "X-Forwarded-Host": {"agent.example.com"},
				"X-Forwarded-Proto": {"https"}, "Authorization": {tok}, "User-Agent": {"bench"}, "Accept": {"application/json, text/event-stream"},
				"Content-Type": {"application/json"}, "X-Request-Id": {"r-1"}},
		},
		{
			name: "caddy allowed by Mcp-Name", path: "/", status: 200,
			header: http.Header{"X-Forwarded-Uri": {"/validated"}, "X-Forwarded-Method": {"POST"}, "X-Forwarded-Host": {"files.example.com"},
				"X-Forwarded-Proto": {"https"}, "X-Forwarded-For": {"203.0.113.9"}, "Authorization": {tok},
				"Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}, "Mcp-Protocol-Version": {"2026-07-28"}},
		},
		{
			name: "traefik body denied", path: "/", body: deleteCall, status: 403,
			header: http.Header{"X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Method": {"POST"}, "X-Forwarded-Host": {"files.example.com"},
				"Authorization": {tok}, "Content-Type": {"application/json"}},
		},
		{
			name: "envoy missing token", opts: Options{PathPrefix: "/authz"}, method: "POST", path: "/authz/a2a", host: "agent.example.com", status: 401,
			header: http.Header{"Content-Type": {"application/json"}},
		},
		{
			// The refusal's full answer is kept for the fetch.
			name: "nginx missing token, answer kept", opts: Options{Convention: Nginx}, path: "/check", status: 401,
			header: http.Header{"X-Original-Uri": {"/mcp"}, "X-Original-Method": {"POST"}, "X-Forwarded-Host": {"files.example.com"}},
		},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			h := NewHandler(newPipeline(b), c.opts)
			method := c.method
			if method == "" {
				method = http.MethodGet
			}
			u, err := url.ParseRequestURI(c.path)
			if err != nil {
				b.Fatal(err)
			}
			body := strings.NewReader(c.body)
			r := &http.Request{Method: method, URL: u, Host: c.host, Header: c.header, Proto: "HTTP/1.1",
				RemoteAddr: "127.0.0.1:40000", ContentLength: int64(len(c.body)), Body: io.NopCloser(body)}
			if c.host == "" {
				r.Host = "127.0.0.1:9193"
			}
			r = r.WithContext(b.Context())
			w := &recorder{h: http.Header{}}
			serveOnce := func() {
				clear(w.h)
				body.Reset(c.body)
				h.ServeHTTP(w, r)
			}
			serveOnce()
			if w.status != c.status {
				b.Fatalf("status %d, want %d", w.status, c.status)
			}
			b.ReportAllocs()
			for b.Loop() {
				serveOnce()
			}
		})
	}
}
