package shared

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

// goldenEvents are the bus's wire format: replicas of different versions
// read each other's events during a rolling update, so it must not change
// by accident.
var goldenEvents = []Event{
	{Kind: EventSession, ID: "3f6c1c9e-session", Origin: "replica-a"},
	{Kind: EventRevoke, ID: "alice@example.com", At: time.UnixMilli(1767225600123), Origin: "replica-b"},
	{Kind: EventConfig, ID: "generation-42", Origin: "replica-b"},
	{Kind: EventConfig},
	{Kind: EventRevokeAPIKey, ID: "keys/billing-1", At: time.UnixMilli(1775001600000), Origin: "replica-a"},
}

func TestEventWireFormat(t *testing.T) {
	var b bytes.Buffer
	for _, e := range goldenEvents {
		line, err := encodeEvent(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	const path = "testdata/events.golden"
	golden.Check(t, path, b.Bytes()) // the wire format
	if t.Failed() {
		return
	}
	want := b.Bytes()
	for i, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		got, err := decodeEvent([]byte(line))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if w := goldenEvents[i]; got.Kind != w.Kind || got.ID != w.ID || got.Origin != w.Origin || !got.At.Equal(w.At) {
			t.Errorf("line %d decodes to %+v, want %+v", i+1, got, w)
		}
	}
}

func TestDecodeEvent(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Event
		wantErr bool
	}{
		{"session", `{"kind":"session","id":"s1","origin":"r"}`, Event{Kind: EventSession, ID: "s1", Origin: "r"}, false},
		{"unknown fields ignored", `{"kind":"session","id":"u","v":2,"extra":[1]}`, Event{Kind: EventSession, ID: "u"}, false},
		{"no subject kind: revocation is the only per-user event", `{"kind":"subject","id":"u"}`, Event{}, true},
		{"config without id", `{"kind":"config"}`, Event{Kind: EventConfig}, false},
		{"revoke with time", `{"kind":"revoke","id":"u","at":1000}`, Event{Kind: EventRevoke, ID: "u", At: time.UnixMilli(1000)}, false},
		{"API key revocation", `{"kind":"revoke_api_key","id":"keys/k1","at":1000}`, Event{Kind: EventRevokeAPIKey, ID: "keys/k1", At: time.UnixMilli(1000)}, false},
		{"API key revocation without an end", `{"kind":"revoke_api_key","id":"keys/k1"}`, Event{}, true},
		{"API key revocation without an issuer", `{"kind":"revoke_api_key","id":"/k1","at":1000}`, Event{}, true},
		{"API key revocation without an id", `{"kind":"revoke_api_key","id":"keys/","at":1000}`, Event{}, true},
		{"API key revocation without a slash", `{"kind":"revoke_api_key","id":"k1","at":1000}`, Event{}, true},
		{"resync is never on the wire", `{"kind":"resync"}`, Event{}, true},
		{"unknown kind", `{"kind":"flush-all","id":"x"}`, Event{}, true},
		{"session without id", `{"kind":"session"}`, Event{}, true},
		{"not json", `session s1`, Event{}, true},
		{"wrong type", `{"kind":"session","id":7}`, Event{}, true},
		{"too large", `{"kind":"config","id":"` + strings.Repeat("x", maxEventBytes) + `"}`, Event{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeEvent([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodeEvent error = %v, wantErr %v", err, tt.wantErr)
			}
			if got.Kind != tt.want.Kind || got.ID != tt.want.ID || got.Origin != tt.want.Origin || !got.At.Equal(tt.want.At) {
				t.Fatalf("decodeEvent = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBusAcrossStores(t *testing.T) {
	r := sharedRedis(t)
	var obsB observed
	a := newStore(t, r.Addr, func(_ *Config, o *Options) { o.ReplicaID = "replica-a" })
	b := newStore(t, r.Addr, func(_ *Config, o *Options) {
		o.ReplicaID = "replica-b"
		o.Observe = obsB.observe
	})
	evA, evB := subscribe(t, a), subscribe(t, b)
	for name, ev := range map[string]*events{"a": evA, "b": evB} {
		if got := ev.next(t, 5*time.Second); got.Kind != EventResync {
			t.Fatalf("%s: first event %+v, want resync", name, got)
		}
	}

	// A malformed message from elsewhere is dropped and counted.
	raw := rawClient(t, r.Addr)
	if err := raw.Publish(t.Context(), b.channel, "not an event").Err(); err != nil {
		t.Fatal(err)
	}

	at := time.UnixMilli(time.Now().UnixMilli())
	sent := []Event{
		{Kind: EventSession, ID: "sess-1"},
		{Kind: EventRevoke, ID: "alice", At: at},
	}
	for _, e := range sent {
		if err := a.Publish(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range sent {
		got := evB.next(t, time.Second)
		if got.Kind != want.Kind || got.ID != want.ID || !got.At.Equal(want.At) || got.Origin != "replica-a" {
			t.Fatalf("b received %+v, want %+v from replica-a", got, want)
		}
	}
	if n := obsB.count(OpReceive, ResultInvalid); n != 1 {
		t.Errorf("malformed messages counted %d, want 1", n)
	}

	// b's own event reaches a, and not b itself. a heard nothing of its
	// own: the first thing it receives is b's.
	if err := b.Publish(t.Context(), Event{Kind: EventConfig, ID: "gen-2"}); err != nil {
		t.Fatal(err)
	}
	if got := evA.next(t, time.Second); got.Kind != EventConfig || got.Origin != "replica-b" {
		t.Fatalf("a received %+v, want b's config event", got)
	}
	evA.none(t)
	// Round trip once more through b, so that had b received its own
	// event it would be waiting by now.
	if err := a.Publish(t.Context(), Event{Kind: EventSession, ID: "bob-session"}); err != nil {
		t.Fatal(err)
	}
	if got := evB.next(t, time.Second); got.Kind != EventSession || got.ID != "bob-session" {
		t.Fatalf("b received %+v, want a's session event bob-session (its own was delivered to it?)", got)
	}
	evB.none(t)

	if err := a.Publish(t.Context(), Event{Kind: "bogus"}); err == nil {
		t.Fatal("Publish accepted an unknown kind")
	}
}
