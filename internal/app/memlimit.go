package app

import (
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// The service keeps its verdict cache in the Go heap, and with GOGC at
// defaultGCPercent the heap may grow to several times what is live before
// a collection. In a container that is an OOM kill waiting to happen: the
// Go runtime's soft memory limit makes it collect harder only when the heap
// approaches the limit, so GOGC stays high (cheap) while far below it.

// memoryLimitTenths is the share, in tenths, of the container's memory
// limit given to the Go runtime: the rest is headroom for what the runtime does not count
// exactly (fragmentation the OS has not taken back, cgroup page cache).
const memoryLimitTenths = 9

// memoryLimit is how the runtime's soft memory limit was chosen.
type memoryLimit struct {
	Bytes  int64  // 0: no limit
	Source string // flag, GOMEMLIMIT, cgroup, off, none
}

// resolveMemoryLimit decides the memory limit. In order: the --memory-limit
// flag (a size such as 900MiB, "off", or "auto"); GOMEMLIMIT, which the
// runtime has already applied; 90% of the container's cgroup memory limit;
// none. cgroupLimit is memlimit.FromCgroup outside tests.
func resolveMemoryLimit(flagValue string, getenv func(string) string, cgroupLimit func() (uint64, error)) (memoryLimit, error) {
	switch v := strings.TrimSpace(flagValue); v {
	case "off":
		return memoryLimit{Source: "off"}, nil
	case "", "auto":
	default:
		n, err := parseSize(v)
		if err != nil {
			return memoryLimit{}, fmt.Errorf("--memory-limit: %w", err)
		}
		return memoryLimit{Bytes: n, Source: "flag"}, nil
	}
	if getenv("GOMEMLIMIT") != "" {
		return memoryLimit{Bytes: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}, nil
	}
	limit, err := cgroupLimit()
	if err != nil || limit == 0 || limit > math.MaxInt64 {
		// No limit (memlimit.ErrNoLimit), or not in a cgroup we can read
		// (not Linux, no cgroupfs): no limit, as before; the operator can
		// still pass --memory-limit.
		return memoryLimit{Source: "none"}, nil
	}
	return memoryLimit{Bytes: int64(limit / 10 * memoryLimitTenths), Source: "cgroup"}, nil
}

// apply installs the limit in the runtime. GOMEMLIMIT is already in force
// and "none"/"off" leave the runtime's default (no limit).
func (m memoryLimit) apply() {
	if m.Source == "flag" || m.Source == "cgroup" {
		debug.SetMemoryLimit(m.Bytes)
	}
}

// parseSize reads a byte count as GOMEMLIMIT spells it: digits with an
// optional unit B, KiB, MiB, GiB or TiB (Kubernetes' Ki, Mi, Gi, Ti too).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"B", 1},
	}
	num, mult := s, int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a size (a positive number of bytes, optionally with KiB, MiB, GiB or TiB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}
