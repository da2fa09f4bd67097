package envoytest

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// hv is a HeaderValueOption with append set explicitly.
func hv(key, value string, appendValue bool) *corev3.HeaderValueOption {
	//lint:ignore SA1019 the emulated answers set append, as the service's do
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, Value: value}, Append: wrapperspb.Bool(appendValue)}
}

// hvUnset is a HeaderValueOption that leaves append unset.
func hvUnset(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: key, Value: value}}
}

func TestApplyOK(t *testing.T) {
	// Every case starts from this downstream request.
	start := func() *http.Request {
		return newRequest("GET", "http://mcp.example.test/mcp?b=2&a=1&a=3&flag", map[string][]string{
			"X-User-Id":      {"forged-1", "forged-2"},
			"X-Session-Id":   {"forged"},
			"Accept":         {"text/html"},
			"Authorization":  {"Bearer opaque"},
			"X-Envoy-Thing":  {"kept"},
			"X-Forwarded-By": {"lb"},
		}, "")
	}
	tests := []struct {
		name       string
		ok         *authv3.OkHttpResponse
		wantHeader map[string][]string // keys checked on r.Header; nil value = absent
		wantHost   string
		wantURI    string
		wantResp   http.Header
		wantErr    error
	}{
		{
			name:       "nil answer changes nothing",
			ok:         nil,
			wantHeader: map[string][]string{"X-User-Id": {"forged-1", "forged-2"}},
			wantURI:    "/mcp?b=2&a=1&a=3&flag",
			wantResp:   http.Header{},
		},
		{
			name:       "append false overwrites every client value",
			ok:         &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-user-id", "alice", false), hv("X-New", "v", false)}},
			wantHeader: map[string][]string{"X-User-Id": {"alice"}, "X-New": {"v"}},
		},
		{
			name:       "append true comma-appends to the first value",
			ok:         &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("accept", "application/json", true), hv("x-user-id", "x", true)}},
			wantHeader: map[string][]string{"Accept": {"text/html,application/json"}, "X-User-Id": {"forged-1,x", "forged-2"}},
		},
		{
			name:       "append true on an absent header does nothing",
			ok:         &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-absent", "v", true)}},
			wantHeader: map[string][]string{"X-Absent": nil},
		},
		{
			name:    "unset append is rejected",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-a", "1", false), hvUnset("x-user-id", "alice")}},
			wantErr: ErrAppendUnset,
		},
		{
			name: "unset append in response_headers_to_add is rejected",
			ok: &authv3.OkHttpResponse{ResponseHeadersToAdd: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "x-a", Value: "1"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
			}},
			wantErr: ErrAppendUnset,
		},
		{
			name: "raw_value is rejected",
			ok: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "x-user-id", RawValue: []byte("alice")}, Append: wrapperspb.Bool(false)},
			}},
			wantErr: ErrRawValue,
		},
		{
			name: "headers_to_remove strips client copies, ignores pseudo-headers, host and x-envoy-*",
			ok: &authv3.OkHttpResponse{HeadersToRemove: []string{
				"x-session-id", "Authorization", ":authority", "host", "x-envoy-thing", "bad name", "x-not-there",
			}},
			wantHeader: map[string][]string{"X-Session-Id": nil, "Authorization": nil, "X-Envoy-Thing": {"kept"}},
			wantHost:   "mcp.example.test",
		},
		{
			name: "removal runs after the header mutations",
			ok: &authv3.OkHttpResponse{
				Headers:         []*corev3.HeaderValueOption{hv("x-session-id", "s-123", false)},
				HeadersToRemove: []string{"x-session-id"},
			},
			wantHeader: map[string][]string{"X-Session-Id": nil},
		},
		{
			name: "default mutation rules ignore host, :authority, :scheme, :method and x-envoy-*",
			ok: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
				hv("host", "evil.example", false), hv(":authority", "evil.example", false),
				hv(":method", "DELETE", false), hv(":scheme", "https", false),
				hv("x-envoy-thing", "changed", false), hv("X-Envoy-New", "1", false),
			}},
			wantHeader: map[string][]string{"X-Envoy-Thing": {"kept"}, "X-Envoy-New": nil, "Host": nil},
			wantHost:   "mcp.example.test",
			wantURI:    "/mcp?b=2&a=1&a=3&flag",
		},
		{
			name:    ":path can be set",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv(":path", "/v2/mcp?z=1", false)}},
			wantURI: "/v2/mcp?z=1",
		},
		{
			name:    "other pseudo-headers are rejected",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv(":status", "200", false)}},
			wantErr: ErrInvalidMutation,
		},
		{
			name:    "invalid header name",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x user", "v", false)}},
			wantErr: ErrInvalidMutation,
		},
		{
			name:    "empty header name",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("", "v", false)}},
			wantErr: ErrInvalidMutation,
		},
		{
			name:    "CR LF in a value",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-user-id", "alice\r\nx-admin: true", false)}},
			wantErr: ErrInvalidMutation,
		},
		{
			name:    "NUL in a value",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-user-id", "alice\x00", false)}},
			wantErr: ErrInvalidMutation,
		},
		{
			name:    "other control byte in a value",
			ok:      &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-user-id", "a\x1bb", false)}},
			wantErr: ErrInvalidMutation,
		},
		{
			name:    "DEL in a response header value",
			ok:      &authv3.OkHttpResponse{ResponseHeadersToAdd: []*corev3.HeaderValueOption{hv("x-a", "a\x7f", false)}},
			wantErr: ErrInvalidMutation,
		},
		{
			name:       "tab and UTF-8 are valid values",
			ok:         &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{hv("x-user-id", "al\tice é", false)}},
			wantHeader: map[string][]string{"X-User-Id": {"al\tice é"}},
		},
		{
			name: "response_headers_to_add: append false sets, true adds",
			ok: &authv3.OkHttpResponse{ResponseHeadersToAdd: []*corev3.HeaderValueOption{
				hv("x-authz", "ok", false), hv("set-cookie", "a=1", true), hv("set-cookie", "b=2", true),
			}},
			wantResp: http.Header{"X-Authz": {"ok"}, "Set-Cookie": {"a=1", "b=2"}},
		},
		{
			name: "query parameters: set overwrites all values, remove drops, result sorted by name",
			ok: &authv3.OkHttpResponse{
				QueryParametersToSet:    []*corev3.QueryParameter{{Key: "a", Value: "9"}, {Key: "c", Value: "%20x"}},
				QueryParametersToRemove: []string{"b", "B"},
			},
			wantURI: "/mcp?a=9&c=%20x&flag=",
		},
		{
			name:    "removing every query parameter drops the ?",
			ok:      &authv3.OkHttpResponse{QueryParametersToRemove: []string{"a", "b", "flag"}},
			wantURI: "/mcp",
		},
		{
			name:    "query value that is not URL-encoded",
			ok:      &authv3.OkHttpResponse{QueryParametersToSet: []*corev3.QueryParameter{{Key: "a", Value: "x y&z"}}},
			wantErr: ErrInvalidMutation,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := start()
			before := r.Header.Clone()
			beforeURI := r.URL.RequestURI()
			resp, err := ApplyOK(r, tt.ok)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ApplyOK error = %v, want %v", err, tt.wantErr)
				}
				if !reflect.DeepEqual(r.Header, before) || r.URL.RequestURI() != beforeURI {
					t.Error("a rejected answer mutated the request")
				}
				return
			}
			if err != nil {
				t.Fatalf("ApplyOK: %v", err)
			}
			for k, want := range tt.wantHeader {
				if got := r.Header[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if tt.wantHost != "" && r.Host != tt.wantHost {
				t.Errorf("Host = %q, want %q", r.Host, tt.wantHost)
			}
			if tt.wantURI != "" && r.URL.RequestURI() != tt.wantURI {
				t.Errorf("URI = %q, want %q", r.URL.RequestURI(), tt.wantURI)
			}
			if tt.wantResp != nil && !reflect.DeepEqual(resp, tt.wantResp) {
				t.Errorf("response headers = %v, want %v", resp, tt.wantResp)
			}
		})
	}
}

