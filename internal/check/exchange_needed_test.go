package check

import "testing"

// TestExchangeNeeded: a route that exchanges for some methods never lets a
// call through without the exchanged token because its method is unknown
// or only claimed by a header nobody checks.
func TestExchangeNeeded(t *testing.T) {
	marked := &routeExchange{methods: []string{"tools/call"}}
	marked.meanings = expandMethods(marked.methods)
	all := &routeExchange{}
	tests := []struct {
		name           string
		re             *routeExchange
		call           Call
		headersTrusted bool
		want           bool
	}{
		{name: "marked method from the body", re: marked, call: Call{Method: "tools/call", Body: true}, want: true},
		{name: "unmarked method from the body", re: marked, call: Call{Method: "tools/list", Body: true}, want: false},
		{name: "unknown method: no body, no Mcp-Method", re: marked, call: Call{}, want: true},
		{name: "unmarked method claimed by an unchecked header", re: marked, call: Call{Method: "tools/list"}, want: true},
		{name: "unmarked method in a header the upstream checks", re: marked, call: Call{Method: "tools/list"}, headersTrusted: true, want: false},
		{name: "marked method in a header the upstream checks", re: marked, call: Call{Method: "tools/call"}, headersTrusted: true, want: true},
		{name: "no methods listed: always", re: all, call: Call{Method: "tools/list", Body: true}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.re.needed(&tt.call, tt.headersTrusted); got != tt.want {
				t.Errorf("needed = %v, want %v", got, tt.want)
			}
		})
	}
}
