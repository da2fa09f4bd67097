package adminapi

import (
	"context"
	"errors"
	"log/slog"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// Server implements the admin gRPC service over a Backend. Register it with
// adminv1.RegisterAdminServiceServer on the admin listener's grpc.Server.
type Server struct {
	adminv1.UnimplementedAdminServiceServer
	backend Backend
	log     *slog.Logger
	now     func() time.Time
}

var _ adminv1.AdminServiceServer = (*Server)(nil)

// Options configure a Server.
type Options struct {
	Logger *slog.Logger     // audit log of invalidations; discarded when nil
	Now    func() time.Time // the clock uptime is measured with; time.Now when nil
}

// NewServer returns a Server acting on b.
func NewServer(b Backend, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{backend: b, log: o.Logger, now: o.Now}
}

// checkRequestType is the type URL Explain accepts.
var checkRequestType = "type.googleapis.com/" + string((&authv3.CheckRequest{}).ProtoReflect().Descriptor().FullName())

// InvalidateSession drops what the service holds for one session.
func (s *Server) InvalidateSession(ctx context.Context, req *adminv1.InvalidateSessionRequest) (*adminv1.InvalidateSessionResponse, error) {
	if req.GetSessionId() == "" {
		return nil, status.Error(codes.InvalidArgument, "session_id is required")
	}
	c, err := s.backend.InvalidateSession(ctx, req.GetSessionId())
	if err != nil {
		return nil, s.fail(ctx, "InvalidateSession", err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "admin: session invalidated",
		slog.String("session", req.GetSessionId()), countsAttr(c))
	return &adminv1.InvalidateSessionResponse{Dropped: dropped(c)}, nil
}

// RevokeSubject revokes one user, named by issuer and subject.
func (s *Server) RevokeSubject(ctx context.Context, req *adminv1.RevokeSubjectRequest) (*adminv1.RevokeSubjectResponse, error) {
	if req.GetSubject() == "" || req.GetIssuer() == "" {
		return nil, status.Error(codes.InvalidArgument, "issuer and subject are required: a user is (issuer, subject)")
	}
	c, err := s.backend.RevokeSubject(ctx, req.GetIssuer(), req.GetSubject())
	if err != nil {
		return nil, s.fail(ctx, "RevokeSubject", err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "admin: subject revoked",
		slog.String("issuer", req.GetIssuer()), slog.String("user", req.GetSubject()), countsAttr(c))
	return &adminv1.RevokeSubjectResponse{Dropped: dropped(c)}, nil
}

// RevokeAPIKey revokes one API key, named by its issuer and id.
func (s *Server) RevokeAPIKey(ctx context.Context, req *adminv1.RevokeAPIKeyRequest) (*adminv1.RevokeAPIKeyResponse, error) {
	if req.GetIssuer() == "" || req.GetKeyId() == "" {
		return nil, status.Error(codes.InvalidArgument, "issuer and key_id are required: a key is (issuer, id)")
	}
	r, err := s.backend.RevokeAPIKey(ctx, req.GetIssuer(), req.GetKeyId())
	if err != nil {
		return nil, s.fail(ctx, "RevokeAPIKey", err)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "admin: API key revoked",
		slog.String("issuer", req.GetIssuer()), slog.String("key_id", req.GetKeyId()),
		slog.Time("until", r.Until), slog.Bool("known", r.Known), countsAttr(r.Dropped))
	return &adminv1.RevokeAPIKeyResponse{Dropped: dropped(r.Dropped), Until: timestamp(r.Until), Known: r.Known}, nil
}

// Explain runs a CheckRequest through the pipeline without side effects.
func (s *Server) Explain(ctx context.Context, req *adminv1.ExplainRequest) (*adminv1.ExplainResponse, error) {
	in := req.GetCheckRequest()
	if in == nil {
		return nil, status.Error(codes.InvalidArgument, "check_request is required")
	}
	if in.GetTypeUrl() != checkRequestType {
		return nil, status.Errorf(codes.InvalidArgument, "check_request is a %q, want %q", in.GetTypeUrl(), checkRequestType)
	}
	cr := new(authv3.CheckRequest)
	if err := in.UnmarshalTo(cr); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "check_request: %v", err)
	}
	e, err := s.backend.Explain(ctx, cr)
	if err != nil {
		return nil, s.fail(ctx, "Explain", err)
	}
	if e.Response == nil {
		return nil, s.fail(ctx, "Explain", errors.New("the backend returned no CheckResponse"))
	}
	out, err := e.Proto()
	if err != nil {
		return nil, s.fail(ctx, "Explain", err)
	}
	return out, nil
}

// Proto is the explanation as the admin API sends it.
func (e Explanation) Proto() (*adminv1.ExplainResponse, error) {
	if e.Response == nil {
		return nil, errors.New("the backend returned no CheckResponse")
	}
	resp, err := anypb.New(e.Response)
	if err != nil {
		return nil, err
	}
	out := &adminv1.ExplainResponse{
		Route:         e.Route,
		Outcome:       e.Outcome,
		Allowed:       e.Allowed,
		HttpStatus:    int32(e.HTTPStatus),
		Description:   e.Description,
		Steps:         make([]*adminv1.Step, len(e.Steps)),
		CheckResponse: resp,
	}
	for i, st := range e.Steps {
		out.Steps[i] = &adminv1.Step{Name: st.Name, Outcome: st.Outcome, Detail: st.Detail}
	}
	return out, nil
}

// Stats reports the service's counters and its uptime.
func (s *Server) Stats(ctx context.Context, _ *adminv1.StatsRequest) (*adminv1.StatsResponse, error) {
	st, err := s.backend.Stats(ctx)
	if err != nil {
		return nil, s.fail(ctx, "Stats", err)
	}
	out := &adminv1.StatsResponse{
		Version: st.Version,
		Config:  &adminv1.Config{Generation: st.ConfigGeneration, LoadedAt: timestamp(st.ConfigLoadedAt)},
		Caches:  make([]*adminv1.Cache, len(st.Caches)),
	}
	if !st.StartedAt.IsZero() {
		out.StartedAt = timestamppb.New(st.StartedAt)
		out.Uptime = durationpb.New(max(s.now().Sub(st.StartedAt), 0))
	}
	for i, c := range st.Caches {
		out.Caches[i] = &adminv1.Cache{
			Name: c.Name, Hits: c.Hits, Misses: c.Misses, Evictions: c.Evictions, Size: count(c.Size),
		}
	}
	return out, nil
}

// fail turns a backend error into the status the client sees: a status the
// backend chose, the context's own error, or Internal.
func (s *Server) fail(ctx context.Context, method string, err error) error {
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	if st := status.FromContextError(err); st.Code() != codes.Unknown {
		return st.Err()
	}
	s.log.LogAttrs(ctx, slog.LevelError, "admin: backend failed",
		slog.String("method", method), slog.String("error", err.Error()))
	return status.Errorf(codes.Internal, "%s: %v", method, err)
}

func dropped(c Counts) *adminv1.Dropped {
	return &adminv1.Dropped{
		Verdicts:        count(c.Verdicts),
		ExchangedTokens: count(c.ExchangedTokens),
		SessionBindings: count(c.SessionBindings),
		Elicitations:    count(c.Elicitations),
	}
}

func countsAttr(c Counts) slog.Attr {
	return slog.Group("dropped",
		slog.Int("verdicts", c.Verdicts), slog.Int("exchanged_tokens", c.ExchangedTokens),
		slog.Int("session_bindings", c.SessionBindings), slog.Int("elicitations", c.Elicitations))
}

// count converts a Go length to the wire's unsigned count.
func count(n int) uint64 { return uint64(max(n, 0)) }

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
