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
	p, err := s.Begin("alice", "mcp-1", "files", "https://auth.example/authorize?client_id=gw")
	if err != nil {
		panic(err)
	}
	fmt.Println(strings.TrimSuffix(p.URL, p.ID))

	// Her client declared URL elicitation: deny with -32042.
	body := elicit.URLElicitationError([]byte(`3`), p, "Authorize Example Files to continue.")
	fmt.Println(strings.Contains(string(body), `"code":-32042`))

	// The same denial again reuses the pending elicitation.
	again, _ := s.Begin("alice", "mcp-1", "files", "https://auth.example/authorize?client_id=gw")
	fmt.Println(again.ID == p.ID)

	// The third party's callback returns state=<id>; only alice completes it.
	_, byBob := s.Complete(p.ID, "bob")
	_, byAlice := s.Complete(p.ID, "alice")
	fmt.Println(byBob, byAlice)
	// Output:
	// https://auth.example/authorize?client_id=gw&state=
	// true
	// true
	// false true
}
