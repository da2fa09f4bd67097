package adminapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// fakeBackend answers with canned values and records what it was asked.
type fakeBackend struct {
	counts      Counts
	explanation Explanation
	stats       Stats
	err         error // returned by every method when set

	mu       sync.Mutex
	sessions []string
	subjects []string
	keys     []string
	explains []*authv3.CheckRequest
	statsN   int
}

func (f *fakeBackend) InvalidateSession(_ context.Context, session string) (Counts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions = append(f.sessions, session)
	return f.counts, f.err
}

func (f *fakeBackend) RevokeSubject(_ context.Context, issuer, subject string) (Counts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subjects = append(f.subjects, issuer+" "+subject)
	return f.counts, f.err
}

// revokedUntil is the end the fake reports for a key revocation; a key
// whose id starts with "unknown" is reported as not loaded.
var revokedUntil = time.Date(2027, 4, 1, 0, 0, 0, 0, time.UTC)

func (f *fakeBackend) RevokeAPIKey(_ context.Context, issuer, id string) (KeyRevocation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, issuer+" "+id)
	return KeyRevocation{Dropped: f.counts, Until: revokedUntil, Known: !strings.HasPrefix(id, "unknown")}, f.err
}

func (f *fakeBackend) Explain(_ context.Context, req *authv3.CheckRequest) (Explanation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.explains = append(f.explains, proto.Clone(req).(*authv3.CheckRequest))
	return f.explanation, f.err
}

func (f *fakeBackend) Stats(context.Context) (Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statsN++
	return f.stats, f.err
}

// calls reports how many calls of each kind the backend saw.
func (f *fakeBackend) calls() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("sessions=%q subjects=%q keys=%q explains=%d stats=%d", f.sessions, f.subjects, f.keys, len(f.explains), f.statsN)
}

// explained returns the requests Explain saw.
func (f *fakeBackend) explained() []*authv3.CheckRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*authv3.CheckRequest(nil), f.explains...)
}

var _ Backend = (*fakeBackend)(nil)

// testNow is the fake clock's time; testStarted is 90 minutes earlier.
var (
	testNow     = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	testStarted = testNow.Add(-90*time.Minute - 2*time.Second)
)

// testStats is what the fake backend reports in Stats.
func testStats() Stats {
	return Stats{
		Version:          "v1.2.3",
		StartedAt:        testStarted,
		ConfigGeneration: 3,
		ConfigLoadedAt:   testNow.Add(-10 * time.Minute),
		Caches: []CacheStats{
			{Name: CacheVerdicts, Hits: 1200, Misses: 34, Evictions: 5, Size: 29},
			{Name: CacheExchangedTokens, Hits: 7, Misses: 3, Size: 3},
			{Name: CacheSessions, Size: 12},
			{Name: CacheElicitations},
		},
	}
}

// deniedExplanation is a 401 for an expired token, as the pipeline would
// explain it.
func deniedExplanation() Explanation {
	const challenge = `Bearer error="invalid_token", error_description="the token has expired", resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp"`
	return Explanation{
		Route:       "files-mcp",
		Outcome:     "invalid_token",
		HTTPStatus:  401,
		Description: "the token has expired",
		Steps: []Step{
			{Name: "route", Outcome: "ok", Detail: "files-mcp (context_extensions)"},
			{Name: "public_path", Outcome: "skipped", Detail: "/mcp is not public"},
			{Name: "credential", Outcome: "ok", Detail: "authorization header"},
			{Name: "identity", Outcome: "invalid_token", Detail: "the token has expired\x1b[2J"},
		},
		Response: &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(code.Code_UNAUTHENTICATED)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{
					{Header: &corev3.HeaderValue{Key: "www-authenticate", Value: challenge}},
					{Header: &corev3.HeaderValue{Key: "content-type", Value: "application/json"}},
				},
				Body: `{"error":"invalid_token","error_description":"the token has expired","status":401}`,
			}},
		},
	}
}

// allowedExplanation is an allow that sets the identity headers.
func allowedExplanation() Explanation {
	return Explanation{
		Route:      "files-mcp",
		Outcome:    "allowed",
		Allowed:    true,
		HTTPStatus: 200,
		Steps: []Step{
			{Name: "route", Outcome: "ok", Detail: "files-mcp"},
			{Name: "identity", Outcome: "ok", Detail: "cache miss; issuer corp"},
			{Name: "authorization", Outcome: "ok", Detail: "tools/call read_file"},
		},
		Response: &authv3.CheckResponse{
			Status: &rpcstatus.Status{Code: int32(code.Code_OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
				Headers: []*corev3.HeaderValueOption{
					{Header: &corev3.HeaderValue{Key: "x-user-id", Value: "alice"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
					{Header: &corev3.HeaderValue{Key: "x-session-id", Value: "sess-42"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
				},
				HeadersToRemove: []string{"authorization"},
			}},
		},
	}
}

// adminService is a running admin listener: gRPC and HTTP on one port.
type adminService struct {
	addr    string
	backend *fakeBackend
	url     string
}

// startAdmin serves b like the service does: the admin gRPC server and an
// HTTP mux behind Handler on 127.0.0.1:0. The mux answers /healthz and
// echoes the protocol of anything else, so tests can tell who answered.
func startAdmin(t testing.TB, b *fakeBackend, log *slog.Logger) *adminService {
	t.Helper()
	gs := grpc.NewServer()
	adminv1.RegisterAdminServiceServer(gs, NewServer(b, Options{Logger: log, Now: func() time.Time { return testNow }}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Answered-By", "mux")
		fmt.Fprintf(w, "mux %s %s %s\n", r.Proto, r.Method, r.URL.Path)
	})
	srv := httptest.NewUnstartedServer(Handler(gs, mux))
	srv.Config.Protocols = Protocols()
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		gs.Stop()
	})
	return &adminService{addr: srv.Listener.Addr().String(), backend: b, url: srv.URL}
}

// client dials the admin listener.
func (s *adminService) client(t testing.TB) adminv1.AdminServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return adminv1.NewAdminServiceClient(conn)
}
