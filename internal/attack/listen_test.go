package attack

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// listenRecorder is the HTTP client of a go-sdk client session: it sends
// the token on every request and records, for each resource a
// subscriptions/listen subscribes to, the status the stream was answered
// with (the SDK opens the stream in the background and reports nothing).
type listenRecorder struct {
	token string
	mu    sync.Mutex
	seen  map[string]int
}

func (l *listenRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+l.token)
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Notifications struct {
				ResourceSubscriptions []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Method == "subscriptions/listen" {
		status := -1
		if err == nil {
			status = res.StatusCode
		}
		l.mu.Lock()
		for _, uri := range msg.Params.Notifications.ResourceSubscriptions {
			l.seen[uri] = status
		}
		l.mu.Unlock()
	}
	return res, err
}

// status is the answer to the stream subscribing to uri, once there is one
// (within five seconds; 0 if none came).
func (l *listenRecorder) status(uri string) int {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		s, ok := l.seen[uri]
		l.mu.Unlock()
		if ok {
			return s
		}
	}
	return 0
}

// subscribedTo reports whether the MCP server took a subscription to uri
// (within five seconds, when want is true: it is taken as the stream opens).
func (s *suite) subscribedTo(uri string, want bool) bool {
	deadline := time.Now()
	if want {
		deadline = deadline.Add(5 * time.Second)
	}
	for {
		s.mu.Lock()
		got := slices.Contains(s.subscribed, uri)
		s.mu.Unlock()
		if got || !time.Now().Before(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSDKSubscribesByListening: the go-sdk's client, speaking 2026-07-28,
// subscribes to a resource with subscriptions/listen
// (ClientSession.Subscribe sends resources/subscribe only to older
// servers), and its server takes the subscription from the stream's
// resourceSubscriptions. A rule on resources/subscribe must hold for it:
// asked directly, the server takes a subscription the rule refuses;
// through the service, the stream subscribing to it is refused and the
// server never sees it, while an allowed one goes through.
func TestSDKSubscribesByListening(t *testing.T) {
	s := start(t, `routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs]
    audiences: [`+audience+`]
    rules:
      - {methods: ["resources/subscribe"], names: ["file:///etc/*"], action: deny}
`, options{})
	const denied, allowed = "file:///etc/shadow", "file:///tmp/notes"
	subscribe := func(base string, uris ...string) *listenRecorder {
		t.Helper()
		rec := &listenRecorder{token: token(t, issuerHS, "mallory"), seen: map[string]int{}}
		ctx := t.Context()
		cs, err := testpeers.NewMCPClient(ctx, base+"/mcp", &http.Client{Transport: rec}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		for _, uri := range uris {
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("Subscribe(%s): %v", uri, err)
			}
		}
		return rec
	}

	direct := subscribe(s.upstream, denied)
	if got := direct.status(denied); got != http.StatusOK || !s.subscribedTo(denied, true) {
		t.Fatalf("asked directly, the server did not take the subscription (status %d): the test shows nothing", got)
	}
	s.mu.Lock()
	s.subscribed = nil
	s.mu.Unlock()

	via := subscribe(s.proxy.URL, denied, allowed)
	if got := via.status(denied); got != http.StatusForbidden {
		t.Errorf("the stream subscribing to %s was answered %d, want 403", denied, got)
	}
	if got := via.status(allowed); got != http.StatusOK || !s.subscribedTo(allowed, true) {
		t.Errorf("the stream subscribing to %s was answered %d, and the server took it: %v", allowed, got, s.subscribedTo(allowed, false))
	}
	if s.subscribedTo(denied, false) {
		t.Errorf("the server took a subscription to %s through the service", denied)
	}
}
