package httpauthz

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/tracing"

	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

// The forward-auth front end gets the pipeline's load shedding and tracing
// (check.Pipeline.Check) like the gRPC one: these tests hold it to that.

// blockingVerifier holds every check in token verification until released,
// so that a test controls how many checks are in progress.
type blockingVerifier struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingVerifier) Verify(ctx context.Context, _ string, _, _ []string) (*jwtauth.Claims, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &jwtauth.Claims{IssuerName: "dev", Subject: "alice", ExpiresAt: time.Now().Add(time.Hour), Raw: map[string]any{"sub": "alice"}}, nil
}

// checkRequest is an nginx auth subrequest for the default route.
func checkRequest(t *testing.T, url, credential string) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/check", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Original-Uri", "/agent")
	req.Header.Set("X-Original-Method", "GET")
	req.Header.Set("X-Forwarded-Host", "agent.example.com")
	req.Header.Set("Authorization", "Bearer "+credential)
	return req
}

// TestOverloadIsShed: beyond limits.max_concurrent_checks a forward-auth
// check is answered at once with the configured status and Retry-After,
// and the check in progress is answered normally.
func TestOverloadIsShed(t *testing.T) {
	tests := []struct {
		name   string
		limits string
		status int
	}{
		{"configured status", "limits: {max_concurrent_checks: 1, overload_status: 429}", 429},
		{"default status", "limits: {max_concurrent_checks: 1}", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bv := &blockingVerifier{entered: make(chan struct{}, 1), release: make(chan struct{})}
			pl := pipelinetest.New(t, "issuers: [{name: dev, secret: "+secret+"}]\nroutes: [{name: agent, default: true, issuers: [dev]}]\n"+tt.limits+"\n",
				check.Deps{Verifier: bv}, check.Options{})
			srv := serveWith(t, pl, Options{})

			first := make(chan int, 1)
			go func() {
				res, err := srv.Client().Do(checkRequest(t, srv.URL, "a.b.c"))
				if err != nil {
					first <- 0
					return
				}
				res.Body.Close()
				first <- res.StatusCode
			}()
			select {
			case <-bv.entered: // the first check is in progress
			case <-time.After(10 * time.Second):
				t.Fatal("the first check never reached verification")
			}
			res, err := srv.Client().Do(checkRequest(t, srv.URL, "d.e.f"))
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, res.Body)
			res.Body.Close()
			if res.StatusCode != tt.status || res.Header.Get("Retry-After") != "1" || !strings.Contains(body, `"error":"overloaded"`) {
				t.Fatalf("overloaded check: %d Retry-After %q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
			}
			close(bv.release)
			if got := <-first; got != http.StatusOK {
				t.Fatalf("the check in progress: status %d", got)
			}
			// Capacity is back.
			go func() { <-bv.entered }()
			res, err = srv.Client().Do(checkRequest(t, srv.URL, "g.h.i"))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("after the overload: status %d", res.StatusCode)
			}
		})
	}
}

// TestTracing: with tracing on, every forward-auth check gets one span,
// continuing the trace the proxy propagated, with the decision on it.
func TestTracing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := tracing.New(t.Context(), tracing.Config{Exporter: exp, SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	pl := pipelinetest.New(t, testConfig, check.Deps{Now: now}, check.Options{Now: now, Tracer: tr})
	srv := serveWith(t, pl, Options{})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	tests := []struct {
		name, parent, credential, outcome string
		status                            int
	}{
		{"allowed", "00f067aa0ba902b7", token(t, nil), "allowed", 200},
		{"denied", "00f067aa0ba902b8", "not-a-token", "invalid_token", 401},
	}
	for _, tt := range tests {
		req := checkRequest(t, srv.URL, tt.credential)
		req.Header.Set("Traceparent", "00-"+traceID+"-"+tt.parent+"-01")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.status {
			t.Fatalf("%s: status %d", tt.name, res.StatusCode)
		}
	}
	if err := tr.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != len(tests) {
		t.Fatalf("%d spans for %d checks", len(spans), len(tests))
	}
	for _, tt := range tests {
		var found bool
		for _, s := range spans {
			if s.Name != "extauthz.check" || s.Parent.SpanID().String() != tt.parent {
				continue
			}
			found = true
			if s.SpanContext.TraceID().String() != traceID {
				t.Errorf("%s: span not in the proxy's trace: %s", tt.name, s.SpanContext.TraceID())
			}
			attrs := map[string]string{}
			for _, a := range s.Attributes {
				attrs[string(a.Key)] = a.Value.String()
			}
			if attrs["extauthz.route"] != "agent" || attrs["extauthz.outcome"] != tt.outcome || attrs["http.response.status_code"] != strconv.Itoa(tt.status) {
				t.Errorf("%s: span attributes %v", tt.name, attrs)
			}
		}
		if !found {
			t.Errorf("%s: no check span with parent %s", tt.name, tt.parent)
		}
	}
}
