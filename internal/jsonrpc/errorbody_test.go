package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

func TestErrorBody(t *testing.T) {
	tests := []struct {
		name string // also the golden file: testdata/errorbody/<name>.json
		body []byte
	}{
		{"parse-error", ErrorBody(nil, CodeParseError, "Parse error", nil)},
		{"invalid-request-numeric-id", ErrorBody([]byte(`42`), CodeInvalidRequest, "Invalid Request", nil)},
		{"method-not-found-string-id", ErrorBody([]byte(`"req-\"7\"\u00e9"`), CodeMethodNotFound, "Method not found", nil)},
		{"invalid-id-becomes-null", ErrorBody([]byte(`{"x":1}`), CodeInvalidParams, "Invalid params", nil)},
		{"id-with-trailing-garbage-becomes-null", ErrorBody([]byte(`1,"x":2`), CodeInvalidParams, "Invalid params", nil)},
		{"header-mismatch", ErrorBody([]byte(`1`), CodeHeaderMismatch,
			"Header mismatch: Mcp-Name header value 'foo' does not match body value \"bär\"\n\t\x01\u2028\xff", nil)},
		{"internal-with-data", ErrorBody([]byte(`"x"`), CodeInternal, "Internal error",
			map[string]any{"supported": []string{"2025-06-18", "2025-11-25"}, "requested": "<1999>"})},
		{"raw-data", ErrorBody([]byte(`3`), CodeInvalidRequest, "Invalid Request", json.RawMessage(` { "b" : [ 1 , 2 ] } `))},
		{"unmarshalable-data-is-omitted", ErrorBody([]byte(`3`), CodeInternal, "Internal error", func() {})},
		{"url-elicitation-required", URLElicitationRequiredBody([]byte(`2`), "This request requires more information.",
			URLElicitation{ID: "550e8400-e29b-41d4-a716-446655440000", URL: "https://mcp.example.com/connect?elicitationId=550e8400-e29b-41d4-a716-446655440000&x=<y>", Message: "Authorization is required to access your Example Co files."})},
		{"url-elicitation-required-none", URLElicitationRequiredBody(nil, "m")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertJSONRPCError(t, tt.body)
			golden.Check(t, filepath.Join("testdata", "errorbody", tt.name+".json"), append(tt.body, '\n'))
		})
	}
}

// assertJSONRPCError checks that body is compact JSON holding exactly a
// JSON-RPC 2.0 error response.
func assertJSONRPCError(t *testing.T, body []byte) {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	if !bytes.Equal(compact.Bytes(), body) {
		t.Errorf("not compact: %s", body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("not an object: %v: %s", err, body)
	}
	if len(top) != 3 || string(top["jsonrpc"]) != `"2.0"` || top["id"] == nil || top["error"] == nil {
		t.Errorf("want exactly jsonrpc \"2.0\", id and error: %s", body)
	}
	dec := json.NewDecoder(bytes.NewReader(top["error"]))
	dec.DisallowUnknownFields()
	var e struct {
		Code    *int            `json:"code"`
		Message *string         `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := dec.Decode(&e); err != nil || e.Code == nil || e.Message == nil {
		t.Errorf("error member is not {code, message, data?}: %v: %s", err, body)
	}
	// The body is a valid response for our own parser too.
	if r, err := Parse(body); err != nil || !r.IsResponse {
		t.Errorf("Parse(body) = %v, %v; want a response", r, err)
	}
}

func TestErrorBodyEchoesParsedID(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-999999999999999,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":"a\"\\\/\b\f\n\r\t\u0000\ud83d\ude00","method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"ping"}`,
	} {
		r, err := Parse([]byte(body))
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		out := ErrorBody(r.ID, CodeInvalidParams, "m", nil)
		assertJSONRPCError(t, out)
		want := r.ID
		if want == nil {
			want = []byte("null")
		}
		if !bytes.Contains(out, append(append([]byte(`"id":`), want...), ',')) {
			t.Errorf("ErrorBody(%s) = %s; id not echoed verbatim", r.ID, out)
		}
	}
}

func TestCodeFor(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code int
	}{
		{"parse", ErrParse, CodeParseError},
		{"invalid", ErrInvalidRequest, CodeInvalidRequest},
		{"batch", ErrBatch, CodeInvalidRequest},
		{"too large", ErrTooLarge, CodeInvalidRequest},
		{"too deep", ErrTooDeep, CodeInvalidRequest},
		{"wrapped", errors.Join(errors.New("reading body"), ErrParse), CodeParseError},
		{"invalid, with its reason", invalid("params names the task twice"), CodeInvalidRequest},
		{"other", errors.New("boom"), CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, msg := CodeFor(tt.err)
			if code != tt.code || msg == "" {
				t.Errorf("CodeFor(%v) = %d, %q; want %d and a message", tt.err, code, msg, tt.code)
			}
			if reason, ok := tt.err.(invalid); ok && msg != "Invalid Request: "+string(reason) {
				t.Errorf("CodeFor(%v) = %q, want the reason", tt.err, msg)
			}
		})
	}
}
