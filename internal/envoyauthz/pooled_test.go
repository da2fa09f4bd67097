package envoyauthz

import (
	"context"
	"fmt"
	"sync"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/extauthz/extauthz/internal/testing/typical"
)

// TestOnlyMissAnswersArePooled: a miss's allow is written in a buffer of
// gRPC's pool, which the codec hands over to be put back once sent; the
// allow a grant memoizes is sent again by later checks, so it must never
// be (a pooled one would be overwritten by the next answer written there).
func TestOnlyMissAnswersArePooled(t *testing.T) {
	srv := verdictFixture(t, 16)
	ctx := context.Background()
	msg, err := proto.Marshal(typicalRequest(typicalToken(t, 1)))
	if err != nil {
		t.Fatal(err)
	}
	cdc := codec{proto: encoding.GetCodecV2("proto")}
	for _, round := range []string{"miss", "first hit", "memoized hit"} {
		w := wirePool.Get().(*wireRequest)
		if err := cdc.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, w); err != nil {
			t.Fatal(err)
		}
		out, ok := srv.checkWire(ctx, w).(*encodedResponse)
		w.release()
		if !ok {
			t.Fatalf("%s: not an encoded allow", round)
		}
		if pooled := out.pooled != nil; pooled != (round == "miss") {
			t.Fatalf("%s: pooled %v", round, pooled)
		}
		var resp authv3.CheckResponse
		if err := proto.Unmarshal(out.b, &resp); err != nil || resp.GetStatus().GetCode() != 0 {
			t.Fatalf("%s: %v %v", round, &resp, err)
		}
		sent, err := cdc.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := sent.Materialize(); string(got) != string(out.b) {
			t.Fatalf("%s: the codec sends other bytes than the answer's", round)
		}
		sent.Free()
	}
}

// TestPooledMissAnswersOverGRPC: many first checks at once through a real
// gRPC server, each answered from a pooled buffer: every answer names its
// own user, in the identity header and in the metadata, so that no buffer
// is put back while a response written in it is still being sent.
func TestPooledMissAnswersOverGRPC(t *testing.T) {
	const users, clients = 300, 8
	client := wireClient(t, verdictFixture(t, users))
	reqs := make([]*authv3.CheckRequest, users)
	for i := range reqs {
		reqs[i] = typicalRequest(typicalToken(t, i))
	}
	errs := make(chan error, users)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < users; i += clients {
				errs <- checkNamesUser(client, reqs[i], typical.Subject(i))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkNamesUser sends req and checks that the allow names user.
func checkNamesUser(client authv3.AuthorizationClient, req *authv3.CheckRequest, user string) error {
	resp, err := client.Check(context.Background(), req)
	if err != nil {
		return err
	}
	if resp.GetStatus().GetCode() != 0 {
		return fmt.Errorf("%s denied: %v", user, resp)
	}
	if got := resp.GetDynamicMetadata().GetFields()["user"].GetStringValue(); got != user {
		return fmt.Errorf("metadata user %q, want %q", got, user)
	}
	for _, h := range resp.GetOkResponse().GetHeaders() {
		if h.GetHeader().GetKey() == "x-user-id" {
			if got := h.GetHeader().GetValue(); got != user {
				return fmt.Errorf("x-user-id %q, want %q", got, user)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no x-user-id", user)
}
