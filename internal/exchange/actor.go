package exchange

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/bounded"
)

// maxActorTokenSize bounds the actor token file.
const maxActorTokenSize = 64 << 10

// actorToken is one version of the actor token file.
type actorToken struct {
	value string
	// key names the actor in cache keys: its iss and sub when the token is
	// a JWT (so rotating the same identity's token keeps cached exchanges),
	// else a digest of the token.
	key string
}

// actorSource serves the actor token from a file that may be replaced at
// any time (a projected service-account token is rotated by swapping a
// symlink). It looks at the file at most once per actorCheckInterval, from
// whichever request comes first, and keeps the last good token when the
// file cannot be read.
type actorSource struct {
	path string
	now  func() time.Time
	log  *slog.Logger

	current   atomic.Pointer[actorToken]
	nextCheck atomic.Int64 // unix nanoseconds

	mu   sync.Mutex // one reload at a time; guards info
	info os.FileInfo
}

func newActorSource(path string, now func() time.Time, log *slog.Logger) (*actorSource, error) {
	a := &actorSource{path: path, now: now, log: log}
	if err := a.reload(); err != nil {
		return nil, fmt.Errorf("exchange: actor token: %w", err)
	}
	return a, nil
}

// get returns the current actor token, first reloading it if the file
// changed and it was not looked at for actorCheckInterval.
func (a *actorSource) get() *actorToken {
	now := a.now().UnixNano()
	if next := a.nextCheck.Load(); now >= next && a.nextCheck.CompareAndSwap(next, now+int64(actorCheckInterval)) {
		if err := a.reload(); err != nil {
			a.log.Warn("actor token file unreadable, keeping the previous token", slog.String("file", a.path), slog.String("error", err.Error()))
		}
	}
	return a.current.Load()
}

// reload reads the file if its identity, size or modification time changed.
func (a *actorSource) reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	fi, err := os.Stat(a.path)
	if err != nil {
		return err
	}
	if a.info != nil && os.SameFile(a.info, fi) && fi.Size() == a.info.Size() && fi.ModTime().Equal(a.info.ModTime()) {
		return nil
	}
	b, err := bounded.ReadFile(a.path, maxActorTokenSize)
	if err != nil {
		return err
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return errors.New("file is empty")
	}
	a.current.Store(&actorToken{value: v, key: actorKey(v)})
	a.info = fi
	return nil
}

func actorKey(token string) string {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err == nil && c.Subject != "" {
		return "jwt\x00" + c.Issuer + "\x00" + c.Subject
	}
	sum := sha256.Sum256([]byte(token))
	return "sha256\x00" + hex.EncodeToString(sum[:])
}
