package mcpresponse

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// serverRequestOf is the server's request msg is by its own method member
// (refusedIn with every request refused, not looking into a result).
func serverRequestOf(msg []byte) (string, error) {
	method, _, inResult, err := newRequestReader(jsonrpc.AnswersAny).refusedIn(msg)
	if inResult {
		return "", err
	}
	return method, err
}

// TestServerRequestOf: a message is one of the server's requests by its
// method member, as clients dispatch it; anything a client could read as
// a method the filter did not see is an error.
func TestServerRequestOf(t *testing.T) {
	tests := []struct {
		name, msg, want string
		wantErr         error
	}{
		{name: "elicitation", msg: `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"mode":"url","url":"https://x.example"}}`, want: "elicitation/create"},
		{name: "sampling", msg: `{"jsonrpc":"2.0","id":"s","method":"sampling/createMessage","params":{}}`, want: "sampling/createMessage"},
		{name: "roots", msg: `{"method":"roots/list","id":2,"jsonrpc":"2.0"}`, want: "roots/list"},
		{name: "without an id (no client answers it, still dropped)", msg: `{"jsonrpc":"2.0","method":"elicitation/create"}`, want: "elicitation/create"},
		{name: "an escaped method", msg: `{"jsonrpc":"2.0","id":1,"method":"\u0065licitation/create"}`, want: "elicitation/create"},
		{name: "white space", msg: " {\n \"method\" : \"roots/list\" , \"id\":1}\n", want: "roots/list"},
		{name: "another request", msg: `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{name: "a notification", msg: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`},
		{name: "a method in another case", msg: `{"jsonrpc":"2.0","id":1,"method":"Elicitation/Create"}`},
		{name: "a method deeper", msg: `{"jsonrpc":"2.0","id":1,"result":{"method":"elicitation/create"}}`},
		{name: "a method that is no string", msg: `{"jsonrpc":"2.0","id":1,"method":["elicitation/create"]}`},
		{name: "a response", msg: `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`},
		{name: "a method key in another case", msg: `{"jsonrpc":"2.0","id":1,"Method":"elicitation/create"}`, wantErr: ErrUnexpectedShape},
		{name: "a method key in another case beside one", msg: `{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"roots/list"}`, wantErr: ErrUnexpectedShape},
		{name: "a repeated method", msg: `{"id":1,"method":"ping","method":"roots/list"}`, wantErr: ErrUnreadable},
		{name: "an escape spelling a repeated method", msg: `{"id":1,"method":"ping","m\u0065thod":"roots/list"}`, wantErr: ErrUnreadable},
		{name: "an unpaired surrogate", msg: `{"id":1,"method":"roots/list\ud800"}`, want: ""},
		{name: "a batch", msg: `[{"id":1,"method":"roots/list"}]`, wantErr: ErrUnexpectedShape},
		{name: "not JSON", msg: `{"id":1,"method":"roots/list"`, wantErr: ErrUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := serverRequestOf([]byte(tt.msg))
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("got %q %v, want %q %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestSSERequestFilter: on a call's stream the server's requests the
// rules refuse dispatch nothing, keeping their event id; everything else
// passes byte for byte, however the stream is cut into chunks.
func TestSSERequestFilter(t *testing.T) {
	refused := jsonrpc.AnswersElicitation | jsonrpc.AnswersRoots // not sampling
	progress := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1}}\n\n"
	elicit := "id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\n" +
		"data: \"method\":\"elicitation/create\",\"params\":{\"mode\":\"url\",\"url\":\"https://x.example\"}}\n\n"
	sampling := "data: {\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n"
	roots := "id: 8\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"roots/list\"}\r\n\r\n"
	list := "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"secret\"}]}}\n\n"
	result := "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"elicitation/create\"}]}}\n\n"
	in := ": comment\n\n" + progress + elicit + sampling + roots + list + result
	want := ": comment\n\n" + progress + "id: 7\nevent: message\n\n" + sampling + "id: 8\r\n\r\n" + list + result
	for _, size := range []int{1, 7, 64, len(in)} {
		f := NewSSEEventFilter(0)
		f.DropRequests(refused)
		var out strings.Builder
		for i := 0; i < len(in); i += size {
			chunk := in[i:min(i+size, len(in))]
			got, err := f.Chunk([]byte(chunk), i+size >= len(in))
			if err != nil {
				t.Fatalf("chunks of %d: %v", size, err)
			}
			out.Write(got)
		}
		if out.String() != want {
			t.Fatalf("chunks of %d:\n got %q\nwant %q", size, out.String(), want)
		}
		if f.Dropped != 2 || f.Removed != 0 {
			t.Fatalf("chunks of %d: dropped %d, removed %d; want 2, 0", size, f.Dropped, f.Removed)
		}
	}
}

// TestSSERequestFilterFailsClosed: an event that could be a request the
// client reads and the filter did not is an error.
func TestSSERequestFilterFailsClosed(t *testing.T) {
	tests := map[string]string{
		"a method key in another case": "data: {\"id\":1,\"Method\":\"elicitation/create\"}\n\n",
		"a repeated method":            "data: {\"id\":1,\"method\":\"ping\",\"method\":\"roots/list\"}\n\n",
		"not JSON":                     "data: {\"id\":1,\"method\":\"roots/list\"\n\n",
		"a batch":                      "data: [{\"id\":1,\"method\":\"roots/list\"}]\n\n",
		"a CR alone ends a line":       "data:\r{\"id\":1,\"method\":\"roots/list\"}\n\n",
		"over the size limit":          "data: {\"id\":1,\"method\":\"roots/list\",\"params\":{\"pad\":\"" + strings.Repeat("x", 200) + "\"}}\n\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			// In chunks of 16 bytes, so that an event is held whole before
			// it is read (and the limit is on what is held).
			f := NewSSEEventFilter(128)
			f.DropRequests(jsonrpc.AnswersAny)
			var out []byte
			for i := 0; i < len(in); i += 16 {
				got, err := f.Chunk([]byte(in[i:min(i+16, len(in))]), i+16 >= len(in))
				if err != nil {
					return
				}
				out = append(out, got...)
			}
			t.Fatalf("got %q, want an error", out)
		})
	}
}

