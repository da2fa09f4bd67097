package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Sink is where records end up. Only the writer's goroutine calls it, one
// call at a time.
type Sink interface {
	// Write takes one record; it may buffer it until Flush.
	Write(r *Record) error
	// Flush writes what Write buffered.
	Flush() error
	Close() error
}

// JSONSink writes one JSON object per line to an io.Writer, buffered until
// Flush. The output only ever sees whole lines, so a rotating file never
// splits a record across two files.
type JSONSink struct {
	out     io.Writer
	buf     []byte
	scratch bytes.Buffer
	enc     *json.Encoder
	// err is a write failure since the last Flush, reported by Flush so
	// that the writer counts the records since then as failed.
	err error
}

// jsonSinkBuffer is how much the sink gathers before writing.
const jsonSinkBuffer = 64 << 10

// NewJSONSink writes JSON lines to out; if out is an io.Closer, Close
// closes it.
func NewJSONSink(out io.Writer) *JSONSink {
	s := &JSONSink{out: out, buf: make([]byte, 0, jsonSinkBuffer)}
	s.enc = json.NewEncoder(&s.scratch)
	s.enc.SetEscapeHTML(false)
	return s
}

// Write encodes r and buffers the line, writing the buffer out first when
// the line would not fit.
func (s *JSONSink) Write(r *Record) error {
	s.scratch.Reset()
	if err := s.enc.Encode(r); err != nil {
		return err
	}
	if len(s.buf)+s.scratch.Len() > jsonSinkBuffer && len(s.buf) > 0 {
		if _, err := s.out.Write(s.buf); err != nil && s.err == nil {
			s.err = err
		}
		s.buf = s.buf[:0]
	}
	s.buf = append(s.buf, s.scratch.Bytes()...)
	return nil
}

// Flush writes the buffer out. A failed write drops the buffer, so that
// later records are not stuck behind it.
func (s *JSONSink) Flush() error {
	err := s.err
	s.err = nil
	if len(s.buf) > 0 {
		if _, werr := s.out.Write(s.buf); err == nil {
			err = werr
		}
		s.buf = s.buf[:0]
	}
	return err
}

// Close flushes and closes the output when it can be closed (not stdout).
func (s *JSONSink) Close() error {
	err := s.Flush()
	if c, ok := s.out.(io.Closer); ok && s.out != os.Stdout && s.out != os.Stderr {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// NewFileSink writes JSON lines to a file that rotates by size. The file is
// opened once here so that a bad path fails at start, not at the first
// decision.
func NewFileSink(c FileConfig) (*JSONSink, error) {
	f, err := os.OpenFile(c.Path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit file: %w", err)
	}
	_ = f.Close()
	if c.MaxSizeMB == 0 {
		c.MaxSizeMB = DefaultMaxSizeMB
	}
	if c.MaxBackups == 0 {
		c.MaxBackups = DefaultMaxBackups
	}
	return NewJSONSink(&lumberjack.Logger{Filename: c.Path, MaxSize: c.MaxSizeMB, MaxBackups: c.MaxBackups}), nil
}

// OTLPSink emits every record as an OpenTelemetry log record whose body is
// the record's JSON, through the logs SDK's batching processor.
type OTLPSink struct {
	provider *sdklog.LoggerProvider
	logger   otellog.Logger
}

// NewOTLPSink sends to the OTLP/gRPC collector c names, or to exp when not
// nil (tests).
func NewOTLPSink(ctx context.Context, c OTLPConfig, exp sdklog.Exporter) (*OTLPSink, error) {
	if exp == nil {
		if c.Endpoint == "" {
			return nil, fmt.Errorf("audit otlp sink: no collector endpoint (tracing.otlp_endpoint)")
		}
		opts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(c.Endpoint)}
		if c.Insecure {
			opts = append(opts, otlploggrpc.WithInsecure())
		}
		var err error
		if exp, err = otlploggrpc.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("audit otlp sink: %w", err)
		}
	}
	if c.ServiceName == "" {
		c.ServiceName = "extauthz"
	}
	lp := sdklog.NewLoggerProvider(
		sdklog.WithProcessor(sdklog.NewBatchProcessor(exp)),
		sdklog.WithResource(resource.NewSchemaless(semconv.ServiceName(c.ServiceName), semconv.ServiceVersion(c.Version))),
	)
	return &OTLPSink{provider: lp, logger: lp.Logger("github.com/extauthz/extauthz/internal/audit")}, nil
}

// Write emits r; the batch processor exports it later.
func (s *OTLPSink) Write(r *Record) error {
	body, err := json.Marshal(r)
	if err != nil {
		return err
	}
	var lr otellog.Record
	lr.SetEventName("extauthz.decision")
	lr.SetTimestamp(r.Time)
	lr.SetObservedTimestamp(time.Now())
	lr.SetSeverity(otellog.SeverityInfo)
	if !r.Allowed {
		lr.SetSeverity(otellog.SeverityWarn)
	}
	lr.SetBody(attribute.StringValue(string(body)))
	lr.AddAttributes(
		attribute.Int("extauthz.audit.schema", SchemaVersion),
		attribute.String("extauthz.decision_id", r.DecisionID),
		attribute.String("extauthz.route", r.Route),
		attribute.String("extauthz.outcome", r.Outcome),
	)
	s.logger.Emit(context.Background(), lr)
	return nil
}

// Flush leaves batching to the SDK.
func (s *OTLPSink) Flush() error { return nil }

// Close exports what is batched and stops the exporter.
func (s *OTLPSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.provider.Shutdown(ctx)
}
