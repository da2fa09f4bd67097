package mcpresponse

import (
	"bytes"
	"errors"
	"testing"
)

// collect feeds chunks to a Reassembler and returns the events it emitted
// and what Flush returned.
func collect(t testing.TB, max int, chunks ...string) (events []string, rest string, err error) {
	t.Helper()
	r := NewReassembler(max)
	emit := func(e []byte) error { events = append(events, string(e)); return nil }
	for _, c := range chunks {
		if err := r.Write([]byte(c), emit); err != nil {
			return events, "", err
		}
	}
	tail, err := r.Flush(emit)
	return events, string(tail), err
}

func TestReassembler(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		events []string
		rest   string
	}{
		{"one event one chunk", []string{"data: a\n\n"}, []string{"data: a\n\n"}, ""},
		{"two events one chunk", []string{"data: a\n\ndata: b\n\n"}, []string{"data: a\n\n", "data: b\n\n"}, ""},
		{"event split inside data", []string{"da", "ta: a", "\n", "\n"}, []string{"data: a\n\n"}, ""},
		{"crlf terminator", []string{"data: a\r\n\r\nid: 2\r\n\r\n"}, []string{"data: a\r\n\r\n", "id: 2\r\n\r\n"}, ""},
		{"crlf split between cr and lf", []string{"data: a\r", "\n\r", "\n"}, []string{"data: a\r\n\r\n"}, ""},
		{"cr terminator", []string{"data: a\r\rdata: b\r\r"}, []string{"data: a\r\r", "data: b\r\r"}, ""},
		{"cr then lf next chunk is one line end", []string{"data: a\r\n\r", "\ndata: b\n\n"}, []string{"data: a\r\n\r\n", "data: b\n\n"}, ""},
		{"mixed line ends", []string{"event: message\ndata: x\r\n\r"}, []string{"event: message\ndata: x\r\n\r"}, ""},
		{"multi-line event", []string{"event: message\ndata: {\ndata: }\n\n"}, []string{"event: message\ndata: {\ndata: }\n\n"}, ""},
		{"unterminated tail flushed", []string{"data: a\n\ndata: b\n"}, []string{"data: a\n\n"}, "data: b\n"},
		{"priming event", []string{"id: 1\ndata:\n\n"}, []string{"id: 1\ndata:\n\n"}, ""},
		{"leading blank line is its own event", []string{"\ndata: a\n\n"}, []string{"\n", "data: a\n\n"}, ""},
		{"byte at a time", []string{"d", "a", ":", "\n", "\n", "x"}, []string{"da:\n\n"}, "x"},
		{"empty chunks", []string{"", "data: a\n", "", "\n", ""}, []string{"data: a\n\n"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, rest, err := collect(t, 0, tt.chunks...)
			if err != nil {
				t.Fatal(err)
			}
			if !equalStrings(events, tt.events) || rest != tt.rest {
				t.Fatalf("events %q rest %q, want %q rest %q", events, rest, tt.events, tt.rest)
			}
		})
	}
}

func TestReassemblerLimit(t *testing.T) {
	tests := []struct {
		name    string
		max     int
		chunks  []string
		wantErr error
	}{
		{"incomplete event over the cap", 8, []string{"data: 0123", "456789"}, ErrEventTooLarge},
		{"complete events never held", 8, []string{"data: 0123456789\n\n"}, nil},
		{"tail exactly at the cap", 8, []string{"data: 01"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := collect(t, tt.max, tt.chunks...)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestReassemblerEmitError(t *testing.T) {
	stop := errors.New("stop")
	r := NewReassembler(0)
	err := r.Write([]byte("data: a\n\ndata: b\n\n"), func([]byte) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the emit error", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzReassembler: any chunking of a stream yields the same events as the
// whole stream in one chunk, and the events plus the flushed tail are the
// stream's bytes.
func FuzzReassembler(f *testing.F) {
	f.Add([]byte("data: a\n\ndata: b\r\n\r\nid: 1\r\rdata: c"), uint64(0x9e3779b97f4a7c15))
	f.Add([]byte("\r\n\r\n\r\r\n\n"), uint64(3))
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\"}\n\n"), uint64(12345))
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64) {
		whole, wholeRest, err := collect(t, 0, string(stream))
		if err != nil {
			t.Fatal(err)
		}
		chunks := splitAt(stream, seed)
		got, gotRest, err := collect(t, 0, chunks...)
		if err != nil {
			t.Fatal(err)
		}
		if !equalStrings(got, whole) || gotRest != wholeRest {
			t.Fatalf("chunks %q: events %q rest %q; whole: %q rest %q", chunks, got, gotRest, whole, wholeRest)
		}
		var joined bytes.Buffer
		for _, e := range got {
			joined.WriteString(e)
		}
		joined.WriteString(gotRest)
		if !bytes.Equal(joined.Bytes(), stream) {
			t.Fatalf("events and tail %q are not the stream %q", joined.Bytes(), stream)
		}
	})
}

// splitAt cuts b into chunks whose lengths come from seed (a small
// xorshift generator), empty chunks included.
func splitAt(b []byte, seed uint64) []string {
	var out []string
	x := seed | 1
	for len(b) > 0 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		n := int(x % 9) // 0..8
		n = min(n, len(b))
		out = append(out, string(b[:n]))
		b = b[n:]
	}
	return out
}