// TestSSEShapeFilterDropsRequests: a list filter that also drops the
// server's requests does both on one stream.
func TestSSEShapeFilterDropsRequests(t *testing.T) {
	keep := func(_, name string, _ json.RawMessage) bool { return !strings.HasPrefix(name, "secret") }
	elicit := "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"elicitation/create\",\"params\":{}}\n\n"
	list := "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"secret\"},{\"name\":\"open\"}]}}\n\n"
	for name, f := range map[string]*SSEListFilter{
		"by shape":    NewSSEShapeFilter(keep, 0),
		"by its call": NewSSEListFilter("tools/list", keep, 0),
	} {
		t.Run(name, func(t *testing.T) {
			f.DropRequests(jsonrpc.AnswersAny)
			out, err := f.Chunk([]byte(elicit+list), true)
			if err != nil {
				t.Fatal(err)
			}
			want := "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[{\"name\":\"open\"}]}}\n\n"
			if string(out) != want || f.Dropped != 1 || f.Removed != 1 {
				t.Fatalf("got %q (dropped %d, removed %d), want %q (1, 1)", out, f.Dropped, f.Removed, want)
			}
		})
	}
}

// FuzzServerRequestOf holds serverRequestOf to encoding/json: a message it
// reads is an object whose method member, decoded, is the server's request
// it names (or none), and no other key is "method" under case folding.
func FuzzServerRequestOf(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"elicitation/create"}`,
		`{"method":"\u0072oots/list"}`,
		`{"Method":"roots/list"}`,
		`{"method":1}`,
		`{"result":{"method":"roots/list"}}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, err := serverRequestOf(msg)
		if err != nil {
			return
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(msg, &members); err != nil {
			t.Fatalf("read %q, which encoding/json refuses: %v", msg, err)
		}
		want := ""
		for k, v := range members {
			if k != "method" && strings.EqualFold(k, "method") {
				t.Fatalf("read %q, whose key %q a case-insensitive client takes for the method", msg, k)
			}
			var m string
			if k == "method" && json.Unmarshal(v, &m) == nil && slices.Contains(jsonrpc.ServerRequests[:], m) {
				want = m
			}
		}
		if got != want {
			t.Fatalf("serverRequestOf(%q) = %q, encoding/json reads %q", msg, got, want)
		}
	})
}

