package envoyauthz_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
	"github.com/extauthz/extauthz/internal/tracing"

	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

// TestTracing: a span per check continuing Envoy's trace (W3C or B3), and a
// client span for the JWKS fetch through the traced HTTP client.
func TestTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := tracing.New(context.Background(), tracing.Config{Exporter: exp, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	key := testtoken.RSA(t, "k1")
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(testtoken.JWKS(t, key)) }))
	defer jwks.Close()
	pl := pipelinetest.New(t, fmt.Sprintf("issuers: [{name: idp, issuer: https://idp.example.com, algorithms: [RS256], jwks_url: %s}]\nroutes: [{name: r, default: true, issuers: [idp]}]\n", jwks.URL),
		check.Deps{HTTPClient: &http.Client{Transport: tr.Transport(nil)}}, check.Options{Tracer: tr})
	for !pl.Policy().Ready() {
		time.Sleep(10 * time.Millisecond)
	}
	srv := envoyauthz.NewServer(pl)
	tok := key.Sign(t, jwt.MapClaims{"sub": "alice", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name, header, value, parent string
	}{
		{"w3c traceparent", "traceparent", "00-" + traceID + "-00f067aa0ba902b7-01", "00f067aa0ba902b7"},
		{"b3 single header", "b3", traceID + "-00f067aa0ba902b8-1", "00f067aa0ba902b8"},
		{"b3 multi header", "x-b3-traceid", traceID, "00f067aa0ba902b9"},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest("GET", "http://mcp.example.com/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set(tt.header, tt.value)
		if tt.header == "x-b3-traceid" {
			r.Header.Set("X-B3-SpanId", tt.parent)
			r.Header.Set("X-B3-Sampled", "1")
		}
		if _, err := srv.Check(context.Background(), envoytest.BuildCheckRequest(r, nil, envoytest.BuildOptions{})); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	checks := map[string]bool{}
	sawJWKS := false
	for _, s := range spans {
		switch {
		case s.Name == "extauthz.check":
			if s.SpanContext.TraceID().String() != traceID {
				t.Errorf("check span not in Envoy's trace: %s", s.SpanContext.TraceID())
			}
			checks[s.Parent.SpanID().String()] = true
			var outcome string
			for _, a := range s.Attributes {
				if a.Key == "extauthz.outcome" {
					outcome = a.Value.AsString()
				}
			}
			if outcome != "allowed" {
				t.Errorf("span outcome %q", outcome)
			}
		case s.SpanKind.String() == "client":
			sawJWKS = true
		}
	}
	for _, tt := range tests {
		if !checks[tt.parent] {
			t.Errorf("%s: no check span with parent %s (spans %d)", tt.name, tt.parent, len(spans))
		}
	}
	if !sawJWKS {
		t.Error("no client span for the JWKS fetch")
	}
}
