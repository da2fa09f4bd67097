package app

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/extauthz/extauthz/internal/tracing"
)

// TestCheckTracer: with tracing off the pipeline gets a nil Tracer (one
// nil test per check, no span), not a nil *tracing.Tracing in a non-nil
// interface; with tracing on it gets the service's tracer.
func TestCheckTracer(t *testing.T) {
	if tr := checkTracer(nil); tr != nil {
		t.Fatalf("tracing off: pipeline tracer %#v, want nil", tr)
	}
	on, err := tracing.New(context.Background(), tracing.Config{Exporter: tracetest.NewInMemoryExporter(), SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = on.Shutdown(context.Background()) })
	if tr := checkTracer(on); tr != on {
		t.Fatalf("tracing on: pipeline tracer %#v", tr)
	}
}
