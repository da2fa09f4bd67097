// Package tracing sets up OpenTelemetry for the service: off unless an OTLP
// endpoint is configured; then a span per check that continues the trace
// Envoy propagated (W3C traceparent, or B3 where that is what arrives), and
// spans for the outgoing HTTP calls (JWKS, token exchange) through an
// instrumented transport.
package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/gRPC collector address (host:port); empty turns
	// tracing off.
	Endpoint    string
	Insecure    bool
	SampleRatio float64 // of root traces; a propagated sampling decision wins
	ServiceName string
	Version     string
	// Exporter replaces the OTLP exporter (tests).
	Exporter sdktrace.SpanExporter
}

// Tracing is the service's tracer. A nil *Tracing is off and costs nothing.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// New returns nil when tracing is off.
func New(ctx context.Context, c Config) (*Tracing, error) {
	exp := c.Exporter
	if exp == nil {
		if c.Endpoint == "" {
			return nil, nil
		}
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(c.Endpoint)}
		if c.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		var err error
		if exp, err = otlptracegrpc.New(ctx, opts...); err != nil {
			return nil, err
		}
	}
	if c.ServiceName == "" {
		c.ServiceName = "extauthz"
	}
	res := resource.NewSchemaless(semconv.ServiceName(c.ServiceName), semconv.ServiceVersion(c.Version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
	)
	return &Tracing{
		provider: tp,
		tracer:   tp.Tracer("github.com/extauthz/extauthz"),
		// W3C first; B3 (single and multi header) as Istio's Envoys send it.
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{},
			b3.New(b3.WithInjectEncoding(b3.B3MultipleHeader|b3.B3SingleHeader))),
	}, nil
}

// StartCheck starts the span of one check, as a child of the trace carried
// in the request headers (lower-case names, as Envoy sends them), and
// returns the function that records the decision on it and ends it. It
// implements check.Tracer.
func (t *Tracing) StartCheck(ctx context.Context, headers map[string]string) (context.Context, func(route, outcome string, status int, user string)) {
	ctx = t.propagator.Extract(ctx, propagation.MapCarrier(headers))
	ctx, span := t.tracer.Start(ctx, "extauthz.check", trace.WithSpanKind(trace.SpanKindServer))
	return ctx, func(route, outcome string, status int, user string) { endCheck(span, route, outcome, status, user) }
}

// endCheck records the decision on the span and ends it.
func endCheck(span trace.Span, route, outcome string, status int, user string) {
	attrs := []attribute.KeyValue{
		attribute.String("extauthz.route", route),
		attribute.String("extauthz.outcome", outcome),
		attribute.Int("http.response.status_code", status),
	}
	if user != "" {
		attrs = append(attrs, attribute.String("enduser.id", user))
	}
	span.SetAttributes(attrs...)
	if status >= 500 {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// Transport instruments outgoing HTTP calls (JWKS, discovery, STS) with
// client spans; off, it returns base.
func (t *Tracing) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if t == nil {
		return base
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.propagator))
}

// Flush exports the spans ended so far.
func (t *Tracing) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// Shutdown flushes and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}
