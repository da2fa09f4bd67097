package shared

import (
	"context"
	"encoding/hex"
	"time"
)

// FirstUse records that the one-time value named by key (a digest: never
// the value itself) was used, for ttl, and reports whether this was its
// first use on any replica. A DPoP proof is accepted once: SET NX makes the
// check and the record one step, so two replicas given the same proof at
// once cannot both accept it.
func (s *Store) FirstUse(ctx context.Context, key [32]byte, ttl time.Duration) (bool, error) {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	first, err := s.rdb.SetNX(ctx, s.pUsed+hex.EncodeToString(key[:]), "1", time.Duration(millis(ttl))*time.Millisecond).Result()
	if err != nil {
		return false, s.fail(OpFirstUse, err)
	}
	if first {
		s.observe(OpFirstUse, ResultOK)
	} else {
		s.observe(OpFirstUse, ResultConflict)
	}
	return first, nil
}
