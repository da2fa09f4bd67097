package shared

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RevocationTTL is how long a revocation is remembered: longer than any
// token the service accepts lives, so by then every token it revoked has
// expired by itself.
const RevocationTTL = 24 * time.Hour

// maxRevocations bounds what Revocations reads, newest first.
const maxRevocations = 100_000

// Revoke records that the subject's tokens issued before at are revoked.
// A later revocation of the same subject replaces an earlier one, never the
// other way round. Revocations older than RevocationTTL are pruned.
func (s *Store) Revoke(ctx context.Context, subject string, at time.Time) error {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	horizon := s.now().Add(-RevocationTTL).UnixMilli()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, s.revokeKey, redis.Z{Score: float64(at.UnixMilli()), Member: subject})
		p.ZRemRangeByScore(ctx, s.revokeKey, "-inf", "("+strconv.FormatInt(horizon, 10))
		p.PExpire(ctx, s.revokeKey, RevocationTTL)
		return nil
	})
	if err != nil {
		return s.fail(OpRevoke, err)
	}
	s.observe(OpRevoke, ResultOK)
	return nil
}

// Revocations returns the live revocations, subject to the time before
// which its tokens are revoked (millisecond precision). Callers load it at
// start and on every "resync" event, and apply "revoke" events in between.
func (s *Store) Revocations(ctx context.Context) (map[string]time.Time, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	horizon := s.now().Add(-RevocationTTL).UnixMilli()
	zs, err := s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
		Key:     s.revokeKey,
		Start:   "+inf",
		Stop:    "(" + strconv.FormatInt(horizon, 10),
		ByScore: true,
		Rev:     true,
		Count:   maxRevocations,
	}).Result()
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
