package envoyauthz

import (
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
)

// A response's dynamic metadata is a dozen string values. Built one by one
// (structpb.NewStringValue) each costs two allocations, a cache miss's
// largest share; here they come from two arrays per response, and the
// values that name configuration (route, issuer, outcome, protocol,
// method) are made once and shared, read-only, like cachedTrue.

// grantStrings is how many string values grantFields makes at most, its
// rule claims aside.
const grantStrings = 5

// values hands out string values from an array sized for one response.
type values struct {
	strs []stringValue
}

// stringValue is a string value with its kind, allocated together.
type stringValue struct {
	v structpb.Value
	k structpb.Value_StringValue
}

// newValues returns room for n string values; more are allocated one by
// one.
func newValues(n int) *values {
	return &values{strs: make([]stringValue, 0, n)}
}

// str is a string value holding s.
func (a *values) str(s string) *structpb.Value {
	if len(a.strs) == cap(a.strs) {
		return structpb.NewStringValue(s)
	}
	a.strs = append(a.strs, stringValue{k: structpb.Value_StringValue{StringValue: s}})
	sv := &a.strs[len(a.strs)-1]
	sv.v.Kind = &sv.k
	return &sv.v
}

// numberValue is a number value in one allocation.
func numberValue(f float64) *structpb.Value {
	a := new(struct {
		v structpb.Value
		k structpb.Value_NumberValue
	})
	a.k.NumberValue = f
	a.v.Kind = &a.k
	return &a.v
}

// structValue is a struct value holding fields, in one allocation.
func structValue(fields map[string]*structpb.Value) *structpb.Value {
	a := new(struct {
		v structpb.Value
		k structpb.Value_StructValue
		s structpb.Struct
	})
	a.s.Fields = fields
	a.k.StructValue = &a.s
	a.v.Kind = &a.k
	return &a.v
}

// maxShared bounds the shared values. Only names from the configuration
// and the protocols' method names are shared, a few dozen; the bound keeps
// a configuration reloaded many times with new names from growing it
// without end (beyond it, values are made per response).
const maxShared = 1024

// sharedValues is copied on write: reads take no lock and, looked up by a
// string, allocate nothing.
var sharedValues struct {
	sync.Mutex
	m atomic.Pointer[map[string]*structpb.Value]
}

// shared is a read-only string value for s, made once. s must come from a
// small set (see maxShared).
func shared(s string) *structpb.Value {
	if m := sharedValues.m.Load(); m != nil {
		if v, ok := (*m)[s]; ok {
			return v
		}
	}
	sharedValues.Lock()
	defer sharedValues.Unlock()
	old := sharedValues.m.Load()
	if old != nil {
		if v, ok := (*old)[s]; ok {
			return v
		}
	}
	v := structpb.NewStringValue(s)
	if old == nil || len(*old) < maxShared {
		next := make(map[string]*structpb.Value, len(mapOrNil(old))+1)
		for k, val := range mapOrNil(old) {
			next[k] = val
		}
		next[s] = v
		sharedValues.m.Store(&next)
	}
	return v
}

func mapOrNil(m *map[string]*structpb.Value) map[string]*structpb.Value {
	if m == nil {
		return nil
	}
	return *m
}

// outcomeValue is the shared value naming outcome o.
func outcomeValue(o check.Outcome) *structpb.Value { return shared(o.String()) }
