package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

func TestServerInvalidate(t *testing.T) {
	counts := Counts{Verdicts: 3, ExchangedTokens: 2, SessionBindings: 1, Elicitations: 4}
	want := &adminv1.Dropped{Verdicts: 3, ExchangedTokens: 2, SessionBindings: 1, Elicitations: 4}
	tests := []struct {
		name      string
		err       error // the backend's
		call      func(context.Context, adminv1.AdminServiceClient) (*adminv1.Dropped, error)
		wantCode  codes.Code
		wantCalls string
	}{
		{
			name:      "session",
			call:      invalidateSession("sess-42"),
			wantCalls: `sessions=["sess-42"] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "subject",
			call:      revokeSubject("hs", "alice"),
			wantCalls: `sessions=[] subjects=["hs alice"] keys=[] explains=0 stats=0`,
		},
		{
			name:      "API key",
			call:      revokeAPIKey("keys", "billing-1"),
			wantCalls: `sessions=[] subjects=[] keys=["keys billing-1"] explains=0 stats=0`,
		},
		{
			name:      "an API key without its issuer is refused before the backend",
			call:      revokeAPIKey("", "billing-1"),
			wantCode:  codes.InvalidArgument,
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "an empty API key id is refused before the backend",
			call:      revokeAPIKey("keys", ""),
			wantCode:  codes.InvalidArgument,
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "the backend's refusal of an API key is kept",
			err:       status.Error(codes.InvalidArgument, `"hs" is not an issuer of kind api_keys`),
			call:      revokeAPIKey("hs", "billing-1"),
			wantCode:  codes.InvalidArgument,
			wantCalls: `sessions=[] subjects=[] keys=["hs billing-1"] explains=0 stats=0`,
		},
		{
			name:      "empty session is refused before the backend",
			call:      invalidateSession(""),
			wantCode:  codes.InvalidArgument,
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "empty subject is refused before the backend",
			call:      revokeSubject("hs", ""),
			wantCode:  codes.InvalidArgument,
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "a subject without its issuer is refused before the backend",
			call:      revokeSubject("", "alice"),
			wantCode:  codes.InvalidArgument,
			wantCalls: `sessions=[] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "a broken backend is Internal",
			err:       errors.New("store unreachable"),
			call:      invalidateSession("sess-42"),
			wantCode:  codes.Internal,
			wantCalls: `sessions=["sess-42"] subjects=[] keys=[] explains=0 stats=0`,
		},
		{
			name:      "the backend's status is kept",
			err:       fmt.Errorf("lookup: %w", status.Error(codes.FailedPrecondition, "sessions are not tracked")),
			call:      revokeSubject("hs", "alice"),
			wantCode:  codes.FailedPrecondition,
			wantCalls: `sessions=[] subjects=["hs alice"] keys=[] explains=0 stats=0`,
		},
		{
			name:      "a context error keeps its code",
			err:       fmt.Errorf("drop: %w", context.DeadlineExceeded),
			call:      invalidateSession("sess-42"),
			wantCode:  codes.DeadlineExceeded,
			wantCalls: `sessions=["sess-42"] subjects=[] keys=[] explains=0 stats=0`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{counts: counts, err: tt.err}
			svc := startAdmin(t, b, nil)
			got, err := tt.call(t.Context(), svc.client(t))
			if code := status.Code(err); code != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", code, err, tt.wantCode)
			}
			if tt.wantCode == codes.OK && !proto.Equal(got, want) {
				t.Errorf("dropped = %v, want %v", got, want)
			}
			if calls := b.calls(); calls != tt.wantCalls {
				t.Errorf("backend calls: %s, want %s", calls, tt.wantCalls)
			}
		})
	}
}

func invalidateSession(id string) func(context.Context, adminv1.AdminServiceClient) (*adminv1.Dropped, error) {
	return func(ctx context.Context, c adminv1.AdminServiceClient) (*adminv1.Dropped, error) {
		resp, err := c.InvalidateSession(ctx, &adminv1.InvalidateSessionRequest{SessionId: id})
		return resp.GetDropped(), err
	}
}

func revokeSubject(issuer, sub string) func(context.Context, adminv1.AdminServiceClient) (*adminv1.Dropped, error) {
	return func(ctx context.Context, c adminv1.AdminServiceClient) (*adminv1.Dropped, error) {
		resp, err := c.RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: issuer, Subject: sub})
		return resp.GetDropped(), err
	}
}

