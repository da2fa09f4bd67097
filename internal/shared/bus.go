package shared

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event kinds on the bus.
const (
	// EventSession: drop everything of session ID.
	EventSession = "session"
	// EventRevoke: user ID's tokens issued before At are revoked.
	EventRevoke = "revoke"
	// EventRevokeAPIKey: the API key ID (APIKey.String, "issuer/id") is
	// revoked until At.
	EventRevokeAPIKey = "revoke_api_key"
	// EventConfig: the configuration changed; ID says what (caller's
	// convention).
	EventConfig = "config"
	// EventElicitationComplete: the elicitation ID names (a small JSON
	// document: id, user, session) was completed; the replica holding the
	// session's open stream tells the client (internal/extprocauthz).
	EventElicitationComplete = "elicitation_complete"
	// EventResync is never published: Subscribe hands it to its handler
	// whenever the subscription is (re)established, because whatever was
	// published while it was not is lost. The handler reloads (e.g.
	// Revocations) and may drop what it cannot check.
	EventResync = "resync"
)

// maxEventBytes bounds one message on the bus; events are small.
const maxEventBytes = 4 << 10

// Event is one invalidation on the bus.
type Event struct {
	Kind string
	ID   string
	At   time.Time // millisecond precision on the wire
	// Origin is the publishing replica's id; Publish sets it.
	Origin string
}

// wireEvent is an Event as published: compact JSON, unknown fields ignored
// so newer replicas can add some during a rolling update.
type wireEvent struct {
	Kind   string `json:"kind"`
	ID     string `json:"id,omitempty"`
	At     int64  `json:"at,omitempty"` // unix milliseconds
	Origin string `json:"origin,omitempty"`
}

var errBadEvent = errors.New("shared: malformed event")

func encodeEvent(e Event) ([]byte, error) {
	w := wireEvent{Kind: e.Kind, ID: e.ID, Origin: e.Origin}
	if !e.At.IsZero() {
		w.At = e.At.UnixMilli()
	}
	return json.Marshal(w)
}

// decodeEvent parses a message from the bus. It accepts only the kinds a
// replica publishes, so a handler never sees anything else.
func decodeEvent(b []byte) (Event, error) {
	if len(b) > maxEventBytes {
		return Event{}, errBadEvent
	}
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		return Event{}, errBadEvent
	}
	switch w.Kind {
	case EventSession, EventRevoke, EventElicitationComplete:
		if w.ID == "" {
			return Event{}, errBadEvent
		}
	case EventRevokeAPIKey:
		if _, ok := ParseAPIKey(w.ID); !ok || w.At == 0 {
			return Event{}, errBadEvent
		}
	case EventConfig:
	default:
		return Event{}, errBadEvent
	}
	e := Event{Kind: w.Kind, ID: w.ID, Origin: w.Origin}
	if w.At != 0 {
		e.At = time.UnixMilli(w.At)
	}
	return e, nil
}

// Publish sends e to every replica's Subscribe, stamped with this
// replica's id as Origin. Redis pub/sub delivers at most once to the
// replicas connected now: one that is not hears EventResync when it comes
// back.
func (s *Store) Publish(ctx context.Context, e Event) error {
	e.Origin = s.id
	b, err := encodeEvent(e)
	if err != nil {
		return err
	}
	if _, err := decodeEvent(b); err != nil {
		return err
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	if err := s.rdb.Publish(ctx, s.channel, b).Err(); err != nil {
		return s.fail(OpPublish, err)
	}
	s.observe(OpPublish, ResultOK)
	return nil
}

// Subscribe hands every event other replicas publish to handle, one at a
// time in order, until ctx ends or the Store closes. Events this replica
// published are skipped: it acted on them already.
//
// handle gets EventResync first when the subscription is established and
// again after every reconnect, before any event that follows it. Subscribe
// pings Redis when the channel is quiet, so a connection that died without
// a word is noticed within a few seconds, and retries with backoff while
// Redis is unreachable. handle should be quick: messages wait while it
// runs.
func (s *Store) Subscribe(ctx context.Context, handle func(Event)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.base, cancel)() // end with the Store

	sub := subscriber{s: s, handle: handle}
	for ctx.Err() == nil {
		sub.run(ctx)
	}
}

// Bus timing: a quiet subscription is pinged after busPingAfter; a ping
// unanswered for another busPingAfter means the connection is dead. Failed
// attempts back off from busRetryMin doubling to busRetryMax.
const (
	busPingAfter = time.Second
	busRetryMin  = 50 * time.Millisecond
	busRetryMax  = time.Second
)

type subscriber struct {
	s      *Store
	handle func(Event)
}

// run holds one PubSub until it must be replaced (closed, or a ping went
// unanswered) or ctx ends. go-redis re-dials and re-subscribes the PubSub
// by itself after a read error; each SUBSCRIBE confirmation marks a fresh
// subscription and becomes EventResync.
func (b *subscriber) run(ctx context.Context) {
	s := b.s
	ps := s.rdb.Subscribe(ctx, s.channel)
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() }) // unblocks a Receive
	defer func() {
		if stop() {
			_ = ps.Close()
		}
	}()

	pinged := false
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		msg, err := ps.ReceiveTimeout(ctx, busPingAfter)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if isReadTimeout(err) {
				if pinged {
					s.observe(OpReceive, ResultTimeout)
					s.log.Warn("redis bus: ping unanswered, reconnecting")
					return // close this PubSub and start over
				}
				pinged = true
				pctx, cancel := s.opContext(ctx)
				_ = ps.Ping(pctx) // a failure closes the connection; Receive redials
				cancel()
				continue
			}
			s.observe(OpReceive, resultOf(err))
			pinged = false
			backoff = min(max(2*backoff, busRetryMin), busRetryMax)
			if !sleep(ctx, backoff) {
				return
			}
			continue
		}
		pinged, backoff = false, 0
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				s.log.Debug("redis bus subscribed")
				b.handle(Event{Kind: EventResync, At: s.now()})
			}
		case *redis.Message:
			e, err := decodeEvent([]byte(m.Payload))
			if err != nil {
				s.observe(OpReceive, ResultInvalid)
				s.log.Debug("redis bus: malformed event dropped")
				continue
			}
			s.observe(OpReceive, ResultOK)
			if e.Origin != s.id {
				b.handle(e)
			}
		}
	}
}

func isReadTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sleep waits d unless ctx ends first, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
