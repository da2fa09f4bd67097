package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

var (
	schemaOnce sync.Once
	schema     *jsonschema.Resolved
	schemaErr  error
)

// checkSchema validates one encoded record against docs/audit.schema.json.
func checkSchema(t testing.TB, line []byte) {
	t.Helper()
	schemaOnce.Do(func() {
		var b []byte
		if b, schemaErr = os.ReadFile("../../docs/audit.schema.json"); schemaErr != nil {
			return
		}
		var s jsonschema.Schema
		if schemaErr = json.Unmarshal(b, &s); schemaErr != nil {
			return
		}
		schema, schemaErr = s.Resolve(nil)
	})
	if schemaErr != nil {
		t.Fatalf("schema: %v", schemaErr)
	}
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatalf("record is not JSON: %v\n%s", err, line)
	}
	if err := schema.Validate(v); err != nil {
		t.Errorf("record does not match the schema: %v\n%s", err, line)
	}
}

// lines splits JSON-lines output, validating every record, and decodes it.
func lines(t testing.TB, out []byte) []Record {
	t.Helper()
	var recs []Record
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		checkSchema(t, sc.Bytes())
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// syncBuffer is a bytes.Buffer safe to read while the writer writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// blockingWriter stands for a file on a full filesystem: Write blocks until
// release is closed, after telling entered.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockingWriter() *blockingWriter {
	return &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return len(p), nil
}
