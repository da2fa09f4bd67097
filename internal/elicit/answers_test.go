package elicit_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/jsonrpc"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

var pending = elicit.Pending{
	ID:      "QHXWZ4N7L2AJ6P5KGDRYVBM3TE",
	URL:     "https://auth.example/oauth/authorize?client_id=gw&scope=files.read&state=QHXWZ4N7L2AJ6P5KGDRYVBM3TE",
	Subject: "alice",
	Session: "mcp-1",
}

const message = "Example Files needs your permission before this tool can read your files."

func matchGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), append(got, '\n'))
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer is not JSON: %v\n%s", err, b)
	}
	return m
}

// TestURLElicitationError checks the -32042 answer against the shape MCP
// 2025-11-25 defines for a client that declared URL elicitation.
func TestURLElicitationError(t *testing.T) {
	body := elicit.URLElicitationError([]byte(`7`), pending, message)
	matchGolden(t, "url-elicitation.json", body)
	want := map[string]any{
		"jsonrpc": "2.0",
		"id":      7.0,
		"error": map[string]any{
			"code":    float64(jsonrpc.CodeURLElicitationRequired),
			"message": "Authorization required",
			"data": map[string]any{
				"elicitations": []any{map[string]any{
					"mode":          "url",
					"elicitationId": pending.ID,
					"url":           pending.URL,
					"message":       message,
				}},
			},
		},
	}
	if got := decode(t, body); !reflect.DeepEqual(got, want) {
		t.Errorf("answer = %v\nwant %v", got, want)
	}
}

// TestToolResultAuthRequired checks the answer for a client without URL
// elicitation: a tool result with isError and _meta.auth_required.
func TestToolResultAuthRequired(t *testing.T) {
	body := elicit.ToolResultAuthRequired([]byte(`"call-1"`), pending, message)
	matchGolden(t, "tool-result.json", body)
	want := map[string]any{
		"jsonrpc": "2.0",
		"id":      "call-1",
		"result": map[string]any{
			"isError": true,
			"content": []any{map[string]any{
				"type": "text",
				"text": message + "\n\nAuthorize here: " + pending.URL + "\n\nThen retry the request.",
			}},
			"_meta": map[string]any{
				"auth_required": map[string]any{
					"url":            pending.URL,
					"elicitation_id": pending.ID,
					"type":           "oauth2",
				},
			},
		},
	}
	if got := decode(t, body); !reflect.DeepEqual(got, want) {
		t.Errorf("answer = %v\nwant %v", got, want)
	}
	if bytes.Contains(body, []byte(`\u0026`)) {
		t.Error("the URL's & is escaped")
	}
}

func TestA2AAuthRequired(t *testing.T) {
	body := elicit.A2AAuthRequired([]byte(`"req-9"`), pending, message)
	matchGolden(t, "a2a.json", body)
	got := decode(t, body)
	e, _ := got["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	if got["id"] != "req-9" || e["code"] != float64(elicit.CodeA2AAuthorizationRequired) || data["url"] != pending.URL ||
		data["elicitationId"] != pending.ID || data["type"] != "oauth2" {
		t.Errorf("answer = %s", body)
	}
	if c := elicit.CodeA2AAuthorizationRequired; c >= -32009 && c <= -32001 {
		t.Errorf("code %d collides with A2A's", c)
	}
}

func TestAnswerIDs(t *testing.T) {
	tests := []struct {
		name string
		id   []byte
		want any
	}{
		{"number", []byte(`42`), 42.0},
		{"negative number", []byte(`-1.5e3`), -1500.0},
		{"string", []byte(`"a\"b"`), `a"b`},
		{"absent", nil, nil},
		{"null", []byte(`null`), nil},
		{"object", []byte(`{"x":1}`), nil},
		{"trailing garbage", []byte(`1}`), nil},
		{"two values", []byte(`"a" "b"`), nil},
		{"whitespace", []byte(` 1`), nil},
	}
	answers := map[string]func([]byte, elicit.Pending, string) []byte{
		"url":  elicit.URLElicitationError,
		"tool": elicit.ToolResultAuthRequired,
		"a2a":  elicit.A2AAuthRequired,
	}
	for _, tc := range tests {
		for name, answer := range answers {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				got := decode(t, answer(tc.id, pending, ""))
				if !reflect.DeepEqual(got["id"], tc.want) {
					t.Errorf("id = %#v, want %#v", got["id"], tc.want)
				}
			})
		}
	}
}

func TestDefaultMessage(t *testing.T) {
	body := elicit.URLElicitationError([]byte(`1`), pending, "")
	if !bytes.Contains(body, []byte(elicit.DefaultMessage)) {
		t.Errorf("no default message: %s", body)
	}
}
