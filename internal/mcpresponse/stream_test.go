package mcpresponse

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestSSEListFilterChunking(t *testing.T) {
	stream := "id: 0\ndata:\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[{\"name\":\"read\"},\r\ndata: {\"name\":\"delete_all\"}],\"nextCursor\":\"c\"}}\r\n\r\n"
	want := "id: 0\ndata:\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n" +
		"event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[{\"name\":\"read\"}],\"nextCursor\":\"c\"}}\r\n\r\n"
	keep := func(_, name string, _ json.RawMessage) bool { return name != "delete_all" }
	for seed := range uint64(200) {
		chunks := splitAt([]byte(stream), seed)
		f := NewSSEListFilter("tools/list", keep, 0)
		// The pieces are joined only at the end: a piece must stay valid
		// after the next chunk (it may be a slice of its own chunk).
		var pieces [][]byte
		for i, c := range chunks {
			b, err := f.Chunk([]byte(c), i == len(chunks)-1)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			pieces = append(pieces, b)
		}
		var out strings.Builder
		for _, b := range pieces {
			out.Write(b)
		}
		if out.String() != want || f.Removed != 1 {
			t.Fatalf("seed %d chunks %q:\n got %q\nwant %q (removed %d)", seed, chunks, out.String(), want, f.Removed)
		}
	}
}

func TestSSEListFilterFailsClosed(t *testing.T) {
	keep := func(string, string, json.RawMessage) bool { return true }
	tests := []struct {
		name    string
		chunks  []string
		max     int
		wantErr error
	}{
		{"unreadable result", []string{"data: {\"id\":1,\"result\":{\"tools\":[{\"name\":1}]}}\n\n"}, 0, ErrUnexpectedShape},
		{"event over the cap", []string{"data: {\"id\":1,", "\"result\":{\"tools\":[]}}"}, 16, ErrEventTooLarge},
		{"unterminated unreadable tail", []string{"data: {\"id\":1,\"result\":"}, 0, ErrUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewSSEListFilter("tools/list", keep, tt.max)
			var err error
			for i, c := range tt.chunks {
				if _, err = f.Chunk([]byte(c), i == len(tt.chunks)-1); err != nil {
					break
				}
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// FuzzSSEListFilter: however a stream is cut into chunks, the pieces
// Chunk returns (kept until the end) are the stream's events, each
// filtered on its own.
func FuzzSSEListFilter(f *testing.F) {
	f.Add([]byte("data: {\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"},{\"name\":\"x\"}]}}\n\n"+
		"data: {\"method\":\"m\"}\n\ndata: {\"method\":\"m\"}\r\n\r\n"), uint64(7), uint8(1))
	f.Add([]byte("id: 1\n\ndata: {\"id\":2,\"result\":{\"tools\":[{\"name\":\"x\"}]}}\r\r: c\n\n"), uint64(99), uint8(0))
	f.Add([]byte("data: {\"method\":\"m\"}\n\ndata: {\"id\":2,\n"+
		"data: \"result\":{\"tools\":[{\"name\":\"x\"}]}}\n\ndata: {\"method\":\"m\"}"), uint64(3), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, seed uint64, whole uint8) {
		keep := func(_, name string, _ json.RawMessage) bool { return name != "x" }
		// The reference: every event, and an unterminated tail, filtered
		// on its own.
		var want []byte
		var wantErr error
		r := NewReassembler(0)
		add := func(event []byte) error {
			out, _, err := FilterEvent("tools/list", event, keep)
			want = append(want, out...)
			return err
		}
		wantErr = r.Write(stream, add)
		if wantErr == nil {
			var rest []byte
			if rest, wantErr = r.Flush(add); wantErr == nil && len(rest) > 0 {
				wantErr = add(rest)
			}
		}
		chunks := splitAt(stream, seed)
		if whole%2 == 1 {
			chunks = []string{string(stream)}
		}
		sf := NewSSEListFilter("tools/list", keep, 0)
		var pieces [][]byte
		var err error
		for i, c := range chunks {
			var b []byte
			if b, err = sf.Chunk([]byte(c), i == len(chunks)-1); err != nil {
				break
			}
			pieces = append(pieces, b)
		}
		if len(chunks) == 0 {
			var b []byte
			b, err = sf.Chunk(nil, true)
			pieces = append(pieces, b)
		}
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("chunks %q: err %v, reference %v", chunks, err, wantErr)
		}
		if err != nil {
			return
		}
		var got []byte
		for _, b := range pieces {
			got = append(got, b...)
		}
		if string(got) != string(want) {
			t.Fatalf("chunks %q:\n got %q\nwant %q", chunks, got, want)
		}
	})
}
