package testpeers

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestBearerTransport(t *testing.T) {
	tests := []struct {
		name      string
		transport BearerTransport
		sent      http.Header
		want      http.Header
	}{
		{
			name:      "token",
			transport: BearerTransport{Token: StaticToken("t1")},
			sent:      http.Header{"Accept": {"*/*"}},
			want:      http.Header{"Accept": {"*/*"}, "Authorization": {"Bearer t1"}},
		},
		{
			name:      "token replaces the SDK's Authorization",
			transport: BearerTransport{Token: StaticToken("t2")},
			sent:      http.Header{"Authorization": {"Bearer old"}},
			want:      http.Header{"Authorization": {"Bearer t2"}},
		},
		{
			name:      "no token, extra headers replace and repeat",
			transport: BearerTransport{Header: http.Header{"X-User-Id": {"mallory", "eve"}}},
			sent:      http.Header{"X-User-Id": {"alice"}},
			want:      http.Header{"X-User-Id": {"mallory", "eve"}},
		},
		{
			name:      "empty token sends nothing",
			transport: BearerTransport{Token: StaticToken("")},
			sent:      http.Header{},
			want:      http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got http.Header
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Clone()
			}))
			defer srv.Close()

			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
			req.Header = tt.sent.Clone()
			tr := tt.transport
			resp, err := (&http.Client{Transport: &tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()

			for _, hop := range []string{"Accept-Encoding", "User-Agent"} {
				got.Del(hop)
			}
			assertHeaders(t, got, tt.want)
			assertHeaders(t, req.Header, tt.sent) // the caller's request is untouched
		})
	}
}

func TestParseObservation(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr bool
	}{
		{name: "full", text: `{"peer":"p","headers":{"X-User-Id":["a"]},"authorization":true,"authorizationSha256":"00"}`},
		{name: "no headers", text: `{"peer":"p"}`},
		{name: "not JSON", text: `deleted /tmp/x`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseObservation(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil && (o.Peer != "p" || o.Headers == nil) {
				t.Errorf("observation = %+v", o)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	a, b := Fingerprint("Bearer a"), Fingerprint("Bearer b")
	if len(a) != 16 || a == b || a != Fingerprint("Bearer a") {
		t.Errorf("Fingerprint: %q, %q", a, b)
	}
}
