package audit

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// memExporter keeps exported log records.
type memExporter struct {
	mu   sync.Mutex
	recs []sdklog.Record
}

func (m *memExporter) Export(_ context.Context, rs []sdklog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range rs {
		m.recs = append(m.recs, r.Clone())
	}
	return nil
}
func (m *memExporter) Shutdown(context.Context) error   { return nil }
func (m *memExporter) ForceFlush(context.Context) error { return nil }

// TestOTLPSink: each record becomes one log record whose body is the
// record's JSON (valid against the schema), with the decision id and
// outcome as attributes, and denials at warning severity.
func TestOTLPSink(t *testing.T) {
	exp := &memExporter{}
	w := newWriter(t, Config{Sink: SinkOTLP, SampleAllowed: 1}, Options{LogExporter: exp})
	allow, deny := fullRecord(), fullRecord()
	deny.Allowed, deny.Outcome, deny.Status, deny.DecisionID = false, "forbidden", 403, "req-2"
	w.Submit(&allow)
	w.Submit(&deny)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	exp.mu.Lock()
	defer exp.mu.Unlock()
	if len(exp.recs) != 2 {
		t.Fatalf("%d log records, want 2", len(exp.recs))
	}
	for i, want := range []Record{allow, deny} {
		r := exp.recs[i]
		checkSchema(t, []byte(r.Body().AsString()))
		attrs := map[string]string{}
		r.WalkAttributes(func(kv attribute.KeyValue) bool { attrs[string(kv.Key)] = kv.Value.String(); return true })
		if attrs["extauthz.decision_id"] != want.DecisionID || attrs["extauthz.outcome"] != want.Outcome {
			t.Errorf("record %d attributes %v", i, attrs)
		}
		if r.EventName() != "extauthz.decision" || !r.Timestamp().Equal(t0) {
			t.Errorf("record %d event %q at %v", i, r.EventName(), r.Timestamp())
		}
	}
	if exp.recs[0].Severity() >= exp.recs[1].Severity() {
		t.Error("a denial is not logged at a higher severity than an allow")
	}
}

func TestOTLPSinkNeedsEndpoint(t *testing.T) {
	if _, err := New(context.Background(), Config{Sink: SinkOTLP}, Options{}); err == nil {
		t.Error("an otlp sink without an endpoint was accepted")
	}
}
