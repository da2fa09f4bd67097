package shared

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxRevocations is how many revocations of subjects the set holds before
// Revoke drops those its caller says can no longer match; a revocation
// that may still match is never dropped, whatever the count.
var maxRevocations = 100_000 // a variable for the tests

// Revoke records that the subject's tokens issued before at are revoked.
// A later revocation of the same subject replaces an earlier one, never the
// other way round. Revocations are kept for as long as they may match a
// credential the service accepts: once the set holds more than
// maxRevocations, those made more than keep ago are dropped (keep 0:
// none is). The set itself never expires.
func (s *Store) Revoke(ctx context.Context, subject string, at time.Time, keep time.Duration) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	var card *redis.IntCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, s.revokeKey, redis.Z{Score: float64(at.UnixMilli()), Member: subject})
		// A set written with an expiry (by an earlier version) keeps none.
		p.Persist(ctx, s.revokeKey)
		card = p.ZCard(ctx, s.revokeKey)
		return nil
	})
	if err == nil && keep > 0 && card.Val() > int64(maxRevocations) {
		horizon := s.now().Add(-keep).UnixMilli()
		err = s.rdb.ZRemRangeByScore(ctx, s.revokeKey, "-inf", "("+strconv.FormatInt(horizon, 10)).Err()
	}
	if err != nil {
		return s.fail(OpRevoke, err)
	}
	s.observe(OpRevoke, ResultOK)
	return nil
}

// Revocations returns every revocation held, subject to the time before
// which its tokens are revoked (millisecond precision). Callers load it at
// start and on every "resync" event, and apply "revoke" events in between.
func (s *Store) Revocations(ctx context.Context) (map[string]time.Time, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	zs, err := s.rdb.ZRangeWithScores(ctx, s.revokeKey, 0, -1).Result()
	if err != nil {
		return nil, s.fail(OpRevocations, err)
	}
	out := make(map[string]time.Time, len(zs))
	for _, z := range zs {
		if subject, ok := z.Member.(string); ok {
			out[subject] = time.UnixMilli(int64(z.Score))
		}
	}
	s.observe(OpRevocations, ResultOK)
	return out, nil
}

// maxKeyRevocationTTL bounds how long a key revocation is kept, whatever
// the caller asks: a year.
const maxKeyRevocationTTL = 366 * 24 * time.Hour

// APIKey names one API key: the configured issuer and the key's id. An id
// never holds a '/' (see package apikey), so "issuer/id" is unambiguous:
// that is the member in Redis and the ID of an EventRevokeAPIKey.
type APIKey struct{ Issuer, ID string }

func (k APIKey) String() string { return k.Issuer + "/" + k.ID }

// ParseAPIKey reads "issuer/id": both non-empty, split at the last '/'.
func ParseAPIKey(s string) (APIKey, bool) {
	i := strings.LastIndexByte(s, '/')
	if i <= 0 || i == len(s)-1 {
		return APIKey{}, false
	}
	return APIKey{Issuer: s[:i], ID: s[i+1:]}, true
}

// RevokeAPIKey records that key is revoked until until (at most a year
// ahead). A later end replaces an earlier one, never the other way round;
// ended revocations are pruned. The revocations live in one sorted set
// scored by their end, like the revocations of subjects.
func (s *Store) RevokeAPIKey(ctx context.Context, key APIKey, until time.Time) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	now := s.now()
	until = minTime(until, now.Add(maxKeyRevocationTTL))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, s.revokeKeysKey, redis.Z{Score: float64(until.UnixMilli()), Member: key.String()})
		p.ZRemRangeByScore(ctx, s.revokeKeysKey, "-inf", strconv.FormatInt(now.UnixMilli(), 10))
		p.PExpire(ctx, s.revokeKeysKey, maxKeyRevocationTTL)
		return nil
	})
	if err != nil {
		return s.fail(OpRevokeAPIKey, err)
	}
	s.observe(OpRevokeAPIKey, ResultOK)
	return nil
}

// APIKeyRevocations returns the revoked keys that have not ended, each with
// its end (millisecond precision): all of them, since a revocation left
// out would let its key in. Callers load it at start and on every "resync"
// event, and apply "revoke_api_key" events in between.
func (s *Store) APIKeyRevocations(ctx context.Context) (map[APIKey]time.Time, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key:     s.revokeKeysKey,
		Start:   "+inf",
		Stop:    "(" + strconv.FormatInt(s.now().UnixMilli(), 10),
		ByScore: true,
		Rev:     true,
	}).Result()
	if err != nil {
		return nil, s.fail(OpAPIKeyRevocations, err)
	}
	out := make(map[APIKey]time.Time, len(zs))
	for _, z := range zs {
		m, _ := z.Member.(string)
		if k, ok := ParseAPIKey(m); ok {
			out[k] = time.UnixMilli(int64(z.Score))
		}
	}
	s.observe(OpAPIKeyRevocations, ResultOK)
	return out, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
