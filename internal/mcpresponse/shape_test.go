package mcpresponse

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestListMethodOf: a message is the list its result's member says;
// anything a client could read as a list the filter did not see is an
// error.
func TestListMethodOf(t *testing.T) {
	tests := []struct {
		name, msg, want string
		wantErr         error
	}{
		{name: "tools", msg: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, want: "tools/list"},
		{name: "prompts", msg: `{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"a"}],"nextCursor":"c"}}`, want: "prompts/list"},
		{name: "resources", msg: `{"jsonrpc":"2.0","id":1,"result":{"resources":[]}}`, want: "resources/list"},
		{name: "templates", msg: `{"id":1,"result":{"resourceTemplates":[]},"jsonrpc":"2.0"}`, want: "resources/templates/list"},
		{name: "skills", msg: `{"jsonrpc":"2.0","id":1,"result":{"skills":[],"ttlMs":0,"cacheScope":"private"}}`, want: "skills/list"},
		{name: "skills and resources", msg: `{"id":1,"result":{"skills":[],"resources":[]}}`, wantErr: ErrUnexpectedShape},
		{name: "a skills key in another case", msg: `{"id":1,"result":{"Skills":[]}}`, wantErr: ErrUnexpectedShape},
		{name: "a list member that is not an array is still the list (Filter refuses it)", msg: `{"id":1,"result":{"tools":"x"}}`, want: "tools/list"},
		{name: "another result", msg: `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"tools"}]}}`},
		{name: "a list deeper than result's members", msg: `{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"tools":[{"name":"x"}]}}}`},
		{name: "a list member outside result", msg: `{"jsonrpc":"2.0","method":"m","params":{"tools":[{"name":"x"}]}}`},
		{name: "a list member of error's data", msg: `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":{"tools":[]}}}`},
		{name: "a result that is an array", msg: `{"jsonrpc":"2.0","id":1,"result":[{"tools":[]}]}`},
		{name: "a notification", msg: `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`},
		{name: "a result with two lists", msg: `{"id":1,"result":{"tools":[],"prompts":[]}}`, wantErr: ErrUnexpectedShape},
		{name: "a list key in another case", msg: `{"id":1,"result":{"Tools":[{"name":"x"}]}}`, wantErr: ErrUnexpectedShape},
		{name: "a list key folding onto resources", msg: `{"id":1,"result":{"reſources":[]}}`, wantErr: ErrUnexpectedShape},
		{name: "a result key in another case", msg: `{"id":1,"Result":{"tools":[]}}`, wantErr: ErrUnexpectedShape},
		{name: "a repeated result", msg: `{"id":1,"result":{},"result":{"tools":[]}}`, wantErr: ErrUnreadable},
		{name: "a repeated list", msg: `{"id":1,"result":{"tools":[],"tools":[{"name":"x"}]}}`, wantErr: ErrUnreadable},
		{name: "a batch", msg: `[{"id":1,"result":{"tools":[]}}]`, wantErr: ErrUnexpectedShape},
		{name: "not JSON", msg: `{"id":1,"result":{"tools":[]}`, wantErr: ErrUnreadable},
		{name: "a string", msg: `"tools"`, wantErr: ErrUnexpectedShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ListMethodOf([]byte(tt.msg))
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("got %q %v, want %q %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestSSEShapeFilter: on a stream whose request names no list, list
// results are filtered by shape and the rest passes byte for byte; without
// a predicate a list is an error.
func TestSSEShapeFilter(t *testing.T) {
	keep := func(_, name string, _ json.RawMessage) bool { return !strings.HasPrefix(name, "secret") }
	note := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"data\":\"tools\"}}\n\n"
	tests := []struct {
		name    string
		keep    Predicate
		stream  string
		want    string
		removed int
		wantErr error
	}{
		{name: "other events pass", keep: keep, stream: "id: 1\ndata:\n\n: c\n\n" + note, want: "id: 1\ndata:\n\n: c\n\n" + note},
		{name: "tools", keep: keep, stream: note + "id: 4\ndata: {\"id\":2,\"result\":{\"tools\":[{\"name\":\"secret_a\"},{\"name\":\"b\"}]}}\r\n\r\n",
			// The new data line ends as the event's first line does.
			want: note + "id: 4\ndata: {\"id\":2,\"result\":{\"tools\":[{\"name\":\"b\"}]}}\n\r\n", removed: 1},
		{name: "prompts over two data lines", keep: keep, stream: "data: {\"id\":2,\"result\":{\"prompts\":[{\"name\":\"secret\"},\ndata: {\"name\":\"p\"}]}}\n\n",
			want: "data: {\"id\":2,\"result\":{\"prompts\":[{\"name\":\"p\"}]}}\n\n", removed: 1},
		{name: "resources, cache scope made private", keep: keep, stream: "data: {\"id\":2,\"result\":{\"resources\":[{\"uri\":\"secret:x\"}],\"cacheScope\":\"public\"}}\n\n",
			want: "data: {\"id\":2,\"result\":{\"resources\":[],\"cacheScope\":\"private\"}}\n\n", removed: 1},
		{name: "an unterminated list at the end is filtered", keep: keep, stream: "data: {\"id\":2,\"result\":{\"tools\":[{\"name\":\"secret\"}]}}",
			want: "data: {\"id\":2,\"result\":{\"tools\":[]}}\n", removed: 1},
		{name: "an unreadable event", keep: keep, stream: note + "data: {\"id\":2,\"result\":{\"tools\":[{\"name\":\"b\"}]}\n\n", wantErr: ErrUnreadable},
		{name: "a lone CR hides a list", keep: keep, stream: note + "data:\r{\"id\":2,\"result\":{\"tools\":[{\"name\":\"secret\"}]}}\n\n", wantErr: ErrAmbiguousEvent},
		{name: "a byte order mark before a list", keep: keep, stream: "\xEF\xBB\xBFdata: {\"id\":2,\"result\":{\"tools\":[{\"name\":\"secret\"}]}}\n\n", wantErr: ErrAmbiguousEvent},
		{name: "no predicate: a list hidden by a lone CR is refused", stream: note + "data:\r{\"id\":2,\"result\":{\"tools\":[]}}\n\n", wantErr: ErrAmbiguousEvent},
		{name: "two lists", keep: keep, stream: "data: {\"id\":2,\"result\":{\"tools\":[],\"prompts\":[]}}\n\n", wantErr: ErrUnexpectedShape},
		{name: "no predicate: other events pass", stream: note, want: note},
		{name: "no predicate: a list is refused", stream: note + "data: {\"id\":2,\"result\":{\"tools\":[]}}\n\n", wantErr: ErrListRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewSSEShapeFilter(tt.keep, 0)
			out, err := f.Chunk([]byte(tt.stream), true)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && (string(out) != tt.want || f.Removed != tt.removed) {
				t.Fatalf("got %q (removed %d)\nwant %q (%d)", out, f.Removed, tt.want, tt.removed)
			}
		})
	}
}

// FuzzFilterByShape: whatever the upstream sends, a message FilterByShape
// passes holds no refused entry for a client reading it with
// encoding/json, which matches keys case-insensitively, in any of the
// lists of its result; and a message it leaves unchanged is no list for
// ListMethodOf.
func FuzzFilterByShape(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"x"},{"name":"a"}]}}`))
	f.Add([]byte(`{"id":1,"result":{"resourceTemplates":[{"uriTemplate":"x"}],"cacheScope":"public"}}`))
	f.Add([]byte(`{"id":1,"result":{"TOOLS":[{"name":"x"}]}}`))
	f.Add([]byte(`{"id":1,"result":{"prompts":[{"Name":"x","name":"a"}]}}`))
	f.Add([]byte(`{"method":"m","params":{"tools":[{"name":"x"}]}}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		refused := func(_, name string, _ json.RawMessage) bool { return name != "x" }
		out, _, _, err := FilterByShape(msg, refused)
		if err != nil {
			return
		}
		var doc struct {
			Result map[string]json.RawMessage
		}
		if json.Unmarshal(out, &doc) != nil {
			return // no client reads it
		}
		if name := refusedEntryIn(doc.Result); name != "" {
			t.Fatalf("%q passed as %q with a refused entry", msg, out)
		}
		if bytes.Equal(out, msg) {
			if m, _ := ListMethodOf(msg); m != "" {
				if _, removed, _ := FilterList(m, msg, refused); removed > 0 {
					t.Fatalf("%q passed unchanged though %s removes %d", msg, m, removed)
				}
			}
		}
	})
}

