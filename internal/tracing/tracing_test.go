package tracing

import (
	"context"
	"net/http"
	"testing"
)

func TestOffByDefault(t *testing.T) {
	tr, err := New(context.Background(), Config{})
	if err != nil || tr != nil {
		t.Fatalf("tracing without an endpoint: %v %v", tr, err)
	}
	// A nil Tracing is usable and costs nothing.
	if got := tr.Transport(http.DefaultTransport); got != http.DefaultTransport {
		t.Fatal("off: the transport must be returned as is")
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