func TestApplyOKErrorNamesNoValue(t *testing.T) {
	secret := "eyJhbGciOiJub25lIn0.e30.\r\n"
	_, err := ApplyOK(newRequest("GET", "/", nil, ""), &authv3.OkHttpResponse{
		Headers: []*corev3.HeaderValueOption{hv("authorization", secret, false)},
	})
	if err == nil {
		t.Fatal("invalid value accepted")
	}
	if got := err.Error(); strings.Contains(got, "eyJ") || strings.Contains(got, "e30") {
		t.Errorf("error %q leaks the header value", got)
	}
}

func TestDeniedResponse(t *testing.T) {
	tests := []struct {
		name       string
		denied     *authv3.DeniedHttpResponse
		wantStatus int
		wantHeader http.Header
		wantBody   string
	}{
		{
			name:       "nil denial is a bare 403",
			denied:     nil,
			wantStatus: http.StatusForbidden,
			wantHeader: http.Header{},
		},
		{
			name:       "unset status is 403, body gets text/plain",
			denied:     &authv3.DeniedHttpResponse{Body: "denied"},
			wantStatus: http.StatusForbidden,
			wantHeader: http.Header{"Content-Type": {"text/plain"}},
			wantBody:   "denied",
		},
		{
			name: "401 with WWW-Authenticate and a JSON-RPC body",
			denied: &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{
					hv("www-authenticate", `Bearer resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource"`, false),
					hv("content-type", "application/json", false),
				},
				Body: `{"jsonrpc":"2.0","error":{"code":-32001,"message":"unauthorized"},"id":null}`,
			},
			wantStatus: http.StatusUnauthorized,
			wantHeader: http.Header{
				"Www-Authenticate": {`Bearer resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource"`},
				"Content-Type":     {"application/json"},
			},
			wantBody: `{"jsonrpc":"2.0","error":{"code":-32001,"message":"unauthorized"},"id":null}`,
		},
		{
			name: "removes listed keys first, then adds every entry, append ignored",
			denied: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_TooManyRequests},
				Headers: []*corev3.HeaderValueOption{hv("set-cookie", "a=1", false), hv("set-cookie", "b=2", false), hvUnset("retry-after", "3")},
			},
			wantStatus: http.StatusTooManyRequests,
			wantHeader: http.Header{"Set-Cookie": {"a=1", "b=2"}, "Retry-After": {"3"}},
		},
		{
			name: "invalid header value turns the reply into a bare 500",
			denied: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{hv("www-authenticate", "Bearer\nx", false)},
				Body:    "x",
			},
			wantStatus: http.StatusInternalServerError,
			wantHeader: http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, header, body := DeniedResponse(tt.denied)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d", status, tt.wantStatus)
			}
			if !reflect.DeepEqual(header, tt.wantHeader) {
				t.Errorf("header = %v, want %v", header, tt.wantHeader)
			}
			if string(body) != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
		})
	}
}

func TestRewriteQuery(t *testing.T) {
	tests := []struct {
		name   string
		raw    string
		set    []*corev3.QueryParameter
		remove []string
		want   string
	}{
		{name: "names are case-sensitive", raw: "A=1&a=2", remove: []string{"a"}, want: "A=1"},
		{name: "empty segments dropped, values kept raw", raw: "x=%2F&&y=a+b", want: "x=%2F&y=a+b"},
		{name: "set on an empty query", raw: "", set: []*corev3.QueryParameter{{Key: "k", Value: "v"}}, want: "k=v"},
		{name: "value containing =", raw: "t=a=b", want: "t=a=b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rewriteQuery(tt.raw, tt.set, tt.remove); got != tt.want {
				t.Errorf("rewriteQuery(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func ExampleDeniedResponse() {
	status, header, body := DeniedResponse(&authv3.DeniedHttpResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
		Headers: []*corev3.HeaderValueOption{hv("www-authenticate", `Bearer realm="mcp"`, false)},
		Body:    "unauthorized",
	})
	fmt.Println(status, header.Get("WWW-Authenticate"), header.Get("Content-Type"), string(body))
	// Output: 401 Bearer realm="mcp" text/plain unauthorized
}
