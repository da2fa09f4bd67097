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
		var out strings.Builder
		for i, c := range chunks {
			b, err := f.Chunk([]byte(c), i == len(chunks)-1)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
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
