package loadtest

import (
	"context"
	"errors"
	"net"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

// NoopServer is a do-nothing envoy.service.auth.v3.Authorization server: it
// allows every request with an empty OkHttpResponse without looking at it. It
// is the baseline the service is measured against: what gRPC, protobuf and
// the machine cost on their own.
type NoopServer struct {
	authv3.UnimplementedAuthorizationServer
}

var _ authv3.AuthorizationServer = NoopServer{}

// Check allows the request.
func (NoopServer) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{
		Status:       &rpcstatus.Status{},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}},
	}, nil
}

// ServeNoop serves NoopServer on lis until ctx ends, then stops gracefully
// and returns nil; it returns an error only when serving fails.
func ServeNoop(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer()
	authv3.RegisterAuthorizationServer(gs, NoopServer{})
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		gs.GracefulStop()
		if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return err
		}
		return nil
	}
}
