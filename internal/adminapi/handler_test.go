package adminapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"

	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

func TestHandlerSharesThePort(t *testing.T) {
	b := &fakeBackend{stats: testStats()}
	svc := startAdmin(t, b, nil)

	h1 := &http.Client{Transport: &http.Transport{}}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &p}}
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2c.CloseIdleConnections)

	// An empty StatsRequest in gRPC's framing: not compressed, length 0.
	emptyFrame := []byte{0, 0, 0, 0, 0}
	const statsPath = "/extauthz.admin.v1.AdminService/Stats"
	tests := []struct {
		name        string
		client      *http.Client
		method      string
		path        string
		contentType string
		body        []byte
		wantProto   string
		wantBody    string // from the mux
		wantGRPC    bool   // answered by the gRPC server
	}{
		{name: "HTTP/1.1 health probe", client: h1, method: "GET", path: "/healthz", wantProto: "HTTP/1.1", wantBody: "ok\n"},
		{name: "h2c health probe", client: h2c, method: "GET", path: "/healthz", wantProto: "HTTP/2.0", wantBody: "ok\n"},
		{name: "h2c JSON", client: h2c, method: "POST", path: "/x", contentType: "application/json", wantProto: "HTTP/2.0", wantBody: "mux HTTP/2.0 POST /x\n"},
		{
			name: "gRPC content type over HTTP/1.1 stays HTTP", client: h1, method: "POST", path: statsPath,
			contentType: "application/grpc", body: emptyFrame, wantProto: "HTTP/1.1", wantBody: "mux HTTP/1.1 POST " + statsPath + "\n",
		},
		{
			name: "gRPC-Web is not gRPC", client: h2c, method: "POST", path: statsPath,
			contentType: "application/grpc-web", body: emptyFrame, wantProto: "HTTP/2.0", wantBody: "mux HTTP/2.0 POST " + statsPath + "\n",
		},
		{
			name: "gRPC over h2c", client: h2c, method: "POST", path: statsPath,
			contentType: "application/grpc", body: emptyFrame, wantProto: "HTTP/2.0", wantGRPC: true,
		},
		{
			name: "gRPC with a codec suffix", client: h2c, method: "POST", path: statsPath,
			contentType: "application/grpc+proto", body: emptyFrame, wantProto: "HTTP/2.0", wantGRPC: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, svc.url+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.wantGRPC {
				req.Header.Set("TE", "trailers")
			}
			resp, err := tt.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Proto != tt.wantProto {
				t.Errorf("answered over %s, want %s", resp.Proto, tt.wantProto)
			}
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status = %d, want 200", resp.StatusCode)
			}
			if tt.wantGRPC {
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/grpc") {
					t.Errorf("content type = %q, want gRPC", ct)
				}
				if st := resp.Trailer.Get("Grpc-Status"); st != "0" {
					t.Errorf("grpc-status = %q (%s), want 0", st, resp.Trailer.Get("Grpc-Message"))
				}
				if len(body) <= 5 || !bytes.Contains(body, []byte("v1.2.3")) {
					t.Errorf("gRPC body %q lacks the version", body)
				}
				return
			}
			if string(body) != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
		})
	}

	t.Run("gRPC client", func(t *testing.T) {
		before := b.calls()
		got, err := svc.client(t).Stats(t.Context(), &adminv1.StatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetVersion() != "v1.2.3" {
			t.Errorf("version = %q", got.GetVersion())
		}
		if after := b.calls(); after == before {
			t.Errorf("the backend was not called: %s", after)
		}
	})
}

func TestIsGRPC(t *testing.T) {
	tests := []struct {
		contentType string
		want        bool
	}{
		{"application/grpc", true},
		{"application/grpc+proto", true},
		{"application/grpc+json", true},
		{"application/grpc;charset=utf-8", true},
		{"Application/GRPC", true},
		{"application/grpc-web", false},
		{"application/grpc-web+proto", false},
		{"application/grpcx", false},
		{"application/json", false},
		{"application/grp", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			if got := isGRPC(tt.contentType); got != tt.want {
				t.Errorf("isGRPC(%q) = %v, want %v", tt.contentType, got, tt.want)
			}
		})
	}
}

func TestProtocols(t *testing.T) {
	p := Protocols()
	if !p.HTTP1() || !p.UnencryptedHTTP2() || !p.HTTP2() {
		t.Errorf("Protocols() = %v, want HTTP/1.1, HTTP/2 over TLS and unencrypted HTTP/2", p)
	}
}

// BenchmarkHandlerHTTP is what the gRPC routing adds to a health probe.
func BenchmarkHandlerHTTP(b *testing.B) {
	gs := grpc.NewServer()
	defer gs.Stop()
	h := Handler(gs, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	req := httptest.NewRequest("GET", "/healthz", nil)
	w := discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header         { return w.h }
func (w discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w discardWriter) WriteHeader(int)             {}