func revokeAPIKey(issuer, id string) func(context.Context, adminv1.AdminServiceClient) (*adminv1.Dropped, error) {
	return func(ctx context.Context, c adminv1.AdminServiceClient) (*adminv1.Dropped, error) {
		resp, err := c.RevokeAPIKey(ctx, &adminv1.RevokeAPIKeyRequest{Issuer: issuer, KeyId: id})
		if err == nil && (!resp.GetUntil().AsTime().Equal(revokedUntil) || !resp.GetKnown()) {
			return nil, fmt.Errorf("until %v known %v, want %v true", resp.GetUntil().AsTime(), resp.GetKnown(), revokedUntil)
		}
		return resp.GetDropped(), err
	}
}

func TestServerRevokeAPIKeyAuditLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	svc := startAdmin(t, &fakeBackend{counts: Counts{Verdicts: 2}}, log)
	if _, err := revokeAPIKey("keys", "billing-1")(t.Context(), svc.client(t)); err != nil {
		t.Fatal(err)
	}
	var entry struct {
		Msg, Issuer string
		KeyID       string `json:"key_id"`
		Known       bool
		Dropped     map[string]int
	}
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if entry.Msg != "admin: API key revoked" || entry.Issuer != "keys" || entry.KeyID != "billing-1" || !entry.Known || entry.Dropped["verdicts"] != 2 {
		t.Errorf("audit log = %s", buf.String())
	}
}

func TestServerInvalidateAuditLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	svc := startAdmin(t, &fakeBackend{counts: Counts{Verdicts: 2, SessionBindings: 1}}, log)
	if _, err := revokeSubject("hs", "alice")(t.Context(), svc.client(t)); err != nil {
		t.Fatal(err)
	}
	var entry struct {
		Msg     string
		User    string
		Dropped map[string]int
	}
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("log %q: %v", buf.String(), err)
	}
	if entry.Msg != "admin: subject revoked" || entry.User != "alice" ||
		entry.Dropped["verdicts"] != 2 || entry.Dropped["session_bindings"] != 1 {
		t.Errorf("audit log = %s", buf.String())
	}
}

func TestServerExplain(t *testing.T) {
	req := readTestRequest(t)
	packed, err := anypb.New(req)
	if err != nil {
		t.Fatal(err)
	}
	wrongType, err := anypb.New(&adminv1.StatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	noResponse := deniedExplanation()
	noResponse.Response = nil

	tests := []struct {
		name        string
		in          *anypb.Any
		explanation Explanation
		err         error
		wantCode    codes.Code
		wantCalls   int
	}{
		{name: "denied", in: packed, explanation: deniedExplanation(), wantCalls: 1},
		{name: "allowed", in: packed, explanation: allowedExplanation(), wantCalls: 1},
		{name: "no request", in: nil, wantCode: codes.InvalidArgument},
		{name: "another message type", in: wrongType, wantCode: codes.InvalidArgument},
		{
			name:     "undecodable request",
			in:       &anypb.Any{TypeUrl: checkRequestType, Value: []byte{0xff, 0xff}},
			wantCode: codes.InvalidArgument,
		},
		{name: "backend without a response", in: packed, explanation: noResponse, wantCode: codes.Internal, wantCalls: 1},
		{name: "broken backend", in: packed, err: errors.New("pipeline closed"), wantCode: codes.Internal, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &fakeBackend{explanation: tt.explanation, err: tt.err}
			svc := startAdmin(t, b, nil)
			got, err := svc.client(t).Explain(t.Context(), &adminv1.ExplainRequest{CheckRequest: tt.in})
			if code := status.Code(err); code != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", code, err, tt.wantCode)
			}
			seen := b.explained()
			if len(seen) != tt.wantCalls {
				t.Fatalf("backend saw %d requests, want %d", len(seen), tt.wantCalls)
			}
			if tt.wantCalls > 0 && !proto.Equal(seen[0], req) {
				t.Errorf("backend got %v, want %v", seen[0], req)
			}
			if tt.wantCode != codes.OK {
				return
			}
			e := tt.explanation
			resp, err := got.GetCheckResponse().UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(resp, e.Response) {
				t.Errorf("check_response = %v, want %v", resp, e.Response)
			}
			want := &adminv1.ExplainResponse{
				Route: e.Route, Outcome: e.Outcome, Allowed: e.Allowed,
				HttpStatus: int32(e.HTTPStatus), Description: e.Description,
			}
			for _, s := range e.Steps {
				want.Steps = append(want.Steps, &adminv1.Step{Name: s.Name, Outcome: s.Outcome, Detail: s.Detail})
			}
			got.CheckResponse = nil
			if diff := cmpProto(got, want); diff != "" {
				t.Errorf("explain response differs:\n%s", diff)
			}
		})
	}
}

