package httpauthz

import (
	"crypto/rand"
	"net/http"
	"sync"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/check"
)

// AnswerHeader is the response header of a refused forward-auth check that
// names the full answer: the proxy fetches it at AnswerPath + the id and
// returns it to the client as it is (status, headers and body).
const AnswerHeader = "X-Extauthz-Answer"

// AnswerPath is where the proxy fetches an answer; the id follows.
const AnswerPath = "/_extauthz/answer/"

// Bounds of the answer store.
const (
	// DefaultAnswerTTL is how long an answer waits for its fetch: the proxy
	// asks at once, so seconds are plenty.
	DefaultAnswerTTL = 10 * time.Second
	// DefaultMaxAnswers bounds the answers waiting; the oldest goes first.
	// A fetch that finds nothing gets a 503 to retry, never an allow.
	DefaultMaxAnswers = 4096
)

// answer is a refused check's full answer, as Envoy would give it.
type answer struct {
	status  int
	headers []check.Header
	body    []byte
}

// answerStore holds answers until fetched, each at most once: bounded,
// expiring, keyed by an unguessable id handed only to the proxy.
type answerStore struct {
	mu  sync.Mutex // makes fetch-and-remove one step
	c   *cache.Cache[*answer]
	ttl time.Duration
	now func() time.Time
}

func newAnswerStore(size int, ttl time.Duration, now func() time.Time) *answerStore {
	c, err := cache.New[*answer](size, now)
	if err != nil {
		// Only a non-positive size fails, and the caller never passes one.
		panic(err)
	}
	return &answerStore{c: c, ttl: ttl, now: now}
}

// put stores a and returns its id: 128 random bits, base32.
func (s *answerStore) put(a *answer) string {
	id := rand.Text()
	s.c.Add(cache.NewKey(id), a, s.now().Add(s.ttl))
	return id
}

// take returns the answer of id and forgets it.
func (s *answerStore) take(id string) (*answer, bool) {
	k := cache.NewKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.c.Get(k)
	if ok {
		s.c.Remove(k)
	}
	return a, ok
}

// serveAnswer writes the answer named by the path, or a 503 asking to retry
// when it is gone (expired, evicted or fetched already): never a 2xx that
// a proxy could take for an allow.
func (h *handler) serveAnswer(w http.ResponseWriter, id string) {
	hdr := w.Header()
	hdr["Cache-Control"] = []string{"no-store"}
	a, ok := h.answers.take(id)
	if !ok {
		hdr["Content-Type"] = []string{"application/json"}
		hdr["Retry-After"] = []string{"1"}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"temporarily_unavailable","error_description":"the authorization answer is gone: retry the request","status":503}`))
		return
	}
	for _, rh := range a.headers {
		hdr[h.names.canonical(rh.Name)] = []string{rh.Value}
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}
