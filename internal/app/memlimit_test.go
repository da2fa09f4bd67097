package app

import (
	"errors"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

func TestResolveMemoryLimit(t *testing.T) {
	cgroup := func(n uint64, err error) func() (uint64, error) {
		return func() (uint64, error) { return n, err }
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		flag    string
		getenv  func(string) string
		cgroup  func() (uint64, error)
		want    memoryLimit
		wantErr bool
	}{
		{name: "cgroup limit, 90% of it", flag: "auto", getenv: env(), cgroup: cgroup(1<<30, nil), want: memoryLimit{Bytes: (1 << 30) / 10 * 9, Source: "cgroup"}},
		{name: "empty flag is auto", flag: "", getenv: env(), cgroup: cgroup(512<<20, nil), want: memoryLimit{Bytes: (512 << 20) / 10 * 9, Source: "cgroup"}},
		{name: "no cgroup limit", flag: "auto", getenv: env(), cgroup: cgroup(0, memlimit.ErrNoLimit), want: memoryLimit{Source: "none"}},
		{name: "no cgroup at all", flag: "auto", getenv: env(), cgroup: cgroup(0, errors.New("not supported")), want: memoryLimit{Source: "none"}},
		{name: "flag wins over cgroup", flag: "900MiB", getenv: env(), cgroup: cgroup(1<<30, nil), want: memoryLimit{Bytes: 900 << 20, Source: "flag"}},
		{name: "flag in Kubernetes units", flag: "1Gi", getenv: env(), cgroup: cgroup(0, memlimit.ErrNoLimit), want: memoryLimit{Bytes: 1 << 30, Source: "flag"}},
		{name: "flag in bytes", flag: "123456789", getenv: env(), cgroup: cgroup(0, memlimit.ErrNoLimit), want: memoryLimit{Bytes: 123456789, Source: "flag"}},
		{name: "off ignores the cgroup", flag: "off", getenv: env(), cgroup: cgroup(1<<30, nil), want: memoryLimit{Source: "off"}},
		{name: "GOMEMLIMIT wins over cgroup", flag: "auto", getenv: env("GOMEMLIMIT", "700MiB"), cgroup: cgroup(1<<30, nil), want: memoryLimit{Bytes: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}},
		{name: "garbage refused", flag: "lots", getenv: env(), cgroup: cgroup(1<<30, nil), wantErr: true},
		{name: "negative refused", flag: "-5MiB", getenv: env(), cgroup: cgroup(1<<30, nil), wantErr: true},
		{name: "zero refused", flag: "0", getenv: env(), cgroup: cgroup(1<<30, nil), wantErr: true},
		{name: "overflow refused", flag: "99999999999TiB", getenv: env(), cgroup: cgroup(1<<30, nil), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveMemoryLimit(tt.flag, tt.getenv, tt.cgroup)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestMemoryLimitApplied: a limit from the flag reaches the runtime.
func TestMemoryLimitApplied(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	m, err := resolveMemoryLimit("3GiB", func(string) string { return "" }, memlimit.FromCgroup)
	if err != nil {
		t.Fatal(err)
	}
	m.apply()
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Fatalf("runtime limit %d, want %d", got, int64(3<<30))
	}
}
