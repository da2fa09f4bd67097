// Package pipelinetest builds a check.Pipeline from a configuration
// document for tests and benchmarks: parse, compile and start, failing the
// test on any error. It is not used by the service itself.
package pipelinetest

import (
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
