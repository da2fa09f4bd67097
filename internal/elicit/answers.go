package elicit

import (
	"bytes"
	"encoding/json"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// CodeA2AAuthorizationRequired is the JSON-RPC error code of
// A2AAuthRequired. A2A assigns -32001 to -32009 and has no code for
// "authorize first, then retry" before a task exists (its auth-required
// task state needs a task); MCP uses -32042 and -32020. -32040 is free in
// both, within JSON-RPC's server-defined range (-32000 to -32099).
const CodeA2AAuthorizationRequired = -32040

// DefaultMessage is used when an answer is given no message.
const DefaultMessage = "Authorization with a third party is required to complete this request."

// errorMessage is the JSON-RPC error message of the error answers; the
// elicitation's own message says why.
const errorMessage = "Authorization required"

// URLElicitationError answers an MCP client that declared URL-mode
// elicitation (capabilities.elicitation.url): JSON-RPC error -32042 whose
// data holds one URL elicitation, to be sent with HTTP 200:
//
//	{"jsonrpc":"2.0","id":1,"error":{"code":-32042,"message":"Authorization required",
//	 "data":{"elicitations":[{"mode":"url","elicitationId":"<id>","url":"<url>","message":"<message>"}]}}}
//
// id is the request's id as jsonrpc.Parse returns it (null when invalid).
func URLElicitationError(id []byte, p Pending, message string) []byte {
	return jsonrpc.URLElicitationRequiredBody(id, errorMessage, jsonrpc.URLElicitation{ID: p.ID, URL: p.URL, Message: orDefault(message)})
}

// ToolResultAuthRequired answers a tools/call from an MCP client without
// URL-mode elicitation: a successful JSON-RPC response whose tool result is
// an error telling the user (through the model) where to authorize and to
// retry, with a machine-readable hint in _meta, to be sent with HTTP 200:
//
//	{"jsonrpc":"2.0","id":1,"result":{"isError":true,
//	 "content":[{"type":"text","text":"<message>\n\nAuthorize here: <url>\n\nThen retry the request."}],
//	 "_meta":{"auth_required":{"url":"<url>","elicitation_id":"<id>","type":"oauth2"}}}}
func ToolResultAuthRequired(id []byte, p Pending, message string) []byte {
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type authRequired struct {
		URL           string `json:"url"`
		ElicitationID string `json:"elicitation_id"`
		Type          string `json:"type"`
	}
	result := struct {
		IsError bool   `json:"isError"`
		Content []text `json:"content"`
		Meta    struct {
			AuthRequired authRequired `json:"auth_required"`
		} `json:"_meta"`
	}{
		IsError: true,
		Content: []text{{Type: "text", Text: orDefault(message) + "\n\nAuthorize here: " + p.URL + "\n\nThen retry the request."}},
	}
	result.Meta.AuthRequired = authRequired{URL: p.URL, ElicitationID: p.ID, Type: "oauth2"}

	encoded := marshal(result)
	b := make([]byte, 0, 40+len(id)+len(encoded))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"result":`...)
	b = append(b, encoded...)
	return append(b, '}')
}

// A2AAuthRequired answers an A2A client: JSON-RPC error
// CodeA2AAuthorizationRequired with the URL, to be sent with HTTP 200.
// data.error repeats the instruction as one string, which A2A SDKs surface
// as the error's text:
//
//	{"jsonrpc":"2.0","id":1,"error":{"code":-32040,"message":"Authorization required",
//	 "data":{"type":"oauth2","url":"<url>","elicitationId":"<id>","error":"<message> Authorize at <url>, then retry."}}}
func A2AAuthRequired(id []byte, p Pending, message string) []byte {
	data := struct {
		Type          string `json:"type"`
		URL           string `json:"url"`
		ElicitationID string `json:"elicitationId"`
		Error         string `json:"error"`
	}{
		Type:          "oauth2",
		URL:           p.URL,
		ElicitationID: p.ID,
		Error:         orDefault(message) + " Authorize at " + p.URL + ", then retry.",
	}
	return jsonrpc.ErrorBody(id, CodeA2AAuthorizationRequired, errorMessage, data)
}

func orDefault(message string) string {
	if message == "" {
		return DefaultMessage
	}
	return message
}

// marshal encodes v compactly without HTML escaping, so URLs keep their &.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings and bools: encoding cannot fail.
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// appendID echoes a JSON-RPC id that is exactly one JSON string or number,
// as jsonrpc.ErrorBody does; anything else becomes null.
func appendID(b, id []byte) []byte {
	if len(id) > 0 && json.Valid(id) {
		first, last := id[0], id[len(id)-1]
		str := first == '"' && last == '"'
		num := (first == '-' || first >= '0' && first <= '9') && last >= '0' && last <= '9'
		if str || num {
			return append(b, id...)
		}
	}
	return append(b, "null"...)
}
