package extprocauthz

import (
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/mcpresponse"
)

// TestStreamChunk: an injectable stream re-emits every upstream byte, as
// whole events; a notification goes out at once between events once the
// first chunk came, is queued before it, and is dropped after the end;
// an event over the size limit ends injection and the bytes pass as
// they come.
func TestStreamChunk(t *testing.T) {
	newStream := func(maxEvent int) *exchange {
		return &exchange{s: &Server{}, reasm: mcpresponse.NewReassembler(maxEvent), inject: make(chan []byte, maxQueued)}
	}
	note := []byte("event: message\ndata: {}\n\n")
	type step struct {
		chunk  string // upstream chunk; "" with inject
		eos    bool
		inject bool
		want   string // what the client gets for this step
	}
	tests := []struct {
		name     string
		maxEvent int
		steps    []step
	}{
		{name: "events split anywhere, injection between them", steps: []step{
			{chunk: "data: a\n", want: ""},
			{inject: true, want: string(note)},
			{chunk: "\ndata: b\n\nda", want: "data: a\n\ndata: b\n\n"},
			{inject: true, want: string(note)},
			{chunk: "ta: c\n\n", eos: true, want: "data: c\n\n"},
			{inject: true, want: ""},
		}},
		{name: "queued before the first chunk", steps: []step{
			{inject: true, want: ""},
			{chunk: "data: a\n\n", want: "data: a\n\n" + string(note)},
		}},
		{name: "queued, and the first chunk is the last", steps: []step{
			{inject: true, want: ""},
			{chunk: "data: a\n\ntail", eos: true, want: "data: a\n\n" + string(note) + "tail"},
		}},
		{name: "an event over the limit passes raw, injection ends", maxEvent: 8, steps: []step{
			{chunk: "data: a\n\n", want: "data: a\n\n"},
			{chunk: "data: far too long", want: "data: far too long"},
			{inject: true, want: ""},
			{chunk: " still\n\n", eos: true, want: " still\n\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStream(tt.maxEvent)
			var all, upstream strings.Builder
			for i, s := range tt.steps {
				var got []byte
				if s.inject {
					got = st.injectNow(note)
				} else {
					upstream.WriteString(s.chunk)
					got = st.streamChunk([]byte(s.chunk), s.eos)
				}
				if string(got) != s.want {
					t.Fatalf("step %d: got %q, want %q", i, got, s.want)
				}
				all.Write(got)
			}
			if without := strings.ReplaceAll(all.String(), string(note), ""); without != upstream.String() {
				t.Fatalf("the upstream's bytes changed: %q from %q", without, upstream.String())
			}
		})
	}
}
