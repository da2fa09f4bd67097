package envoyauthz

import (
	"context"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/testing/typical"
)

// TestMemoIsPerUser: users whose grants share a shape (same route, issuer,
// claims) each get their own identity back from the memoized responses of
// both paths, however their checks interleave; and the wire path's
// memoized bytes are the message the protobuf API answers.
func TestMemoIsPerUser(t *testing.T) {
	srv := verdictFixture(t, 100)
	ctx := context.Background()
	const users = 3
	reqs := make([]*authv3.CheckRequest, users)
	wire := make([][]byte, users)
	for i := range reqs {
		reqs[i] = typicalRequest(typicalToken(t, i))
		var err error
		if wire[i], err = proto.Marshal(reqs[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkWire := func(i int) *authv3.CheckResponse {
		w := wirePool.Get().(*wireRequest)
		if err := w.decode(wire[i]); err != nil {
			t.Fatal(err)
		}
		out := srv.checkWire(ctx, w)
		w.release()
		switch out := out.(type) {
		case *authv3.CheckResponse:
			return out
		case *encodedResponse:
			var resp authv3.CheckResponse
			if err := proto.Unmarshal(out.b, &resp); err != nil {
				t.Fatal(err)
			}
			return &resp
		}
		t.Fatalf("wire answer %T", out)
		return nil
	}
	want := func(t *testing.T, i int, resp *authv3.CheckResponse) {
		t.Helper()
		user := typical.Subject(i)
		md := resp.GetDynamicMetadata().GetFields()
		if got := md["user"].GetStringValue(); got != user {
			t.Fatalf("metadata user %q, want %q", got, user)
		}
		if got := md["session"].GetStringValue(); got != typical.Session(i) {
			t.Fatalf("metadata session %q", got)
		}
		hs := map[string]string{}
		for _, h := range resp.GetOkResponse().GetHeaders() {
			hs[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		if hs["x-user-id"] != user || hs["x-user-email"] != user+"@example.com" {
			t.Fatalf("headers %v for %s", hs, user)
		}
	}
	// Round 0 makes the grants, later rounds make memos and hit them,
	// each path twice in a row, the users interleaved.
	for round := range 4 {
		for i := range users {
			p, _ := srv.Check(ctx, reqs[i])
			want(t, i, p)
			again, _ := srv.Check(ctx, reqs[i])
			want(t, i, again)
			if round > 0 && again != p {
				t.Fatalf("round %d user %d: the repeated check was not answered from the memo", round, i)
			}
			w := checkWire(i)
			want(t, i, w)
			want(t, i, checkWire(i))
			if !proto.Equal(again, w) {
				t.Fatalf("round %d user %d: the wire answer differs from the protobuf one:\n%v\n%v", round, i, w, again)
			}
		}
	}
}

// TestWireMemo: from a grant's second use on, the wire path answers with
// the bytes it memoized, and a check through the protobuf API in between
// replaces the memo without changing the answer.
func TestWireMemo(t *testing.T) {
	srv := verdictFixture(t, 16)
	ctx := context.Background()
	req := typicalRequest(typicalToken(t, 1))
	enc, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	wire := func() *encodedResponse {
		w := wirePool.Get().(*wireRequest)
		if err := w.decode(enc); err != nil {
			t.Fatal(err)
		}
		defer w.release()
		e, ok := srv.checkWire(ctx, w).(*encodedResponse)
		if !ok {
			t.Fatal("the wire path did not answer an allow encoded")
		}
		return e
	}
	first := wire() // the miss
	second, third := wire(), wire()
	if second != third {
		t.Fatal("a repeated check was not answered from the memo")
	}
	if first == second {
		t.Fatal("the miss's answer (cached false) was memoized")
	}
	msg, _ := srv.Check(ctx, req)
	fourth, fifth := wire(), wire()
	if fourth == third || fifth != fourth {
		t.Fatal("the memo was not rebuilt once after the protobuf API's")
	}
	var got authv3.CheckResponse
	if err := proto.Unmarshal(fourth.b, &got); err != nil || !proto.Equal(&got, msg) {
		t.Fatalf("the wire answer %v (%v) differs from the protobuf API's %v", &got, err, msg)
	}
}
