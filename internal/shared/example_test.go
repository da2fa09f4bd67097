package shared_test

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/extauthz/extauthz/internal/shared"
)

// A replica checks a session binding with its local tier first and comes
// to the shared tier only on a local miss; when Redis is unavailable the
// configured FailOpen decides. (Compiled, not run: it needs a Redis.)
func Example() {
	ctx := context.Background()
	s, err := shared.New(ctx, shared.Config{Addrs: []string{"redis:6379"}}, shared.Options{Logger: slog.Default()})
	if err != nil {
		panic(err) // a configuration error; an unreachable Redis is not one
	}
	defer s.Close()

	local := map[string]string{} // the in-process tier, e.g. internal/session
	allowed := func(key, subject string) bool {
		if owner, ok := local[key]; ok {
			return owner == subject // a local hit never touches Redis
		}
		_, owned, err := s.Bind(ctx, key, subject, 30*time.Minute, 64)
		if errors.Is(err, shared.ErrUnavailable) {
			return s.FailOpen()
		}
		if owned {
			local[key] = subject
		}
		return owned
	}
	_ = allowed("files\x00session-1", "alice")

	// Every replica drops what another one invalidated.
	go s.Subscribe(ctx, func(e shared.Event) {
		switch e.Kind {
		case shared.EventSession:
			// drop local entries of e.ID
		case shared.EventRevoke:
			// record that e.ID's tokens issued before e.At are revoked
		case shared.EventResync:
			revoked, err := s.Revocations(ctx)
			_, _ = revoked, err // replace the local revocation list
		}
	})
	_ = s.Publish(ctx, shared.Event{Kind: shared.EventSession, ID: "session-1"})
}
