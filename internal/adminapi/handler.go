package adminapi

import (
	"net/http"
	"strings"

	"google.golang.org/grpc"
)

// Handler serves gRPC and plain HTTP on one listener: HTTP/2 requests whose
// content type is application/grpc (or application/grpc+codec) go to gs,
// everything else to mux, so the elicitation completion and curl keep
// working over HTTP/1.1. gRPC clients speak cleartext HTTP/2 with prior
// knowledge, so the http.Server serving the result must allow it: set its
// Protocols to Protocols(). Authentication is gs's interceptors' and mux's
// own (Audit).
func Handler(gs *grpc.Server, mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && isGRPC(r.Header.Get("Content-Type")) {
			gs.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Protocols are what the admin http.Server must speak: HTTP/1.1 for curl,
// and HTTP/2 for gRPC: over TLS when the listener has a certificate,
// otherwise unencrypted (h2c with prior knowledge). net/http serves h2c
// itself; golang.org/x/net/http2/h2c is deprecated.
func Protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return p
}

// isGRPC reports whether a content type is gRPC's: application/grpc, alone
// or with a +codec suffix or parameters, in any case. gRPC-Web
// (application/grpc-web) is not: grpc.Server does not speak it.
func isGRPC(contentType string) bool {
	const base = "application/grpc"
	if len(contentType) < len(base) || !strings.EqualFold(contentType[:len(base)], base) {
		return false
	}
	rest := contentType[len(base):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}
