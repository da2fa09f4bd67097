package mcpresponse_test

import (
	"encoding/json"
	"fmt"

	"github.com/extauthz/extauthz/internal/mcpresponse"
)

func ExampleFilterList() {
	body := []byte(`{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"search"},{"name":"delete_repo"}],"nextCursor":"p2"}}`)
	readOnly := func(kind, name string, _ json.RawMessage) bool { return name != "delete_repo" }
	out, removed, err := mcpresponse.FilterList("tools/list", body, readOnly)
	if err != nil {
		// Fail closed: answer mcpresponse.FilterFailure(id) instead.
		panic(err)
	}
	fmt.Println(removed, string(out))
	// Output: 1 {"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"search"}],"nextCursor":"p2"}}
}

func ExampleElicitationCompleteEvent() {
	fmt.Printf("%q\n", mcpresponse.ElicitationCompleteEvent("el-7"))
	// Output: "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/elicitation/complete\",\"params\":{\"elicitationId\":\"el-7\"}}\n\n"
}
