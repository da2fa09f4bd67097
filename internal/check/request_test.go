package check

import (
	"slices"
	"testing"
)

// TestAddHeader: a header list read through AddHeader, as every front end
// given one reads it, notes each name sent more than once (once, in the
// order seen) and a name holding "_", besides merging the values.
func TestAddHeader(t *testing.T) {
	tests := []struct {
		name        string
		lines       [][2]string
		want        Headers
		repeated    []string
		underscores bool
	}{
		{"one of each", [][2]string{{"X-Tenant", "a"}, {"Accept", "*/*"}}, Headers{"x-tenant": "a", "accept": "*/*"}, nil, false},
		{"a repeat in another case", [][2]string{{"X-Tenant", "a"}, {"x-tenant", "b"}}, Headers{"x-tenant": "a,b"}, []string{"x-tenant"}, false},
		{"three times, noted once", [][2]string{{"x-t", "a"}, {"x-t", "b"}, {"x-t", "c"}}, Headers{"x-t": "a,b,c"}, []string{"x-t"}, false},
		{"cookies joined as cookies", [][2]string{{"cookie", "a=1"}, {"cookie", "b=2"}}, Headers{"cookie": "a=1; b=2"}, []string{"cookie"}, false},
		{"two repeats, in order", [][2]string{{"b", "1"}, {"a", "1"}, {"a", "2"}, {"b", "2"}}, Headers{"a": "1,2", "b": "1,2"}, []string{"a", "b"}, false},
		{"an underscore", [][2]string{{"X_User_Id", "m"}}, Headers{"x_user_id": "m"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Headers: Headers{}}
			for _, l := range tt.lines {
				r.AddHeader(l[0], l[1])
			}
			if len(r.Headers) != len(tt.want) {
				t.Fatalf("headers %v, want %v", r.Headers, tt.want)
			}
			for k, v := range tt.want {
				if r.Headers[k] != v {
					t.Errorf("%s = %q, want %q", k, r.Headers[k], v)
				}
			}
			if !slices.Equal(r.Repeated, tt.repeated) || r.UnderscoreNames != tt.underscores {
				t.Errorf("repeated %q, underscores %v; want %q, %v", r.Repeated, r.UnderscoreNames, tt.repeated, tt.underscores)
			}
		})
	}
}
