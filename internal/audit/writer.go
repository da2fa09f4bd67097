package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// Sink names.
const (
	SinkStdout = "stdout"
	SinkFile   = "file"
	SinkOTLP   = "otlp"
)

// Which decisions are written.
const (
	DecisionsAll    = "all"
	DecisionsDenied = "denied"
)

// Defaults for Config and Options.
const (
	DefaultQueueSize    = 4096
	DefaultDropInterval = 10 * time.Second
	DefaultMaxSizeMB    = 100
	DefaultMaxBackups   = 5
)

// Config is the operator's audit configuration.
type Config struct {
	Sink string // stdout, file or otlp
	// Decisions is all (the default) or denied.
	Decisions string
	// SampleAllowed is the share of allowed decisions written, 0 to 1.
	SampleAllowed float64
	// LogArguments are the argument paths whose (truncated) values are
	// written; every other argument is written by name only.
	LogArguments []string
	File         FileConfig
	OTLP         OTLPConfig
	QueueSize    int // records waiting for the sink; DefaultQueueSize when 0
}

// FileConfig is where the file sink writes and how it rotates.
type FileConfig struct {
	Path       string
	MaxSizeMB  int // rotate beyond this size; DefaultMaxSizeMB when 0
	MaxBackups int // rotated files kept; DefaultMaxBackups when 0
}

// OTLPConfig is the collector the otlp sink sends to: the one traces go to.
type OTLPConfig struct {
	Endpoint    string // host:port of the OTLP/gRPC collector
	Insecure    bool
	ServiceName string
	Version     string
}

// Options are the writer's collaborators.
type Options struct {
	Logger *slog.Logger
	// Stdout is where the stdout sink writes (os.Stdout when nil).
	Stdout io.Writer
	// Rand returns a number in [0, 1) for sampling (math/rand when nil).
	Rand func() float64
	// DropInterval is how often drops and sink failures are logged;
	// Ticks replaces its ticker (tests).
	DropInterval time.Duration
	Ticks        <-chan time.Time
	// Sink replaces the configured sink (tests).
	Sink Sink
	// LogExporter replaces the OTLP exporter of the otlp sink (tests).
	LogExporter sdklog.Exporter
}

// Writer queues records and writes them to the sink on a goroutine of its
// own. A nil *Writer is off: Submit does nothing.
type Writer struct {
	q        chan Record
	sink     Sink
	denyOnly bool
	sample   float64
	rand     func() float64
	optIn    []string
	log      *slog.Logger

	dropped, failed, written atomic.Uint64
	closed                   atomic.Bool
	// pending counts records written to the sink since its last flush
	// (the run goroutine's own).
	pending uint64

	stop      chan struct{}
	done      sync.WaitGroup
	closeOnce sync.Once
}

// Validate reports the first error in c, naming the field as the
// configuration does.
func (c Config) Validate() error {
	switch c.Sink {
	case SinkStdout, SinkOTLP:
	case SinkFile:
		if c.File.Path == "" {
			return errors.New("file.path: required for the file sink")
		}
	default:
		return fmt.Errorf("sink: %q is not one of stdout, file, otlp", c.Sink)
	}
	switch c.Decisions {
	case "", DecisionsAll, DecisionsDenied:
	default:
		return fmt.Errorf("decisions: %q is not one of all, denied", c.Decisions)
	}
	if !(c.SampleAllowed >= 0 && c.SampleAllowed <= 1) {
		return fmt.Errorf("sample_allowed: %v is not between 0 and 1", c.SampleAllowed)
	}
	if len(c.LogArguments) > MaxArguments {
		return fmt.Errorf("log_arguments: %d paths, at most %d", len(c.LogArguments), MaxArguments)
	}
	for i, p := range c.LogArguments {
		if !ValidPath(p) {
			return fmt.Errorf("log_arguments[%d]: %q is not a dotted path of argument names", i, p)
		}
	}
	if c.File.MaxSizeMB < 0 || c.File.MaxBackups < 0 || c.QueueSize < 0 {
		return errors.New("file.max_size, file.max_backups and the queue size cannot be negative")
	}
	return nil
}