// TestRefusedRequestIn: a JSON answer is read as clients read it, one
// message or a batch, each message looked at whatever its kind.
func TestRefusedRequestIn(t *testing.T) {
	refused := jsonrpc.AnswersSampling | jsonrpc.AnswersElicitation // not roots/list
	tests := []struct {
		name, body, want string
		wantErr          error
	}{
		{name: "a result", body: `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`},
		{name: "a request as the answer", body: `{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{}}`, want: "elicitation/create"},
		{name: "a request allowed", body: `{"jsonrpc":"2.0","id":1,"method":"roots/list"}`},
		{name: "a batch hiding one", body: ` [{"jsonrpc":"2.0","id":7,"result":{}}, {"jsonrpc":"2.0","id":2,"method":"sampling/createMessage"}]`, want: "sampling/createMessage"},
		{name: "a batch of allowed messages", body: `[{"jsonrpc":"2.0","id":7,"result":{}},{"jsonrpc":"2.0","id":3,"method":"roots/list"}]`},
		{name: "an empty batch", body: `[]`},
		{name: "a batch element no object", body: `[{"jsonrpc":"2.0","id":7,"result":{}},1]`, wantErr: ErrUnexpectedShape},
		{name: "a batch element with a case-folded method", body: `[{"id":2,"METHOD":"sampling/createMessage"}]`, wantErr: ErrUnexpectedShape},
		{name: "not JSON", body: `{"jsonrpc":"2.0","id":7,"result":{}`, wantErr: ErrUnreadable},
		{name: "a batch not JSON", body: `[{"jsonrpc":"2.0","id":7,"result":{}}`, wantErr: ErrUnreadable},
		{name: "empty", body: ``, wantErr: ErrUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RefusedRequestIn([]byte(tt.body), refused)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Fatalf("got %q %v, want %q %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestRefusedIn: a message asks the client for a server's request by being
// one, or by its result's inputRequests (2026-07-28's multi round-trip
// requests), read as clients read them.
func TestRefusedIn(t *testing.T) {
	refused := jsonrpc.AnswersSampling | jsonrpc.AnswersElicitation // not roots/list
	incomplete := func(requests string) string {
		return `{"jsonrpc":"2.0","id":7,"result":{"inputRequests":` + requests + `,"requestState":"s"}}`
	}
	tests := []struct {
		name, msg, want string
		inResult        bool
		wantErr         error
	}{
		{name: "a request", msg: `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"}`, want: "sampling/createMessage"},
		{name: "an input request", msg: incomplete(`{"login":{"method":"elicitation/create","params":{"mode":"url","url":"https://x.example"}}}`),
			want: "elicitation/create", inResult: true},
		{name: "the second input request", msg: incomplete(`{"dirs":{"method":"roots/list"},"ask":{"method":"sampling/createMessage","params":{}}}`),
			want: "sampling/createMessage", inResult: true},
		{name: "input requests allowed", msg: incomplete(`{"dirs":{"method":"roots/list"}}`)},
		{name: "an escaped method", msg: incomplete(`{"a":{"method":"elicitation\/create"}}`), want: "elicitation/create", inResult: true},
		{name: "an entry no object", msg: incomplete(`{"a":"elicitation/create"}`)},
		{name: "input requests no object", msg: incomplete(`[{"method":"elicitation/create"}]`)},
		{name: "input requests deeper", msg: `{"id":7,"result":{"structuredContent":{"inputRequests":{"a":{"method":"elicitation/create"}}}}}`},
		{name: "a result no object", msg: `{"id":7,"result":"inputRequests"}`},
		{name: "an inputRequests key in another case", msg: `{"id":7,"result":{"InputRequests":{"a":{"method":"elicitation/create"}}}}`, wantErr: ErrUnexpectedShape},
		{name: "an entry's method key in another case", msg: incomplete(`{"a":{"METHOD":"elicitation/create"}}`), wantErr: ErrUnexpectedShape},
		{name: "a result key in another case", msg: `{"id":7,"RESULT":{"inputRequests":{}}}`, wantErr: ErrUnexpectedShape},
		{name: "a repeated input request key", msg: incomplete(`{"a":{"method":"roots/list"},"a":{"method":"elicitation/create"}}`), wantErr: ErrUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, id, inResult, err := newRequestReader(refused).refusedIn([]byte(tt.msg))
			if !errors.Is(err, tt.wantErr) || got != tt.want || inResult != tt.inResult {
				t.Fatalf("got %q (in result %v) %v, want %q (%v) %v", got, inResult, err, tt.want, tt.inResult, tt.wantErr)
			}
			if tt.inResult && string(id) != "7" {
				t.Fatalf("id %q, want 7", id)
			}
		})
	}
}

// TestSSERequestFilterInputRequests: a result asking for a refused request
// is replaced, in its event, by the error for its id; the event's other
// fields stay.
func TestSSERequestFilterInputRequests(t *testing.T) {
	f := NewSSEEventFilter(0)
	f.DropRequests(jsonrpc.AnswersAny)
	in := "id: r9\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"inputRequests\":{\"a\":{\"method\":\"elicitation/create\",\"params\":{}}}}}\n\n"
	out, err := f.Chunk([]byte(in), true)
	if err != nil {
		t.Fatal(err)
	}
	want := "id: r9\ndata: " + string(RefusedRequestFailure([]byte("7"), "elicitation/create")) + "\n\n"
	if string(out) != want || f.Dropped != 1 {
		t.Fatalf("got %q (dropped %d), want %q (1)", out, f.Dropped, want)
	}
}

// FuzzRefusedIn holds refusedIn to encoding/json: what it reads a message
// to ask for, with every request refused, is what encoding/json finds in
// its method and in its result's inputRequests.
func FuzzRefusedIn(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"inputRequests":{"a":{"method":"elicitation/create"}}}}`,
		`{"id":7,"result":{"inputRequests":{"a":{"method":"ping"},"b":{"method":"roots/list"}}}}`,
		`{"id":7,"result":{"inputRequests":{"a":"x"}}}`,
		`{"id":1,"method":"sampling/createMessage"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, _, inResult, err := newRequestReader(jsonrpc.AnswersAny).refusedIn(msg)
		if err != nil {
			return
		}
		var m struct {
			Method json.RawMessage `json:"method"`
			Result struct {
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			} `json:"result"`
		}
		// Decoded loosely (a result that is no object leaves nothing).
		json.Unmarshal(msg, &m)
		asked := func(raw json.RawMessage) string {
			var method string
			if json.Unmarshal(raw, &method) == nil && slices.Contains(jsonrpc.ServerRequests[:], method) {
				return method
			}
			return ""
		}
		var entry struct {
			Method json.RawMessage `json:"method"`
		}
		var found []string
		if own := asked(m.Method); own != "" {
			found = append(found, own)
		}
		for _, raw := range m.Result.InputRequests {
			entry.Method = nil
			if json.Unmarshal(raw, &entry) == nil {
				if in := asked(entry.Method); in != "" {
					found = append(found, in)
				}
			}
		}
		switch {
		case got == "" && len(found) > 0:
			t.Fatalf("refusedIn(%q) found nothing, encoding/json reads %q", msg, found)
		case got != "" && !slices.Contains(found, got):
			t.Fatalf("refusedIn(%q) = %q (in result %v), encoding/json reads %q", msg, got, inResult, found)
		}
	})
}
