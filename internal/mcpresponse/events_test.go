package mcpresponse

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/jsonrpc"
)

func TestFilterEvent(t *testing.T) {
	tests := []struct {
		name    string
		event   string
		want    string // "" = unchanged
		wantErr error
	}{
		{
			name:  "one data line",
			event: "event: message\nid: 4\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"},{\"name\":\"secret\"}]}}\n\n",
			want:  "event: message\nid: 4\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"}]}}\n\n",
		},
		{
			name:  "data split over lines with crlf",
			event: "data: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata:\"result\":{\"tools\":[{\"name\":\"secret\"},\r\ndata: {\"name\":\"b\"}]}}\r\n\r\n",
			want:  "data: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":{\"tools\":[{\"name\":\"b\"}]}}\r\n\r\n",
		},
		{name: "priming event", event: "id: 1\ndata:\n\n"},
		{name: "two empty data lines are a newline", event: "data:\ndata:\n\n", wantErr: ErrUnreadable},
		{name: "comment only", event: ": keepalive\n\n"},
		{name: "nothing refused", event: "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"}]}}\n\n"},
		{name: "notification", event: "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"},
		{name: "unparsable data", event: "data: {\"tools\":\n\n", wantErr: ErrUnreadable},
		// Clients that drop a byte order mark at the start of the stream
		// read a data line here; the filter saw an unknown field.
		{name: "byte order mark before a list", event: "\xEF\xBB\xBFdata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"secret\"}]}}\n\n", wantErr: ErrAmbiguousEvent},
		// Empty data and an unknown field to the filter, the list to a
		// scanner that ends lines only at LF (the Go SDK's).
		{name: "a lone CR hides a list", event: "data:\r{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"secret\"}]}}\n\n", wantErr: ErrAmbiguousEvent},
		{name: "a lone CR ends the event", event: "data: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\r\r", wantErr: ErrAmbiguousEvent},
		{name: "a CR last", event: "data: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\r", wantErr: ErrAmbiguousEvent},
		{name: "a byte order mark after the start is a field", event: "data: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\xEF\xBB\xBFdata: x\n\n"},
	}
	keep := func(kind, name string, _ json.RawMessage) bool { return name != "secret" }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := FilterEvent("tools/list", []byte(tt.event), keep)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			want := tt.want
			if want == "" {
				want = tt.event
			}
			if string(got) != want {
				t.Fatalf("got  %q\nwant %q", got, want)
			}
		})
	}
}

func TestElicitationCompleteEvent(t *testing.T) {
	ev := ElicitationCompleteEvent(`ab"c<`)
	events, rest, err := collect(t, 0, string(ev))
	if err != nil || rest != "" || len(events) != 1 {
		t.Fatalf("not one whole event: %q %q %v", events, rest, err)
	}
	data, ok := strings.CutPrefix(strings.TrimSuffix(string(ev), "\n\n"), "event: message\ndata: ")
	if !ok {
		t.Fatalf("event %q", ev)
	}
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  struct {
			ElicitationID string `json:"elicitationId"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(data), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.JSONRPC != "2.0" || msg.Method != "notifications/elicitation/complete" || msg.Params.ElicitationID != `ab"c<` {
		t.Fatalf("message %+v", msg)
	}
	if r, err := jsonrpc.Parse([]byte(data)); err != nil || r.Method != "notifications/elicitation/complete" || r.ID != nil {
		t.Fatalf("jsonrpc.Parse: %+v %v", r, err)
	}
}

func TestReauthorization(t *testing.T) {
	p := elicit.Pending{ID: "el-1", URL: "https://as.example/authorize?a=1&state=s"}
	tests := []struct {
		name           string
		id             string
		urlElicitation bool
		check          func(t *testing.T, body map[string]any)
	}{
		{"url elicitation", `7`, true, func(t *testing.T, b map[string]any) {
			e := b["error"].(map[string]any)
			if e["code"].(float64) != jsonrpc.CodeURLElicitationRequired {
				t.Fatalf("code %v", e["code"])
			}
			el := e["data"].(map[string]any)["elicitations"].([]any)[0].(map[string]any)
			if el["elicitationId"] != "el-1" || el["url"] != p.URL || el["mode"] != "url" {
				t.Fatalf("elicitation %v", el)
			}
		}},
		{"tool result", `"s-1"`, false, func(t *testing.T, b map[string]any) {
			r := b["result"].(map[string]any)
			if r["isError"] != true || !strings.Contains(r["content"].([]any)[0].(map[string]any)["text"].(string), p.URL) {
				t.Fatalf("result %v", r)
			}
			if r["_meta"].(map[string]any)["auth_required"].(map[string]any)["elicitation_id"] != "el-1" {
				t.Fatalf("_meta %v", r["_meta"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := Reauthorization([]byte(tt.id), tt.urlElicitation, p, "")
			var b map[string]any
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatal(err)
			}
			if got, _ := json.Marshal(b["id"]); string(got) != tt.id {
				t.Fatalf("id %s, want %s", got, tt.id)
			}
			tt.check(t, b)
		})
	}
}

func TestFilterFailure(t *testing.T) {
	var b struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(FilterFailure([]byte("3")), &b); err != nil || b.ID != 3 || b.Error.Code != jsonrpc.CodeInternal {
		t.Fatalf("%+v %v", b, err)
	}
}
