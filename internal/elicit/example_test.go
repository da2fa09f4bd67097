package elicit_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/elicit"
)

func ExampleStore() {
	s := elicit.New(1000, 10*time.Minute, nil)

	// A tools/call needs alice to authorize Example Files first.
	p, err := s.Begin("idp", "alice", "mcp-1", "files", "https://auth.example/authorize?client_id=gw")
	if err != nil {
		panic(err)
	}
	// The URL carries a state signed for this elicitation and alice; the
	// elicitation id is the state up to its first dot.
	id, _, _ := strings.Cut(p.State, ".")
	fmt.Println(strings.TrimSuffix(p.URL, p.State), id == p.ID)

	// Her client declared URL elicitation: deny with -32042.
	body := elicit.URLElicitationError([]byte(`3`), p, "Authorize Example Files to continue.")
	fmt.Println(strings.Contains(string(body), `"code":-32042`))

	// The same denial again reuses the pending elicitation.
	again, _ := s.Begin("idp", "alice", "mcp-1", "files", "https://auth.example/authorize?client_id=gw")
	fmt.Println(again.ID == p.ID)

	// The third party's callback hands the state back; the completion must
	// present it: the id alone does not complete it.
	_, idOnly := s.Complete(p.ID, "")
	_, withState := s.Complete(p.ID, p.State)
	fmt.Println(idOnly, withState)
	// Output:
	// https://auth.example/authorize?client_id=gw&state= true
	// true
	// true
	// elicit: the completion carries no state <nil>
}
