package adminapi

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Audit authenticates every admin call and logs it: who (Caller.Identity),
// the method, the target and the result. Install GRPCOptions on the admin
// grpc.Server and wrap the admin HTTP routes with HTTP.
type Audit struct {
	auth *Authenticator
	log  *slog.Logger
}

// NewAudit returns an Audit that authenticates with a and logs to log.
func NewAudit(a *Authenticator, log *slog.Logger) *Audit {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Audit{auth: a, log: log}
}

// GRPCOptions are the interceptors: an unauthenticated call gets
// Unauthenticated before any handler runs.
func (au *Audit) GRPCOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(au.unary), grpc.ChainStreamInterceptor(au.stream)}
}

func (au *Audit) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, err := au.grpcCaller(ctx)
	if err != nil {
		au.refused(ctx, c, methodName(info.FullMethod), err)
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	resp, err := handler(ctx, req)
	au.log.LogAttrs(ctx, slog.LevelInfo, "admin call",
		slog.String("caller", c.Identity), slog.String("peer", c.Addr),
		slog.String("method", methodName(info.FullMethod)), slog.String("target", target(req)),
		slog.String("result", status.Code(err).String()))
	return resp, err
}

// stream guards streaming methods the same way (the API has none today).
func (au *Audit) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c, err := au.grpcCaller(ss.Context())
	if err != nil {
		au.refused(ss.Context(), c, methodName(info.FullMethod), err)
		return status.Error(codes.Unauthenticated, err.Error())
	}
	err = handler(srv, ss)
	au.log.LogAttrs(ss.Context(), slog.LevelInfo, "admin call",
		slog.String("caller", c.Identity), slog.String("peer", c.Addr),
		slog.String("method", methodName(info.FullMethod)), slog.String("result", status.Code(err).String()))
	return err
}

// refused logs a call refused for want of credentials: the reason, the
// peer and the method, never what was presented.
func (au *Audit) refused(ctx context.Context, c Caller, method string, err error) {
	reason := "error"
	var r *Refusal
	if errors.As(err, &r) {
		reason = r.Reason
	}
	au.log.LogAttrs(ctx, slog.LevelWarn, "admin: call refused",
		slog.String("reason", reason), slog.String("peer", c.Addr), slog.String("method", method))
}

func (au *Audit) grpcCaller(ctx context.Context) (Caller, error) {
	var state *tls.ConnectionState
	addr := ""
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			addr = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			state = &ti.State
		}
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return au.auth.Authenticate(ctx, state, md.Get("authorization"), addr)
}

// methodName is the method without its service: "/pkg.Service/Explain" is
// "Explain".
func methodName(full string) string {
	return full[strings.LastIndexByte(full, '/')+1:]
}

// target names what a call acts on: the request's top-level scalar fields
// (session_id=..., subject=...). Nested messages are left out: Explain's
// CheckRequest carries the caller's token.
func target(req any) string {
	m, ok := req.(proto.Message)
	if !ok {
		return ""
	}
	var b strings.Builder
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.IsList() || fd.IsMap() {
			return true
		}
		switch fd.Kind() {
		case protoreflect.MessageKind, protoreflect.GroupKind, protoreflect.BytesKind:
			return true
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(fd.Name()))
		b.WriteByte('=')
		b.WriteString(strconv.Quote(v.String()))
		return true
	})
	return b.String()
}

// auditKey is where HTTP handlers find the record of their call.
type auditKey struct{}

type auditRecord struct {
	caller Caller
	target string
}

// SetTarget names what an HTTP admin call acts on, for its audit line.
func SetTarget(ctx context.Context, target string) {
	if r, ok := ctx.Value(auditKey{}).(*auditRecord); ok {
		r.target = target
	}
}

// HTTP authenticates and logs every request to next: 401 with a
// WWW-Authenticate challenge when refused.
func (au *Audit) HTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := au.auth.Authenticate(r.Context(), r.TLS, r.Header.Values("Authorization"), r.RemoteAddr)
		if err != nil {
			// The route is not known before the mux runs: the method and
			// the path (never the query) say what was tried.
			au.refused(r.Context(), c, r.Method+" "+r.URL.Path, err)
			w.Header().Set("WWW-Authenticate", `Bearer realm="extauthz-admin"`)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		rec := &auditRecord{caller: c}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		r = r.WithContext(context.WithValue(r.Context(), auditKey{}, rec))
		next.ServeHTTP(sw, r)
		method := r.Pattern // set by the ServeMux that routed it
		if method == "" {
			method = r.Method + " (no route)"
		}
		au.log.LogAttrs(r.Context(), slog.LevelInfo, "admin call",
			slog.String("caller", c.Identity), slog.String("peer", c.Addr),
			slog.String("method", method), slog.String("target", rec.target),
			slog.Int("status", sw.status))
	})
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (pprof's
// profile sets its own write deadline).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