// refusedEntryIn returns "x" when a list of result, as encoding/json reads
// it (keys matched case-insensitively), holds an entry named "x".
func refusedEntryIn(result map[string]json.RawMessage) string {
	names := map[string]string{"tools": "name", "prompts": "name", "resources": "uri", "resourcetemplates": "uritemplate", "skills": "name"}
	for key, raw := range result {
		nameKey, isList := names[strings.ToLower(key)]
		if !isList {
			continue
		}
		var entries []map[string]json.RawMessage
		if json.Unmarshal(raw, &entries) != nil {
			continue
		}
		for _, e := range entries {
			for k, v := range e {
				var s string
				if strings.EqualFold(k, nameKey) && json.Unmarshal(v, &s) == nil && s == "x" {
					return s
				}
			}
		}
	}
	return ""
}

// TestFilterAnswerByShape: the JSON answer to a call that is no list,
// read for the lists a client could take for its pending list's answer.
func TestFilterAnswerByShape(t *testing.T) {
	keep := func(_, name string, _ json.RawMessage) bool { return name != "x" }
	tests := []struct {
		name, body, want string
		wantErr          error
	}{
		{name: "a list is filtered", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"x"},{"name":"a"}]}}`, want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}`},
		{name: "another result passes", body: `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`, want: `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`},
		{name: "a batch of no list passes", body: ` [{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","method":"m"}]`, want: ` [{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","method":"m"}]`},
		{name: "a batch holding a list", body: `[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"result":{"prompts":[]}}]`, wantErr: ErrUnexpectedShape},
		{name: "a batch element no object", body: `[{"jsonrpc":"2.0","id":2,"result":{}},3]`, wantErr: ErrUnexpectedShape},
		{name: "a batch element with a list key in another case", body: `[{"id":1,"result":{"TOOLS":[{"name":"x"}]}}]`, wantErr: ErrUnexpectedShape},
		{name: "a batch not JSON", body: `[{"id":1,"result":{}}`, wantErr: ErrUnreadable},
		{name: "a repeated key in a batch element", body: `[{"id":1,"result":{},"result":{"tools":[{"name":"x"}]}}]`, wantErr: ErrUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, _, err := FilterAnswerByShape([]byte(tt.body), keep)
			if !errors.Is(err, tt.wantErr) || string(out) != tt.want {
				t.Fatalf("got %s %v, want %s %v", out, err, tt.want, tt.wantErr)
			}
		})
	}
}

// FuzzFilterAnswerByShape: what FilterAnswerByShape passes holds no
// refused entry for a client reading it with encoding/json, as one
// message or as a batch.
func FuzzFilterAnswerByShape(f *testing.F) {
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"x"}]}}]`))
	f.Add([]byte(`[{"id":2,"result":{}},{"id":1,"result":{"Tools":[{"name":"x"}]}}]`))
	f.Add([]byte(`{"id":1,"result":{"prompts":[{"name":"x"},{"name":"a"}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		keep := func(_, name string, _ json.RawMessage) bool { return name != "x" }
		out, _, _, err := FilterAnswerByShape(body, keep)
		if err != nil {
			return
		}
		type message struct{ Result map[string]json.RawMessage }
		var one message
		var batch []message
		switch {
		case json.Unmarshal(out, &one) == nil:
			batch = []message{one}
		case json.Unmarshal(out, &batch) == nil:
		default:
			return // no client reads it
		}
		for _, m := range batch {
			if refusedEntryIn(m.Result) != "" {
				t.Fatalf("%q passed as %q with a refused entry", body, out)
			}
		}
	})
}
