package recovery

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestHTTPPanicAnswersThatRequestOnly: a panicking HTTP handler answers its
// own request with 500 (net/http alone would drop the connection), is logged and
// counted; http.ErrAbortHandler keeps its meaning and is not counted.
func TestHTTPPanicAnswersThatRequestOnly(t *testing.T) {
	var logs bytes.Buffer
	var count atomic.Int32
	var counted atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/boom", func(http.ResponseWriter, *http.Request) {
		var none []string
		_ = none[len("boom")] // index out of range: a real runtime panic
	})
	mux.HandleFunc("/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	h := HTTP(mux, "forward-auth", slog.New(slog.NewTextHandler(&logs, nil)), func(m string) { count.Add(1); counted.Store(m) })

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ErrorLog: slog.NewLogLogger(slog.NewTextHandler(io.Discard, nil), slog.LevelError)}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	base := "http://" + lis.Addr().String()

	cases := []struct {
		name     string
		path     string
		want     int
		wantErr  bool
		wantBody string
	}{
		{"panic answers 500", "/boom", http.StatusInternalServerError, false, "internal error\n"},
		{"server still serves", "/ok", http.StatusOK, false, "ok"},
		{"abort handler still aborts", "/abort", 0, true, ""},
		{"server serves after abort", "/ok", http.StatusOK, false, "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.Get(base + tc.path)
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("status %d, want the connection aborted", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want || string(body) != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.want, tc.wantBody)
			}
		})
	}
	if got := count.Load(); got != 1 {
		t.Errorf("counted %d panics, want 1", got)
	}
	if got, _ := counted.Load().(string); got != "forward-auth" {
		t.Errorf("counted under %q, want forward-auth", got)
	}
	for _, want := range []string{"index out of range", "forward-auth", "http_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
	if strings.Contains(logs.String(), "abort") {
		t.Error("an aborted handler was logged")
	}
}
