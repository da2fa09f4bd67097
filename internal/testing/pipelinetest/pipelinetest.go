// Package pipelinetest builds a check.Pipeline from a configuration
// document for tests and benchmarks: parse, compile and start, failing the
// test on any error. It is not used by the service itself.
package pipelinetest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
)

// New returns a pipeline serving doc with deps and opts; its policy is
// closed when the test ends.
func New(tb testing.TB, doc string, deps check.Deps, opts check.Options) *check.Pipeline {
	tb.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := check.Compile(tb.Context(), cfg, deps)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	pl, err := check.New(p, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return pl
}

// Request is what a front end hands the pipeline for r with body (nil: the
// body was not sent): header names lower-cased, repeated ones joined with
// ",", as both front ends do. partial marks a body the proxy cut short.
func Request(r *http.Request, body []byte, partial bool) *check.Request {
	h := make(check.Headers, len(r.Header))
	for name, values := range r.Header {
		h[strings.ToLower(name)] = strings.Join(values, ",")
	}
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	scheme := r.URL.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return &check.Request{Method: r.Method, Scheme: scheme, Host: host, Path: r.URL.RequestURI(), Protocol: "HTTP/1.1",
		Headers: h, Body: body, BodyPartial: partial}
}