func TestServerStats(t *testing.T) {
	unstarted := testStats()
	unstarted.StartedAt, unstarted.ConfigLoadedAt = time.Time{}, time.Time{}
	negative := testStats()
	negative.Caches = []CacheStats{{Name: CacheVerdicts, Size: -1}}
	future := testStats()
	future.StartedAt = testNow.Add(time.Hour) // a clock step backwards

	tests := []struct {
		name       string
		stats      Stats
		err        error
		wantCode   codes.Code
		wantUptime time.Duration
		wantJSON   string
	}{
		{
			name:       "running",
			stats:      testStats(),
			wantUptime: 90*time.Minute + 2*time.Second,
			wantJSON: `{"version":"v1.2.3","startedAt":"2026-03-14T13:39:24Z","uptime":"5402s",` +
				`"config":{"generation":"3","loadedAt":"2026-03-14T14:59:26Z"},"caches":[` +
				`{"name":"verdicts","hits":"1200","misses":"34","evictions":"5","size":"29"},` +
				`{"name":"exchanged_tokens","hits":"7","misses":"3","size":"3"},` +
				`{"name":"sessions","size":"12"},{"name":"elicitations"}]}`,
		},
		{
			name:     "no start time: no uptime",
			stats:    unstarted,
			wantJSON: `{"version":"v1.2.3","config":{"generation":"3"},"caches":[{"name":"verdicts","hits":"1200","misses":"34","evictions":"5","size":"29"},{"name":"exchanged_tokens","hits":"7","misses":"3","size":"3"},{"name":"sessions","size":"12"},{"name":"elicitations"}]}`,
		},
		{
			name:     "a negative size is zero",
			stats:    negative,
			wantJSON: `{"version":"v1.2.3","startedAt":"2026-03-14T13:39:24Z","uptime":"5402s","config":{"generation":"3","loadedAt":"2026-03-14T14:59:26Z"},"caches":[{"name":"verdicts"}]}`,
		},
		{
			name:     "a start in the future is no uptime yet",
			stats:    future,
			wantJSON: `{"version":"v1.2.3","startedAt":"2026-03-14T16:09:26Z","uptime":"0s","config":{"generation":"3","loadedAt":"2026-03-14T14:59:26Z"},"caches":[{"name":"verdicts","hits":"1200","misses":"34","evictions":"5","size":"29"},{"name":"exchanged_tokens","hits":"7","misses":"3","size":"3"},{"name":"sessions","size":"12"},{"name":"elicitations"}]}`,
		},
		{name: "broken backend", err: errors.New("boom"), wantCode: codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := startAdmin(t, &fakeBackend{stats: tt.stats, err: tt.err}, nil)
			got, err := svc.client(t).Stats(t.Context(), &adminv1.StatsRequest{})
			if code := status.Code(err); code != tt.wantCode {
				t.Fatalf("code = %v (%v), want %v", code, err, tt.wantCode)
			}
			if err != nil {
				return
			}
			if tt.wantUptime != 0 && got.GetUptime().AsDuration() != tt.wantUptime {
				t.Errorf("uptime = %v, want %v", got.GetUptime().AsDuration(), tt.wantUptime)
			}
			var want adminv1.StatsResponse
			if err := protojson.Unmarshal([]byte(tt.wantJSON), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmpProto(got, &want); diff != "" {
				t.Errorf("stats differ:\n%s", diff)
			}
		})
	}
}

// cmpProto describes how got differs from want, or returns "".
func cmpProto(got, want proto.Message) string {
	if proto.Equal(got, want) {
		return ""
	}
	g, _ := protojson.Marshal(got)
	w, _ := protojson.Marshal(want)
	return "got:  " + strings.Join(strings.Fields(string(g)), " ") + "\nwant: " + strings.Join(strings.Fields(string(w)), " ")
}

// readTestRequest is testdata/check-request.json.
func readTestRequest(t testing.TB) *authv3.CheckRequest {
	t.Helper()
	data := mustRead(t, "testdata/check-request.json")
	req, err := parseCheckRequest(data)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
