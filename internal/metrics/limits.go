package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extauthz/extauthz/internal/check"
)

// limitMetrics counts rate limit decisions by route and key kind (never by
// user) and reads the limiter's and the audit writer's own counters.
type limitMetrics struct {
	decisions *prometheus.CounterVec
	handles   sync.Map // limitKey -> prometheus.Counter
}

type limitKey struct {
	route, key string
	limited    bool
}

var _ check.RateLimitObserver = (*Metrics)(nil)

func newLimitMetrics(reg *prometheus.Registry) *limitMetrics {
	l := &limitMetrics{decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "rate_limit_decisions_total",
		Help: "Rate limit decisions by route, key kind (subject, subject_tool, client, root, principal) and result (allowed, limited).",
	}, []string{"route", "key", "result"})}
	reg.MustRegister(l.decisions)
	return l
}

// RateLimitDecided counts one decision of a limit (check.RateLimitObserver).
func (m *Metrics) RateLimitDecided(route, key string, limited bool) {
	k := limitKey{route, key, limited}
	c, ok := m.limits.handles.Load(k)
	if !ok {
		result := "allowed"
		if limited {
			result = "limited"
		}
		c, _ = m.limits.handles.LoadOrStore(k, m.limits.decisions.WithLabelValues(route, key, result))
	}
	c.(prometheus.Counter).Inc()
}

// RateLimiter exposes the limiter's fallbacks to local counts and its
// failed Redis calls.
func (m *Metrics) RateLimiter(fallbacks, redisErrors func() uint64) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "rate_limit_fallbacks_total",
			Help: "Rate limit decisions made by this replica's local counts because Redis failed or was being skipped."},
			func() float64 { return float64(fallbacks()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "rate_limit_redis_errors_total",
			Help: "Rate limit Redis calls that failed or timed out."},
			func() float64 { return float64(redisErrors()) }),
	)
}

// Audit exposes the audit writer's counts: records written, dropped on a
// full queue, and lost by a failing sink.
func (m *Metrics) Audit(written, dropped, failed func() uint64) {
	for result, f := range map[string]func() uint64{"written": written, "dropped": dropped, "failed": failed} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: "audit_records_total",
			Help:        "Audit records by result: written, dropped (queue full), failed (the sink refused them).",
			ConstLabels: prometheus.Labels{"result": result}},
			func() float64 { return float64(f()) }))
	}
}
