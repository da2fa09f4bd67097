package shared

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A binding's value is its owner, followed for a task bound with the tool
// it was created for by a NUL and the tool (a subject never holds a NUL:
// grants refuse control bytes), so that the tool lives and ends with the
// binding on every replica.

// bindScript binds KEYS[1] to ARGV[1] for ARGV[2] milliseconds unless
// someone else holds it, extends the owner's binding, records the tool
// ARGV[3] (when not empty) on a binding of the owner that has none, and
// returns the binding's value and whether the binding is new. Doing it in
// one script makes the first binding win atomically across replicas and
// costs one round trip.
var bindScript = redis.NewScript(`
local owner = redis.call('GET', KEYS[1])
if not owner then
	local v = ARGV[1]
	if ARGV[3] ~= '' then
		v = v .. '\0' .. ARGV[3]
	end
	redis.call('SET', KEYS[1], v, 'PX', ARGV[2])
	return {v, 1}
end
local cut = string.find(owner, '\0', 1, true)
local subject = owner
if cut then
	subject = string.sub(owner, 1, cut - 1)
end
if subject == ARGV[1] then
	if not cut and ARGV[3] ~= '' then
		owner = owner .. '\0' .. ARGV[3]
		redis.call('SET', KEYS[1], owner, 'PX', ARGV[2])
	else
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
	end
end
return {owner, 0}
`)

// indexScript records binding ARGV[1] (a key) in its owner's index KEYS[1],
// a sorted set scored by when each binding expires (ARGV[2], unix ms),
// prunes bindings that expired before ARGV[3] (now), and pops and returns
// the owner's least recently used bindings beyond ARGV[4] (0: no bound).
// The caller deletes what it returns, if the subject still owns it.
var indexScript = redis.NewScript(`
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local ttl = tonumber(ARGV[2]) - tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < ttl then
	redis.call('PEXPIRE', KEYS[1], ttl)
end
local bound = tonumber(ARGV[4])
local out = {}
if bound > 0 then
	local over = redis.call('ZCARD', KEYS[1]) - bound
	if over > 0 then
		local popped = redis.call('ZPOPMIN', KEYS[1], over)
		for i = 1, #popped, 2 do
			if popped[i] ~= ARGV[1] then
				table.insert(out, popped[i])
			end
		end
	end
end
return out
`)

// dropOwnScript deletes binding KEYS[1] if ARGV[1] owns it (with or
// without a tool): a user's bound may push out only the user's own
// bindings.
var dropOwnScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] or (v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. '\0') then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// Bind binds the session key to subject unless another subject holds it,
// and reports the owner: owned is true when subject owns the session, and
// its binding then lasts idle from now. The first binding wins across every
// replica. key is the caller's binding key (session.Key(space, id)); idle
// must be positive. perSubject > 0 bounds the bindings one subject holds
// across every replica: a new binding beyond it pushes out that subject's
// own least recently used one, never anyone else's (0: no bound, no
// index). Nothing here ends a binding early otherwise: it lives idle after
// its last Bind. A bounded Bind the subject wins costs a second round trip
// (the subject's index lives in another slot of a Cluster).
//
// err != nil means Redis did not answer (it wraps ErrUnavailable): the
// caller applies FailOpen. An empty subject never owns anything. A Redis
// that evicts keys under memory pressure would drop bindings: run it with
// maxmemory-policy noeviction, so a full Redis refuses (an error here)
// instead.
//
// A caller that answers from its local binding does not come here; it
// should still call Bind again at least every idle/2 while the session is
// in use, so the shared binding does not lapse while one replica serves
// the session from memory.
func (s *Store) Bind(ctx context.Context, key, subject string, idle time.Duration, perSubject int) (owner string, owned bool, err error) {
	b, owned, err := s.BindTask(ctx, key, subject, "", idle, perSubject)
	return b.Subject, owned, err
}

// Binding is the owner of a binding and, for a task, the tool it was
// created for ("" when unknown).
type Binding struct {
	Subject, Tool string
}

// parseBinding reads a binding's value: the owner, then a NUL and the tool
// when the binding has one.
func parseBinding(v string) Binding {
	subject, tool, _ := strings.Cut(v, "\x00")
	return Binding{Subject: subject, Tool: tool}
}

// BindTask is Bind for a task, which also records tool (when not empty) as
// the tool the task was created for, if its binding has none yet. It
// returns the binding with the tool recorded: the one another replica
// learnt when the task was created comes back with any later Bind.
func (s *Store) BindTask(ctx context.Context, key, subject, tool string, idle time.Duration, perSubject int) (b Binding, owned bool, err error) {
	if subject == "" {
		return Binding{}, false, nil
	}
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	res, err := bindScript.Run(ctx, s.rdb, []string{s.pBind + key}, subject, millis(idle), tool).Slice()
	if err != nil {
		return Binding{}, false, s.fail(OpBind, err)
	}
	if len(res) != 2 {
		s.observe(OpBind, ResultInvalid)
		return Binding{}, false, s.fail(OpBind, errors.New("unexpected answer to the bind script"))
	}
	v, _ := res[0].(string)
	b = parseBinding(v)
	if b.Subject != subject {
		s.observe(OpBind, ResultConflict)
		return b, false, nil
	}
	if perSubject > 0 {
		if err := s.index(ctx, key, subject, idle, perSubject); err != nil {
			return Binding{}, false, err
		}
	}
	s.observe(OpBind, ResultOK)
	return b, true, nil
}

// index keeps subject's binding index current and enforces its bound.
func (s *Store) index(ctx context.Context, key, subject string, idle time.Duration, perSubject int) error {
	now := s.now().UnixMilli()
	popped, err := indexScript.Run(ctx, s.rdb, []string{s.pBindSubject + subject}, key,
		strconv.FormatInt(now+millis(idle), 10), strconv.FormatInt(now, 10), perSubject).StringSlice()
	if err != nil {
		return s.fail(OpBind, err)
	}
	if len(popped) == 0 {
		return nil
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range popped {
			dropOwnScript.Eval(ctx, p, []string{s.pBind + k}, subject)
		}
		return nil
	})
	if err != nil {
		return s.fail(OpBind, err)
	}
	return nil
}

// isMiss reports whether err is Redis's "no such key".
func isMiss(err error) bool { return errors.Is(err, redis.Nil) }

// BindingOwner returns the owner of the binding key without binding it
// (found false when nobody holds it): a route that binds sessions only
// when it sees them created asks this before accepting an id it does not
// hold locally.
func (s *Store) BindingOwner(ctx context.Context, key string) (owner string, found bool, err error) {
	b, found, err := s.Lookup(ctx, key)
	return b.Subject, found, err
}

// Lookup returns the binding key without binding it (found false when
// nobody holds it): its owner and, for a task, its tool.
func (s *Store) Lookup(ctx context.Context, key string) (b Binding, found bool, err error) {
	v, found, err := s.get(ctx, OpBind, s.pBind+key)
	if !found {
		return Binding{}, false, err
	}
	return parseBinding(string(v)), true, nil
}
