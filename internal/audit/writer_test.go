package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 123456789, time.UTC)

// fullRecord has every field set, as an allowed tools/call on a route with
// lineage and token exchange makes it.
func fullRecord() Record {
	return Record{
		Time: t0, DecisionID: "req-1", Route: "tools", Allowed: true, Outcome: "allowed", Status: 200,
		Issuer: "corp", Subject: "corp|alice", Session: "sess-1", ClientID: "agent-app",
		SourcePrincipal: "spiffe://corp/ns/agents/sa/planner", SourceAddress: "10.0.0.7:51234",
		Protocol: "mcp", Method: "tools/call", Target: "search", TargetKind: "tool",
		ArgumentsJSON:    []byte(`{"query":"quarterly numbers","limit":5,"options":{"lang":"en"}}`),
		Lineage:          Lineage{Root: "ctx-root", Parent: "ctx-parent", Depth: 2, ActorChain: []string{"planner", "searcher"}, Trusted: true},
		ExchangeAudience: "https://search.internal", Rule: "tools.rules[0]", CacheHit: true,
		Latency: 1500 * time.Nanosecond, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RateLimit: "",
	}
}

func newWriter(t *testing.T, c Config, o Options) *Writer {
	t.Helper()
	if c.Sink == "" {
		c.Sink = SinkStdout
	}
	w, err := New(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// TestRecordGolden pins the JSON of records for an allow, denials, an
// exchange and a re-authorization, and validates each against the schema.
func TestRecordGolden(t *testing.T) {
	allow := fullRecord()
	unauth := Record{Time: t0, DecisionID: "gen-7f3a", Route: "tools", Outcome: "unauthenticated",
		Reason: "token expired", Status: 401, SourceAddress: "10.0.0.9:4000", Protocol: "mcp", Method: "tools/call",
		Target: "search", TargetKind: "tool", Latency: 900}
	forbidden := Record{Time: t0, DecisionID: "req-3", Route: "tools", Outcome: "forbidden", Reason: "tool not allowed",
		Status: 403, Issuer: "corp", Subject: "corp|bob", ClientID: "cli", Protocol: "mcp", Method: "tools/call",
		Target: "delete_repo", TargetKind: "tool", ArgumentsJSON: []byte(`{"repo":"x","force":true}`), Rule: "tools.rules[2]", Latency: 2000}
	limited := Record{Time: t0, DecisionID: "req-4", Route: "tools", Outcome: "rate_limited", Reason: "rate limit exceeded",
		Status: 429, Issuer: "corp", Subject: "corp|bob", Protocol: "mcp", Method: "tools/call", Target: "search",
		TargetKind: "tool", RateLimit: "tools.limits[0]", Latency: 1200}
	exchange := Record{Time: t0, DecisionID: "req-5", Route: "agents", Allowed: true, Outcome: "allowed", Status: 200,
		Issuer: "corp", Subject: "corp|alice", ClientID: "planner", Protocol: "a2a", Method: "message/send",
		Session: "ctx-9", Lineage: Lineage{Root: "ctx-9", Depth: 0}, ExchangeAudience: "agent://summarizer",
		Rule: "agents.rules[0]", Latency: 35000}
	reauth := Record{Time: t0, DecisionID: "req-6", Route: "tools", Outcome: "insufficient_scope",
		Reason: "step-up required", Status: 403, Issuer: "corp", Subject: "corp|alice", Session: "sess-1",
		Protocol: "mcp", Method: "tools/call", Target: "transfer", TargetKind: "tool", Rule: "tools.rules[1]", Latency: 800}
	resource := Record{Time: t0, DecisionID: "req-7", Route: "tools", Allowed: true, Outcome: "allowed", Status: 200,
		Subject: "corp|alice", Protocol: "mcp", Method: "resources/read", Target: "file:///etc/motd", TargetKind: "resource"}
	filtered := Record{Time: t0, DecisionID: "req-8", Phase: PhaseResponse, Route: "tools", Allowed: true, Outcome: "filtered",
		Status: 200, Issuer: "corp", Subject: "corp|bob", Protocol: "mcp", Method: "tools/list", Dropped: 3}

	out := &syncBuffer{}
	w := newWriter(t, Config{Sink: SinkStdout, SampleAllowed: 1, LogArguments: []string{"limit", "options.lang"}}, Options{Stdout: out})
	for _, r := range []Record{allow, unauth, forbidden, limited, exchange, reauth, resource, filtered} {
		if !w.Submit(&r) {
			t.Fatalf("record %s not queued", r.DecisionID)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.Bytes()
	recs := lines(t, got)
	if len(recs) != 8 {
		t.Fatalf("%d records, want 8", len(recs))
	}
	golden := filepath.Join("testdata", "records.golden.jsonl")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("records differ from %s (run with -update to accept):\n%s", golden, got)
	}
}

// TestEveryFieldWritten: the full record leaves no field of the schema
// out, so the golden file covers every field.
func TestEveryFieldWritten(t *testing.T) {
	b, err := os.ReadFile("../../docs/audit.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	r := fullRecord()
	r.Schema, r.Arguments, r.RateLimit = SchemaVersion, reduceArguments(r.ArgumentsJSON, nil), "l"
	r.Reason, r.Phase, r.Dropped = "why", PhaseResponse, 2
	enc, _ := json.Marshal(r)
	checkSchema(t, enc)
	var m map[string]any
	_ = json.Unmarshal(enc, &m)
	for name := range s.Properties {
		if _, ok := m[name]; !ok {
			t.Errorf("schema property %q is not written by a full record", name)
		}
	}
	for name := range m {
		if _, ok := s.Properties[name]; !ok {
			t.Errorf("record field %q is not in the schema", name)
		}
	}
}

// TestBlockedSink: a sink stuck on a full disk while 10,000 decisions are
// submitted. Every Submit returns (the test would hang otherwise), the
// queue takes exactly its capacity, the rest is dropped and counted, and
// once the disk frees up the queued records are written.
func TestBlockedSink(t *testing.T) {
	const queue, n = 64, 10000
	bw := newBlockingWriter()
	w := newWriter(t, Config{Sink: SinkStdout, SampleAllowed: 1, QueueSize: queue}, Options{Stdout: bw})
	first := fullRecord()
	w.Submit(&first)
	<-bw.entered // the writer goroutine is now stuck in the sink
	accepted := 0
	for i := range n {
		r := fullRecord()
		r.DecisionID = fmt.Sprint("req-", i)
		if w.Submit(&r) {
			accepted++
		}
	}
	if accepted != queue {
		t.Errorf("accepted %d, want the queue's %d", accepted, queue)
	}
	if got := w.Dropped(); got != n-queue {
		t.Errorf("dropped %d, want %d", got, n-queue)
	}
	close(bw.release)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := w.Written(); got != queue+1 {
		t.Errorf("written %d, want %d", got, queue+1)
	}
}

// TestCloseAbandonsStuckSink: Close waits no longer than its context.
func TestCloseAbandonsStuckSink(t *testing.T) {
	bw := newBlockingWriter()
	w, err := New(context.Background(), Config{Sink: SinkStdout, SampleAllowed: 1}, Options{Stdout: bw})
	if err != nil {
		t.Fatal(err)
	}
	r := fullRecord()
	w.Submit(&r)
	<-bw.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Close(ctx); err == nil {
		t.Error("Close of a stuck sink returned no error")
	}
	if w.Submit(&r) {
		t.Error("Submit after Close was queued")
	}
	close(bw.release)
}

// logRecorder collects log records on a channel.
type logRecorder struct{ ch chan slog.Record }

func (h logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.ch <- r
	return nil
}
func (h logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logRecorder) WithGroup(string) slog.Handler      { return h }

// TestDropsLoggedOncePerInterval: drops are logged once per tick with
// their count, and not at all in a tick without drops.
func TestDropsLoggedOncePerInterval(t *testing.T) {
	logs := logRecorder{ch: make(chan slog.Record, 10)}
	ticks := make(chan time.Time)
	bw := newBlockingWriter()
	w := newWriter(t, Config{Sink: SinkStdout, SampleAllowed: 1, QueueSize: 1},
		Options{Stdout: bw, Logger: slog.New(logs), Ticks: ticks})
	defer close(bw.release)
	r := fullRecord()
	w.Submit(&r)
	<-bw.entered
	for range 6 { // one queued, five dropped
		w.Submit(&r)
	}
	ticks <- time.Time{}
	ticks <- time.Time{} // the second tick is taken only after the first was handled
	got := <-logs.ch
	attrs := map[string]string{}
	got.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	if attrs["dropped"] != "5" || attrs["dropped_total"] != "5" {
		t.Errorf("log attrs %v, want 5 dropped", attrs)
	}
	select {
	case extra := <-logs.ch:
		t.Errorf("a tick without drops logged %q", extra.Message)
	default:
	}
}

// TestFilters: decisions: denied and sample_allowed decide what is queued.
func TestFilters(t *testing.T) {
	tests := []struct {
		name            string
		decisions       string
		sample, rnd     float64
		allowed, queued bool
	}{
		{"all, allow", DecisionsAll, 1, 0.99, true, true},
		{"all, deny", DecisionsAll, 1, 0.99, false, true},
		{"denied only, allow", DecisionsDenied, 1, 0, true, false},
		{"denied only, deny", DecisionsDenied, 1, 0, false, true},
		{"sampled in", DecisionsAll, 0.25, 0.2, true, true},
		{"sampled out", DecisionsAll, 0.25, 0.3, true, false},
		{"sampling never drops a denial", DecisionsAll, 0, 0.5, false, true},
		{"sample zero", "", 0, 0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWriter(t, Config{Decisions: tc.decisions, SampleAllowed: tc.sample},
				Options{Stdout: &syncBuffer{}, Rand: func() float64 { return tc.rnd }})
			r := fullRecord()
			r.Allowed = tc.allowed
			if got := w.Submit(&r); got != tc.queued {
				t.Errorf("Submit = %v, want %v", got, tc.queued)
			}
			if got := w.Sample(tc.allowed); got != tc.queued {
				t.Errorf("Sample = %v, want %v, as Submit decides", got, tc.queued)
			}
			if got := w.Wants(tc.allowed); !tc.queued && got && tc.decisions == DecisionsDenied {
				t.Errorf("Wants(%v) = true for a filtered decision", tc.allowed)
			}
		})
	}
	var off *Writer
	r := fullRecord()
	if off.Submit(&r) || off.Wants(false) || off.Sample(false) || off.Enqueue(&r) || off.Close(context.Background()) != nil {
		t.Error("a nil writer is not off")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want string
	}{
		{"stdout", Config{Sink: SinkStdout}, ""},
		{"no sink", Config{}, "sink:"},
		{"unknown sink", Config{Sink: "syslog"}, "sink:"},
		{"file without path", Config{Sink: SinkFile}, "file.path"},
		{"bad decisions", Config{Sink: SinkStdout, Decisions: "allowed"}, "decisions:"},
		{"sample above 1", Config{Sink: SinkStdout, SampleAllowed: 1.5}, "sample_allowed"},
		{"sample negative", Config{Sink: SinkStdout, SampleAllowed: -0.1}, "sample_allowed"},
		{"empty path segment", Config{Sink: SinkStdout, LogArguments: []string{"a..b"}}, "log_arguments[0]"},
		{"too many paths", Config{Sink: SinkStdout, LogArguments: make([]string, MaxArguments+1)}, "log_arguments:"},
		{"negative size", Config{Sink: SinkFile, File: FileConfig{Path: "x", MaxSizeMB: -1}}, "cannot be negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestNoSecretInOutput: argument values, which may be secrets, never reach
// the sink unless their path was opted in; the test greps the output for
// every secret it used.
func TestNoSecretInOutput(t *testing.T) {
	secrets := []string{"sk-live-51HxSECRET", "hunter2", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln", "session=cookie-v4lue"}
	out := &syncBuffer{}
	w := newWriter(t, Config{SampleAllowed: 1, LogArguments: []string{"query"}}, Options{Stdout: out})
	for i, s := range secrets {
		r := fullRecord()
		r.ArgumentsJSON = fmt.Appendf(nil, `{"api_key":%q,"nested":{"password":%q},"list":[%q],"query":"ok %d"}`, s, s, s, i)
		w.Submit(&r)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := out.Bytes()
	if n := len(lines(t, got)); n != len(secrets) {
		t.Fatalf("%d records, want %d", n, len(secrets))
	}
	for _, s := range secrets {
		if bytes.Contains(got, []byte(s)) {
			t.Errorf("secret %q written to the audit sink", s)
		}
	}
	if !bytes.Contains(got, []byte(`"name":"api_key"`)) || !bytes.Contains(got, []byte(`"value":"\"ok 0\""`)) {
		t.Errorf("argument names or the opted-in value missing:\n%s", got)
	}
}

// failingWriter fails every write, as a disk that refuses them.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, os.ErrPermission }

// TestFailingSinkCounted: a sink that fails loses records, counted as
// failed, and keeps taking later ones.
func TestFailingSinkCounted(t *testing.T) {
	w, err := New(context.Background(), Config{Sink: SinkStdout, SampleAllowed: 1}, Options{Stdout: failingWriter{}})
	if err != nil {
		t.Fatal(err)
	}
	r := fullRecord()
	for range 3 {
		w.Submit(&r)
	}
	_ = w.Close(context.Background())
	if w.Failed() != 3 || w.Written() != 0 {
		t.Errorf("failed %d written %d, want 3 and 0", w.Failed(), w.Written())
	}
}

// TestFileSinkRotates: the file sink writes JSON lines that validate, and
// rotates by size.
func TestFileSinkRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w := newWriter(t, Config{Sink: SinkFile, SampleAllowed: 1, QueueSize: 8192, File: FileConfig{Path: path, MaxSizeMB: 1, MaxBackups: 1}}, Options{})
	r := fullRecord()
	r.Reason = strings.Repeat("x", 600) // ~1 KB a record
	for range 3 {
		for range 1200 {
			w.Submit(&r)
		}
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		w = newWriter(t, Config{Sink: SinkFile, SampleAllowed: 1, QueueSize: 8192, File: FileConfig{Path: path, MaxSizeMB: 1, MaxBackups: 1}}, Options{})
	}
	if w.Dropped() != 0 {
		t.Fatalf("%d dropped", w.Dropped())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Pruning beyond max_backups is the rotation library's, and runs
	// asynchronously: only rotation itself is checked here.
	if len(entries) < 2 {
		t.Fatalf("%d files, want audit.log and a rotated one", len(entries))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines(t, b)) == 0 {
		t.Error("the current file holds no record")
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("audit file mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestFileSinkBadPath(t *testing.T) {
	_, err := New(context.Background(), Config{Sink: SinkFile, File: FileConfig{Path: filepath.Join(t.TempDir(), "missing", "audit.log")}}, Options{})
	if err == nil {
		t.Error("a file in a missing directory was accepted")
	}
}

// TestConcurrentSubmit: submits from many goroutines (run with -race).
func TestConcurrentSubmit(t *testing.T) {
	out := &syncBuffer{}
	w := newWriter(t, Config{SampleAllowed: 1, QueueSize: 10000}, Options{Stdout: out})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				r := fullRecord()
				r.DecisionID = fmt.Sprint(g, "-", i)
				w.Submit(&r)
			}
		})
	}
	wg.Wait()
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(lines(t, out.Bytes())); n != 800 {
		t.Errorf("%d records, want 800", n)
	}
}

// BenchmarkSubmit is the check path's cost: a copy into the queue.
func BenchmarkSubmit(b *testing.B) {
	w, err := New(context.Background(), Config{Sink: SinkStdout, SampleAllowed: 1, QueueSize: 1 << 16},
		Options{Sink: discardSink{}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close(context.Background())
	r := fullRecord()
	b.ReportAllocs()
	for b.Loop() {
		w.Submit(&r)
	}
}

type discardSink struct{}

func (discardSink) Write(*Record) error { return nil }
func (discardSink) Flush() error        { return nil }
func (discardSink) Close() error        { return nil }

// BenchmarkSubmitQueueOnly is the copy alone: the sink is stuck, so
// nothing competes for the queue (every submit past the capacity drops).
func BenchmarkSubmitQueueOnly(b *testing.B) {
	bw := newBlockingWriter()
	defer close(bw.release)
	w, err := New(context.Background(), Config{Sink: SinkStdout, SampleAllowed: 1, QueueSize: 1 << 20}, Options{Stdout: bw})
	if err != nil {
		b.Fatal(err)
	}
	r := fullRecord()
	w.Submit(&r)
	<-bw.entered
	b.ReportAllocs()
	for b.Loop() {
		w.Submit(&r)
	}
}

// BenchmarkEncode is the writer goroutine's cost of one record: argument
// names, JSON encoding, the buffered write (to io.Discard here).
func BenchmarkEncode(b *testing.B) {
	s := NewJSONSink(io.Discard)
	w := &Writer{sink: s}
	b.ReportAllocs()
	for b.Loop() {
		r := fullRecord()
		w.write(&r)
		w.flush()
	}
}
