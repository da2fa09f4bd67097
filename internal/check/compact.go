package check

import (
	"strings"
	"sync"
	"sync/atomic"
)

// A cached grant can live as long as its token, and a replica holds one per
// active token: hundreds of thousands. What a grant shares with every other
// grant of its route or issuer (scope lists, the headers it strips, the
// values of claims rules compare) is kept once, here, instead of once per
// grant; what rules need of the claims is kept as a short list, not a map.

// RuleClaims are the claims a route's rules look at, by name: a handful at
// most, so a list is smaller and as fast as a map.
type RuleClaims []RuleClaim

// RuleClaim is one claim's value as the token carried it (string, number,
// bool, or a list of those).
type RuleClaim struct {
	Name  string
	Value any
}

// Get returns the claim's value, nil when the token did not carry it.
func (c RuleClaims) Get(name string) any {
	for i := range c {
		if c[i].Name == name {
			return c[i].Value
		}
	}
	return nil
}

// maxInterned bounds each intern table: values come from tokens, and a
// flood of distinct ones must not grow memory without end. Past the bound
// values are simply not shared.
const maxInterned = 4096

// internTable shares equal values between grants.
type internTable[V any] struct {
	m sync.Map // string -> V
	n atomic.Int64
}

// get returns the shared value under key, storing v there first when there
// is room.
func (t *internTable[V]) get(key string, v V) V {
	if got, ok := t.m.Load(key); ok {
		return got.(V)
	}
	if t.n.Load() >= maxInterned {
		return v
	}
	got, loaded := t.m.LoadOrStore(strings.Clone(key), v)
	if !loaded {
		t.n.Add(1)
	}
	return got.(V)
}

var (
	internedLists  internTable[[]string]
	internedValues internTable[any]
)

// internList returns a shared copy of list: callers must never modify it.
func internList(list []string) []string {
	if len(list) == 0 {
		return nil
	}
	return internedLists.get(strings.Join(list, "\x00"), list)
}

// internClaim shares a scalar claim value ("eng", true, 3): the interface
// value then points to one copy for every grant. Lists stay as they are.
func internClaim(v any) any {
	switch s := v.(type) {
	case string:
		if len(s) <= 64 {
			return internedValues.get("s"+s, v)
		}
	case bool:
		return s // booleans never allocate
	}
	return v
}
