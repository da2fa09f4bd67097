package jsonrpc_test

import (
	"fmt"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

func ExampleParse() {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_weather",
		"arguments":{"location":"Seattle, WA"},
		"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	r, err := jsonrpc.Parse(body)
	if err != nil {
		code, message := jsonrpc.CodeFor(err)
		fmt.Printf("%s\n", jsonrpc.ErrorBody(nil, code, message, nil))
		return
	}
	header := "get_weather" // the Mcp-Name header
	name, _ := jsonrpc.DecodeMcpName(header)
	if want, required := r.MirroredName(); required && name != want {
		fmt.Printf("%s\n", jsonrpc.ErrorBody(r.ID, jsonrpc.CodeHeaderMismatch, "Mcp-Name does not match the body", nil))
		return
	}
	fmt.Println(r.Method, r.Name, r.ProtocolVersion, string(r.ID))
	// Output: tools/call get_weather 2026-07-28 7
}

func ExampleErrorBody() {
	_, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":`))
	code, message := jsonrpc.CodeFor(err)
	fmt.Printf("%s\n", jsonrpc.ErrorBody(nil, code, message, nil))
	// Output: {"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}
}

func ExampleDecodeMcpName() {
	for _, v := range []string{"get_weather", "=?base64?SGVsbG8sIOS4lueVjA==?="} {
		name, err := jsonrpc.DecodeMcpName(v)
		fmt.Println(name, err)
	}
	// Output:
	// get_weather <nil>
	// Hello, 世界 <nil>
}
