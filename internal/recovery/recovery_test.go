package recovery

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// panicking is a health server whose Check panics for one service name and
// answers every other, and whose Watch always panics.
type panicking struct {
	healthpb.UnimplementedHealthServer
	ok *health.Server
}

func (p panicking) Check(ctx context.Context, in *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if in.Service == "boom" {
		var none []string
		_ = none[len(in.Service)] // index out of range: a real runtime panic
	}
	return p.ok.Check(ctx, in)
}

func (p panicking) Watch(*healthpb.HealthCheckRequest, healthpb.Health_WatchServer) error {
	panic("stream handler broke")
}

// TestPanicAnswersThatCallOnly: a panicking handler answers its own call
// with Internal, is logged and counted, and the server keeps serving.
func TestPanicAnswersThatCallOnly(t *testing.T) {
	var logs bytes.Buffer
	var count atomic.Int32
	gs := grpc.NewServer(ServerOptions(slog.New(slog.NewTextHandler(&logs, nil)), func(string) { count.Add(1) })...)
	healthpb.RegisterHealthServer(gs, panicking{ok: health.NewServer()})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := healthpb.NewHealthClient(conn)

	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"unary panic", func() error {
			_, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "boom"})
			return err
		}, codes.Internal},
		{"stream panic", func() error {
			s, err := c.Watch(t.Context(), &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, codes.Internal},
		{"server still serves", func() error { _, err := c.Check(t.Context(), &healthpb.HealthCheckRequest{}); return err }, codes.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := status.Code(tc.call()); got != tc.want {
				t.Fatalf("code %v, want %v", got, tc.want)
			}
		})
	}
	if got := count.Load(); got != 2 {
		t.Errorf("counted %d panics, want 2", got)
	}
	for _, want := range []string{"index out of range", "stream handler broke", "/grpc.health.v1.Health/Watch", "recovery_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q", want)
		}
	}
}
