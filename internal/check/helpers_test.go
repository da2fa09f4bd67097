package check

import (
	"testing"

	"github.com/extauthz/extauthz/internal/config"
)

// The tests inside the package cannot import pipelinetest (it imports
// check); these are its two steps for them, the one fixture they share.

// compileDoc parses and compiles doc, failing the test on any error; the
// caller closes the policy (or hands it to a pipeline).
func compileDoc(tb testing.TB, doc string, deps Deps) *Policy {
	tb.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := Compile(tb.Context(), cfg, deps)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// newPipeline is pipelinetest.New: parse, compile and start, the policy
// closed when the test ends.
func newPipeline(tb testing.TB, doc string, deps Deps, opts Options) *Pipeline {
	tb.Helper()
	p := compileDoc(tb, doc, deps)
	tb.Cleanup(p.Close)
	pl, err := New(p, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return pl
}

// swap is Pipeline.Swap, failing the test when p is refused; it returns
// the old policy for the caller to close.
func swap(tb testing.TB, pl *Pipeline, p *Policy) *Policy {
	tb.Helper()
	old, err := pl.Swap(p)
	if err != nil {
		p.Close()
		tb.Fatal(err)
	}
	return old
}
