// Package recovery keeps one request's programming error from taking the
// service down. gRPC, unlike net/http, does not recover a handler's panic:
// one bad request would end every check of every caller. The interceptors
// here turn a panic into an Internal error for that call alone (Envoy then
// applies its failure mode, which denies by default), log it with its
// stack, and count it. HTTP does the same for the forward-auth front end,
// answering 500 instead of letting net/http drop the connection.
package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxValue bounds the panic value written to the log: it is a message
// about our code, never meant to carry request data, but a long one is cut.
const maxValue = 256

// ServerOptions are the interceptors for a gRPC server. counted is called
// once per recovered panic with the full method name.
func ServerOptions(log *slog.Logger, counted func(method string)) []grpc.ServerOption {
	h := &handler{log: log, counted: counted}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(h.unary),
		grpc.ChainStreamInterceptor(h.stream),
	}
}

type handler struct {
	log     *slog.Logger
	counted func(method string)
}

func (h *handler) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
	defer h.recover(info.FullMethod, &err)
	return next(ctx, req)
}

func (h *handler) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) (err error) {
	defer h.recover(info.FullMethod, &err)
	return next(srv, ss)
}

// recover must be deferred directly: it answers the call with Internal
// when the handler panicked.
func (h *handler) recover(method string, err *error) {
	v := recover()
	if v == nil {
		return
	}
	h.log.Error("a request handler panicked; the call was answered with an internal error",
		"method", method, "panic", cut(v), "stack", string(debug.Stack()))
	if h.counted != nil {
		h.counted(method)
	}
	*err = status.Error(codes.Internal, "internal error")
}

// cut is the panic value as text, at most maxValue bytes of it.
func cut(v any) string {
	msg := fmt.Sprint(v)
	if len(msg) > maxValue {
		msg = msg[:maxValue] + "…"
	}
	return msg
}
