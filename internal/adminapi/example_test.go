package adminapi_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"

	"github.com/extauthz/extauthz/internal/adminapi"
	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// A Backend that only reports its version, for the example.
type versionOnly struct{}

func (versionOnly) InvalidateSession(context.Context, string) (adminapi.Counts, error) {
	return adminapi.Counts{}, nil
}

func (versionOnly) RevokeSubject(context.Context, string, string) (adminapi.Counts, error) {
	return adminapi.Counts{}, nil
}

func (versionOnly) RevokeAPIKey(context.Context, string, string) (adminapi.KeyRevocation, error) {
	return adminapi.KeyRevocation{}, nil
}

func (versionOnly) Explain(context.Context, *authv3.CheckRequest) (adminapi.Explanation, error) {
	return adminapi.Explanation{}, fmt.Errorf("not in this example")
}

func (versionOnly) Stats(context.Context) (adminapi.Stats, error) {
	return adminapi.Stats{Version: "v1.2.3"}, nil
}

// The admin listener serves the admin gRPC API and the HTTP probes on one
// port: register the Server on its own grpc.Server (never the ext_authz
// one), put it behind Handler with the probe mux, and let the http.Server
// speak cleartext HTTP/2.
func ExampleHandler() {
	gs := grpc.NewServer()
	adminv1.RegisterAdminServiceServer(gs, adminapi.NewServer(versionOnly{}, adminapi.Options{}))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })

	srv := &http.Server{
		Addr:              adminapi.DefaultAddr,
		Handler:           adminapi.Handler(gs, mux),
		Protocols:         adminapi.Protocols(),
		ReadHeaderTimeout: 5 * time.Second,
	}
	_ = srv // srv.ListenAndServe() serves both; `extauthz admin stats` calls it.
}