// New starts a writer. The caller closes it.
func New(ctx context.Context, c Config, o Options) (*Writer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	sink := o.Sink
	if sink == nil {
		var err error
		switch c.Sink {
		case SinkStdout:
			out := o.Stdout
			if out == nil {
				out = os.Stdout
			}
			sink = NewJSONSink(out)
		case SinkFile:
			sink, err = NewFileSink(c.File)
		case SinkOTLP:
			sink, err = NewOTLPSink(ctx, c.OTLP, o.LogExporter)
		}
		if err != nil {
			return nil, err
		}
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	w := &Writer{
		q:        make(chan Record, c.QueueSize),
		sink:     sink,
		denyOnly: c.Decisions == DecisionsDenied,
		sample:   c.SampleAllowed,
		rand:     o.Rand,
		optIn:    c.LogArguments,
		log:      o.Logger,
		stop:     make(chan struct{}),
	}
	ticks := o.Ticks
	var ticker *time.Ticker
	if ticks == nil {
		if o.DropInterval <= 0 {
			o.DropInterval = DefaultDropInterval
		}
		ticker = time.NewTicker(o.DropInterval)
		ticks = ticker.C
	}
	w.done.Add(2)
	go w.run()
	go w.report(ticks, ticker)
	return w, nil
}

// Wants reports whether a decision that allowed (or denied) the request
// would be written at all, so that the check path can skip filling a
// record that would be filtered out.
func (w *Writer) Wants(allowed bool) bool {
	return w != nil && (!allowed || !w.denyOnly)
}

// Sample decides whether a decision that allowed (or denied) the request
// is recorded: denials always, allowed ones unless only denials are, at the
// configured sample rate. A caller that has work to do for a record (such
// as copying a call's arguments) asks first and queues a kept record with
// Enqueue, so that a record sampled out costs nothing.
func (w *Writer) Sample(allowed bool) bool {
	if w == nil {
		return false
	}
	return !allowed || (!w.denyOnly && (w.sample >= 1 || w.rand() < w.sample))
}

// Submit queues a copy of *r and returns at once: it neither encodes nor
// writes. It returns false when the record was filtered out (denied only,
// sampling), or dropped because the queue is full or the writer closed;
// drops are counted.
func (w *Writer) Submit(r *Record) bool {
	if !w.Sample(r.Allowed) {
		return false
	}
	return w.Enqueue(r)
}

// Enqueue queues a copy of *r, a record Sample kept, without sampling it
// again. It returns false when the queue is full or the writer closed;
// drops are counted.
func (w *Writer) Enqueue(r *Record) bool {
	if w == nil {
		return false
	}
	if w.closed.Load() {
		w.dropped.Add(1)
		return false
	}
	select {
	case w.q <- *r:
		return true
	default:
		w.dropped.Add(1)
		return false
	}
}

// Dropped is the number of records dropped because the queue was full.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

// Failed is the number of records the sink failed to write.
func (w *Writer) Failed() uint64 { return w.failed.Load() }

// Written is the number of records the sink wrote and flushed.
func (w *Writer) Written() uint64 { return w.written.Load() }

// Close writes what is queued, flushes and closes the sink. A sink that
// stays blocked past ctx is abandoned: Close returns ctx's error.
func (w *Writer) Close(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.closeOnce.Do(func() { w.closed.Store(true); close(w.stop) })
	finished := make(chan struct{})
	go func() { w.done.Wait(); close(finished) }()
	select {
	case <-finished:
		return w.sink.Close()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes records as they come and flushes whenever the queue runs dry,
// so a burst costs one flush.
func (w *Writer) run() {
	defer w.done.Done()
	for {
		select {
		case r := <-w.q:
			w.write(&r)
			for n := len(w.q); n > 0; n-- {
				r = <-w.q
				w.write(&r)
			}
			w.flush()
		case <-w.stop:
			for n := len(w.q); n > 0; n-- {
				r := <-w.q
				w.write(&r)
			}
			w.flush()
			return
		}
	}
}

func (w *Writer) write(r *Record) {
	r.Schema = SchemaVersion
	if r.ArgumentsJSON != nil {
		r.Arguments = reduceArguments(r.ArgumentsJSON, w.optIn)
	}
	r.ArgumentsJSON = nil
	if err := w.sink.Write(r); err != nil {
		w.failed.Add(1)
		return
	}
	w.pending++
}

// flush counts the records since the last flush as written, or as failed
// when the flush fails (a buffered sink loses its buffer then).
func (w *Writer) flush() {
	if err := w.sink.Flush(); err != nil {
		w.failed.Add(w.pending)
	} else {
		w.written.Add(w.pending)
	}
	w.pending = 0
}

// report logs drops and sink failures at most once per tick, and once more
// at close, so that a full queue does not flood the log it may share a
// disk with.
func (w *Writer) report(ticks <-chan time.Time, ticker *time.Ticker) {
	defer w.done.Done()
	if ticker != nil {
		defer ticker.Stop()
	}
	var lastDropped, lastFailed uint64
	once := func() {
		d, f := w.dropped.Load(), w.failed.Load()
		if d > lastDropped || f > lastFailed {
			w.log.Warn("audit records lost", "dropped", d-lastDropped, "failed", f-lastFailed,
				"dropped_total", d, "failed_total", f)
		}
		lastDropped, lastFailed = d, f
	}
	for {
		select {
		case <-ticks:
			once()
		case <-w.stop:
			once()
			return
		}
	}
}
