package shared

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// bindScript binds KEYS[1] to ARGV[1] for ARGV[2] milliseconds unless
// someone else holds it, extends the owner's binding, and returns the
// owner. Doing it in one script makes the first binding win atomically
// across replicas and costs one round trip.
var bindScript = redis.NewScript(`
local owner = redis.call('GET', KEYS[1])
if not owner then
	redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
	return ARGV[1]
end
if owner == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return owner
`)

// endBindingScript deletes KEYS[1] if ARGV[1] owns it and returns 1 when
// the binding is gone (ended now, or there was none), 0 when someone else
// owns it.
var endBindingScript = redis.NewScript(`
local owner = redis.call('GET', KEYS[1])
if not owner then
	return 1
end
if owner == ARGV[1] then
	redis.call('DEL', KEYS[1])
	return 1
end
return 0
`)

// Bind binds the session key to subject unless another subject holds it,
// and reports the owner: owned is true when subject owns the session, and
// its binding then lasts idle from now. The first binding wins across every
// replica. key is the caller's session key (session.Key(route, id)); idle
// must be positive.
//
// err != nil means Redis did not answer (it wraps ErrUnavailable): the
// caller applies FailOpen. An empty subject never owns anything.
//
// A caller that answers from its local binding does not come here; it
// should still call Bind again at least every idle/2 while the session is
// in use, so the shared binding does not lapse while one replica serves
// the session from memory.
func (s *Store) Bind(ctx context.Context, key, subject string, idle time.Duration) (owner string, owned bool, err error) {
	if subject == "" {
		return "", false, nil
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	owner, err = bindScript.Run(ctx, s.rdb, []string{s.pBind + key}, subject, millis(idle)).Text()
	if err != nil {
		return "", false, s.fail(OpBind, err)
	}
	if owner != subject {
		s.observe(OpBind, ResultConflict)
		return owner, false, nil
	}
	s.observe(OpBind, ResultOK)
	return owner, true, nil
}

// EndBinding removes the binding of key if subject owns it, atomically, and
// reports whether subject may end the session: true when it owned it or
// nobody did, false when another subject owns it.
func (s *Store) EndBinding(ctx context.Context, key, subject string) (bool, error) {
	if subject == "" {
		return false, nil
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	n, err := endBindingScript.Run(ctx, s.rdb, []string{s.pBind + key}, subject).Int()
	if err != nil {
		return false, s.fail(OpEndBinding, err)
	}
	if n != 1 {
		s.observe(OpEndBinding, ResultConflict)
		return false, nil
	}
	s.observe(OpEndBinding, ResultOK)
	return true, nil
}

// isMiss reports whether err is Redis's "no such key".
func isMiss(err error) bool { return errors.Is(err, redis.Nil) }
