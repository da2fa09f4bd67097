package shared

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Owner is whom a stored token or elicitation belongs to: the user, the
// MCP session and, for an exchanged token, the session its subject token
// names ("" when none). The Store indexes values by each, so DropSubject
// and DropSession (of either session) find them on any replica, and by
// the user and MCP session together, for DropOwnSession.
type Owner struct {
	Subject, Session, TokenSession string
}

// Bounds of one DropSession or DropSubject: batches of dropBatch keys, at
// most dropRounds of them.
const (
	dropBatch  = 1000
	dropRounds = 100
)

// tagScript adds ARGV[1] (a key) to the tag index KEYS[1], a sorted set
// scored by when each key expires (ARGV[2], unix ms). It prunes keys that
// expired before ARGV[3] (now, unix ms), so an index of a long-lived user
// stays as small as what is live, and keeps the index alive as long as its
// longest-lived key.
var tagScript = redis.NewScript(`
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
local ttl = tonumber(ARGV[2]) - tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < ttl then
	redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
`)

// put stores value under key for ttl and indexes it under o, in one round
// trip.
func (s *Store) put(ctx context.Context, op, key string, o Owner, value []byte, ttl time.Duration) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	now := s.now().UnixMilli()
	expires := strconv.FormatInt(now+millis(ttl), 10)
	nowArg := strconv.FormatInt(now, 10)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, key, value, time.Duration(millis(ttl))*time.Millisecond)
		if o.Session != "" {
			tagScript.Eval(ctx, p, []string{s.pSession + o.Session}, key, expires, nowArg)
		}
		if o.TokenSession != "" && o.TokenSession != o.Session {
			tagScript.Eval(ctx, p, []string{s.pSession + o.TokenSession}, key, expires, nowArg)
		}
		if o.Subject != "" {
			tagScript.Eval(ctx, p, []string{s.pSubject + o.Subject}, key, expires, nowArg)
			tagScript.Eval(ctx, p, []string{s.ownTag(o.Subject, o.Session)}, key, expires, nowArg)
		}
		return nil
	})
	if err != nil {
		return s.fail(op, err)
	}
	s.observe(op, ResultOK)
	return nil
}

// get returns the value under key.
func (s *Store) get(ctx context.Context, op, key string) ([]byte, bool, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	v, err := s.rdb.Get(ctx, key).Bytes()
	if isMiss(err) {
		s.observe(op, ResultMiss)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.fail(op, err)
	}
	return v, true, nil
}

// PutElicitation stores a pending elicitation (an opaque value, JSON by
// convention) under its id for ttl, indexed under o.
func (s *Store) PutElicitation(ctx context.Context, id string, o Owner, value []byte, ttl time.Duration) error {
	return s.put(ctx, OpPutElicitation, s.pElicit+id, o, value, ttl)
}

// GetElicitation returns the pending elicitation id, if there is one.
func (s *Store) GetElicitation(ctx context.Context, id string) ([]byte, bool, error) {
	v, ok, err := s.get(ctx, OpGetElicitation, s.pElicit+id)
	if ok {
		s.observe(OpGetElicitation, ResultOK)
	}
	return v, ok, err
}

// DeleteElicitation forgets the elicitation id (completed or replaced).
// Deleting one that is not there is not an error.
func (s *Store) DeleteElicitation(ctx context.Context, id string) error {
	return s.del(ctx, OpDeleteElicitation, s.pElicit+id)
}

// del deletes key, counted under op; a key that is not there is no error.
func (s *Store) del(ctx context.Context, op, key string) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	if err := s.rdb.Del(ctx, key).Err(); err != nil {
		return s.fail(op, err)
	}
	s.observe(op, ResultOK)
	return nil
}

// PutToken stores an exchanged token (or whatever the caller serialized
// around it) under key for ttl, sealed with the encryption key, indexed
// under o. key is the caller's cache key, already a digest (hex of
// SHA-256): it never contains a token.
func (s *Store) PutToken(ctx context.Context, key string, o Owner, token []byte, ttl time.Duration) error {
	if s.sealer == nil {
		return ErrNoEncryptionKey
	}
	k := s.pToken + key
	return s.put(ctx, OpPutToken, k, o, s.sealer.seal(token, k), ttl)
}

// DeleteToken forgets the token under key. Deleting one that is not there
// is not an error. The owners' indexes keep its name until it would have
// expired, as they do a dropped one's.
func (s *Store) DeleteToken(ctx context.Context, key string) error {
	return s.del(ctx, OpDeleteToken, s.pToken+key)
}

// GetToken returns the token stored under key, opened. A value this
// replica cannot open (sealed with a key it does not have, or tampered
// with) is a miss, counted as ResultInvalid.
func (s *Store) GetToken(ctx context.Context, key string) ([]byte, bool, error) {
	if s.sealer == nil {
		return nil, false, ErrNoEncryptionKey
	}
	k := s.pToken + key
	sealed, ok, err := s.get(ctx, OpGetToken, k)
	if !ok {
		return nil, false, err
	}
	token, err := s.sealer.open(sealed, k)
	if err != nil {
		s.observe(OpGetToken, ResultInvalid)
		s.log.Debug("shared token cannot be opened: sealed with an unknown key or damaged")
		return nil, false, nil
	}
	s.observe(OpGetToken, ResultOK)
	return token, true, nil
}

// DropSession deletes every token and elicitation of the session (an MCP
// session, or a token's: Owner.TokenSession), whichever replica stored them, and returns how many it deleted. Session
// bindings are not touched: they end only by idle expiry.
func (s *Store) DropSession(ctx context.Context, session string) (int, error) {
	return s.drop(ctx, OpDropSession, s.pSession+session)
}

// DropOwnSession deletes the tokens and elicitations the user holds in the
// MCP session (session "": those of no MCP session), whichever replica
// stored them, and returns how many: nobody else's, even in a session of
// the same id, for a caller who may name any session id.
func (s *Store) DropOwnSession(ctx context.Context, subject, session string) (int, error) {
	if subject == "" {
		return 0, nil
	}
	return s.drop(ctx, OpDropOwnSession, s.ownTag(subject, session))
}

// ownTag is the index of what subject holds in session. The subject is
// length-prefixed, so no two pairs share a tag.
func (s *Store) ownTag(subject, session string) string {
	return s.pOwn + strconv.Itoa(len(subject)) + ":" + subject + session
}

// DropSubject deletes every token and elicitation of the user, whichever
// replica stored them, and returns how many it deleted.
func (s *Store) DropSubject(ctx context.Context, subject string) (int, error) {
	return s.drop(ctx, OpDropSubject, s.pSubject+subject)
}

// drop deletes the keys indexed under tag, a batch at a time. It removes
// from the index only the keys it deleted, so a value stored meanwhile
// stays findable.
func (s *Store) drop(ctx context.Context, op, tag string) (int, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	total := 0
	for range dropRounds {
		keys, err := s.rdb.ZRange(ctx, tag, 0, dropBatch-1).Result()
		if err != nil {
			return total, s.fail(op, err)
		}
		if len(keys) == 0 {
			break
		}
		members := make([]any, len(keys))
		dels := make([]*redis.IntCmd, len(keys))
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				dels[i] = p.Del(ctx, k)
				members[i] = k
			}
			p.ZRem(ctx, tag, members...)
			return nil
		})
		if err != nil {
			return total, s.fail(op, err)
		}
		for _, d := range dels {
			total += int(d.Val())
		}
		if len(keys) < dropBatch {
			break
		}
	}
	s.observe(op, ResultOK)
	return total, nil
}
