package whoami

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

func TestFromHeader(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   Report
	}{
		{
			name:   "no identity, no token",
			header: http.Header{"Accept": {"application/json"}},
			want:   Report{Service: "svc", Headers: map[string]string{}},
		},
		{
			name: "identity and lineage headers, exchanged token",
			header: http.Header{
				"X-User-Id":         {"0f1e"},
				"X-Session-Id":      {"s-1"},
				"X-Lineage-Depth":   {"1"},
				"X-Root-Context-Id": {"ctx-root"},
				"Cookie":            {"not shown"},
				"Authorization":     {"Bearer " + jwt(`{"sub":"0f1e","aud":"mcp-server","azp":"mcp-gateway","exp":99}`)},
			},
			want: Report{
				Service: "svc",
				Headers: map[string]string{"x-user-id": "0f1e", "x-session-id": "s-1", "x-lineage-depth": "1", "x-root-context-id": "ctx-root"},
				Token:   &Token{Subject: "0f1e", Audience: json.RawMessage(`"mcp-server"`), Party: "mcp-gateway", Expires: 99},
			},
		},
		{
			name:   "repeated header joined",
			header: http.Header{"X-Actor-Chain": {"agent-b", "agent-a"}},
			want:   Report{Service: "svc", Headers: map[string]string{"x-actor-chain": "agent-b,agent-a"}},
		},
		{
			name:   "opaque token",
			header: http.Header{"Authorization": {"Bearer not-a-jwt"}},
			want:   Report{Service: "svc", Headers: map[string]string{}, Token: &Token{Opaque: true}},
		},
		{
			name:   "bad payload",
			header: http.Header{"Authorization": {"Bearer a.!!!.c"}},
			want:   Report{Service: "svc", Headers: map[string]string{}, Token: &Token{Opaque: true}},
		},
		{
			name:   "not a bearer",
			header: http.Header{"Authorization": {"Basic YTpi"}},
			want:   Report{Service: "svc", Headers: map[string]string{}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FromHeader("svc", tc.header)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromHeader = %+v (token %+v), want %+v (token %+v)", got, got.Token, tc.want, tc.want.Token)
			}
		})
	}
}
