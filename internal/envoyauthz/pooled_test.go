package envoyauthz

import (
	"bytes"
	"context"
	"fmt"
	"strings"
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
	checkAllNameTheirUsers(t, client, reqs, clients)
}

// checkAllNameTheirUsers sends reqs[i], the first check of
// typical.Subject(i), from clients goroutines at once and checks that every
// allow names its own user.
func checkAllNameTheirUsers(t *testing.T, client authv3.AuthorizationClient, reqs []*authv3.CheckRequest, clients int) {
	t.Helper()
	errs := make(chan error, len(reqs))
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < len(reqs); i += clients {
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

// TestKeepable: a message in one SliceBuffer is read where gRPC put it,
// anything else is copied, and what is copied stays as it was after gRPC
// puts its buffer back and the pool hands it out again.
func TestKeepable(t *testing.T) {
	msg := []byte("a request's bytes, longer than nothing")
	t.Run("one SliceBuffer is read in place", func(t *testing.T) {
		got := keepable(mem.BufferSlice{mem.SliceBuffer(msg)})
		if string(got) != string(msg) || &got[0] != &msg[0] {
			t.Fatal("copied, or other bytes")
		}
	})
	t.Run("a pooled buffer is copied", func(t *testing.T) {
		pool := mem.NewTieredBufferPool(4096)
		big := bytes.Repeat(msg, 100) // beyond the pooling threshold
		buf := mem.Copy(big, pool)
		if _, ok := buf.(mem.SliceBuffer); ok {
			t.Fatal("mem.Copy did not pool a buffer this large")
		}
		got := keepable(mem.BufferSlice{buf})
		data := buf.ReadOnlyData()
		if &got[0] == &data[0] {
			t.Fatal("read in place")
		}
		buf.Free() // as gRPC does once Unmarshal returns
		for range 4 {
			again := pool.Get(len(big))
			clear(*again)
			pool.Put(again)
		}
		if string(got) != string(big) {
			t.Fatal("the copy changed when the pool reused its buffer")
		}
	})
	t.Run("several buffers are joined in a copy", func(t *testing.T) {
		a, b := mem.SliceBuffer(msg[:5]), mem.SliceBuffer(msg[5:])
		if got := keepable(mem.BufferSlice{a, b}); string(got) != string(msg) {
			t.Fatalf("got %q", got)
		}
	})
}

// TestRequestBytesOverGRPC: first checks at once through a real gRPC
// server, in messages below gRPC's pooling threshold (read in place),
// above it (a pooled buffer, which goes back to the pool as soon as the
// request is decoded) and beyond one HTTP/2 frame (several buffers): every
// answer names its own user, so no request is read from bytes that
// another one has since been written into. (Reading the pooled buffer in
// place too makes this fail in most runs; TestKeepable is the
// deterministic check of the rule.)
func TestRequestBytesOverGRPC(t *testing.T) {
	const users, clients = 1200, 8
	client := wireClient(t, verdictFixture(t, users))
	pads := []int{0, 2_000, 20_000} // header bytes added to a ~900-byte request
	reqs := make([]*authv3.CheckRequest, users)
	for i := range reqs {
		reqs[i] = typicalRequest(typicalToken(t, i))
		if pad := pads[i%len(pads)]; pad > 0 {
			reqs[i].Attributes.Request.Http.Headers["x-pad"] = strings.Repeat(string(rune('a'+i%26)), pad)
		}
	}
	checkAllNameTheirUsers(t, client, reqs, clients)
}
