// Package metrics exposes what the service decides and how its caches and
// dependencies behave, in the Prometheus exposition format. Labels are
// bounded: routes, outcomes, issuers, caches and results come from the
// configuration or fixed lists, never from users or tokens.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/check"
)

const namespace = "extauthz"

// Metrics holds the service's collectors in a registry of its own.
type Metrics struct {
	reg *prometheus.Registry

	checks       *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	hijacks      *prometheus.CounterVec
	refusedSess  *prometheus.CounterVec
	sessLookups  *prometheus.CounterVec
	sessCreated  *prometheus.CounterVec
	jwksFetches  *prometheus.CounterVec
	reloads      *prometheus.CounterVec
	generation   prometheus.Gauge
	stsCalls     *prometheus.CounterVec
	credentials  *prometheus.CounterVec
	stsLatency   prometheus.Histogram
	redisOps     *prometheus.CounterVec
	adminRefused *prometheus.CounterVec
	dropped      *prometheus.CounterVec
	slowClients  *prometheus.CounterVec
	refused      *prometheus.CounterVec
	responses    *prometheus.CounterVec
	panics       *prometheus.CounterVec

	limits *limitMetrics

	// handles caches the children of checks and latency per route and
	// outcome, so the hot path skips the label lookup.
	handles sync.Map // checkKey -> *checkHandles
}

type checkKey struct {
	route   string
	outcome check.Outcome
}

type checkHandles struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

var _ check.Observer = (*Metrics)(nil)

// New registers the collectors, with the Go runtime and process ones.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "checks_total",
			Help: "Decisions by route and outcome (allowed, public, and each denial reason).",
		}, []string{"route", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "check_duration_seconds",
			Help:    "Time to decide one request, by route.",
			Buckets: []float64{.000005, .00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route"}),
		hijacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "session_hijack_attempts_total",
			Help: "Requests presenting an MCP session bound to another user.",
		}, []string{"route"}),
		refusedSess: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "session_bindings_refused_total",
			Help: "New MCP sessions refused (503) because the binding store was full of live bindings.",
		}, []string{"route"}),
		sessLookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "session_lookups_total",
			Help: "Requests naming an MCP session or A2A context, by route and result: hit (bound to the caller, or joined by a delegate) or miss (unbound).",
		}, []string{"route", "result"}),
		sessCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "session_bindings_created_total",
			Help: "MCP sessions and A2A contexts bound to a user on first sight, by route.",
		}, []string{"route"}),
		jwksFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "jwks_fetches_total",
			Help: "Key set loads by issuer and result (ok, error).",
		}, []string{"issuer", "result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "config_reloads_total",
			Help: "Configuration reloads by result (ok, error).",
		}, []string{"result"}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "config_generation",
			Help: "How many configurations have been loaded since start.",
		}),
		stsCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sts_calls_total",
			Help: "Token exchange calls by result (ok, or the error kind).",
		}, []string{"result"}),
		credentials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "credential_verifications_total",
			Help: "Credentials verified (verdict cache misses) by issuer kind (jwt, introspection, api_keys, peer) and outcome (ok, denied, unavailable).",
		}, []string{"kind", "outcome"}),
		stsLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "sts_call_duration_seconds",
			Help:    "Token exchange call latency.",
			Buckets: prometheus.DefBuckets,
		}),
		redisOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "redis_operations_total",
			Help: "Shared-tier (Redis) operations by operation and result (ok, miss, conflict, error, timeout, ...).",
		}, []string{"op", "result"}),
		adminRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "admin_unauthenticated_total",
			Help: "Admin API calls refused for want of valid credentials, by reason (no_credential, bad_token, no_client_cert, client_not_allowed, token_file_broken).",
		}, []string{"reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "verdicts_dropped_total",
			Help: "Cached verdicts dropped before their time, by reason (key_removed: the issuer's key set no longer lists the token's kid).",
		}, []string{"reason"}),
		slowClients: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "slow_clients_total",
			Help: "Connections closed because the client was too slow to send its request or read the answer, by listener.",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "http_refused_total",
			Help: "HTTP requests answered 503 at once because too many bodies were being read, by listener.",
		}, []string{"listener"}),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "response_path_total",
			Help: "What the response path (ext_proc) did, by route and action (filtered, filter_failure, reauthorized, session_bound, session_refused, task_bound, context_bound, not_allowed, overloaded, protocol_failure, stream_opened, injected, request_dropped).",
		}, []string{"route", "action"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "handler_panics_total",
			Help: "Calls whose handler panicked and were answered with an internal error, by gRPC method (forward-auth for the HTTP front end). Any is a bug.",
		}, []string{"method"}),
	}
	m.limits = newLimitMetrics(m.reg)
	m.reg.MustRegister(m.responses, m.panics)
	m.reg.MustRegister(m.refusedSess, m.sessLookups, m.sessCreated, m.dropped, m.slowClients, m.refused)
	m.reg.MustRegister(m.adminRefused, m.redisOps, m.checks, m.latency, m.hijacks, m.jwksFetches, m.reloads, m.generation, m.stsCalls, m.stsLatency, m.credentials,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ResponseProcessed counts one thing the response path did
// (extprocauthz.Observer).
func (m *Metrics) ResponseProcessed(route, action string) {
	m.responses.WithLabelValues(route, action).Inc()
}

// Handler serves the exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Checked counts one decision.
func (m *Metrics) Checked(route string, o check.Outcome, took time.Duration) {
	k := checkKey{route, o}
	h, ok := m.handles.Load(k)
	if !ok {
		h, _ = m.handles.LoadOrStore(k, &checkHandles{
			count:   m.checks.WithLabelValues(route, o.String()),
			latency: m.latency.WithLabelValues(route),
		})
	}
	ch := h.(*checkHandles)
	ch.count.Inc()
	ch.latency.Observe(took.Seconds())
}

// SessionConflict counts a session hijack attempt.
func (m *Metrics) SessionConflict(route string) { m.hijacks.WithLabelValues(route).Inc() }

// SessionRefused counts a new MCP session refused because the binding store
// was full (check.SessionObserver).
func (m *Metrics) SessionRefused(route string) { m.refusedSess.WithLabelValues(route).Inc() }

// SessionLookup counts a request naming a session (check.SessionStatsObserver).
func (m *Metrics) SessionLookup(route string, hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	m.sessLookups.WithLabelValues(route, result).Inc()
}

// SessionCreated counts a binding created (check.SessionStatsObserver).
func (m *Metrics) SessionCreated(route string) { m.sessCreated.WithLabelValues(route).Inc() }

var (
	_ check.SessionObserver      = (*Metrics)(nil)
	_ check.SessionStatsObserver = (*Metrics)(nil)
)

// JWKSFetch counts a key set load.
func (m *Metrics) JWKSFetch(issuer string, err error) {
	m.jwksFetches.WithLabelValues(issuer, result(err)).Inc()
}

// Reloaded counts a configuration reload.
func (m *Metrics) Reloaded(err error) {
	m.reloads.WithLabelValues(result(err)).Inc()
	if err == nil {
		m.generation.Inc()
	}
}

// STSCall counts a token exchange call; kind is "ok" or the error kind.
func (m *Metrics) STSCall(kind string, took time.Duration) {
	m.stsCalls.WithLabelValues(kind).Inc()
	m.stsLatency.Observe(took.Seconds())
}

// CredentialVerified counts a credential verification by issuer kind and
// outcome: both come from fixed lists, never from requests.
func (m *Metrics) CredentialVerified(kind, outcome string) {
	m.credentials.WithLabelValues(kind, outcome).Inc()
}

// VerdictsDropped counts cached verdicts dropped for reason.
func (m *Metrics) VerdictsDropped(reason string, n int) {
	m.dropped.WithLabelValues(reason).Add(float64(n))
}

// SlowClient counts a connection closed for slowness on listener.
func (m *Metrics) SlowClient(listener string) { m.slowClients.WithLabelValues(listener).Inc() }

// HandlerPanicked counts a call whose handler panicked; method is the gRPC
// full method name, one of the few the server registers, or forward-auth
// for the HTTP front end.
func (m *Metrics) HandlerPanicked(method string) { m.panics.WithLabelValues(method).Inc() }

// Refused counts a request refused for too many bodies in flight.
func (m *Metrics) Refused(listener string) { m.refused.WithLabelValues(listener).Inc() }

// RedisOp counts one shared-tier operation.
func (m *Metrics) RedisOp(op, result string) { m.redisOps.WithLabelValues(op, result).Inc() }

// AdminRefused counts an admin call refused before it ran; reason is one of
// adminapi's fixed Reason values.
func (m *Metrics) AdminRefused(reason string) { m.adminRefused.WithLabelValues(reason).Inc() }

// Cache exposes a cache's counters under the label cache=name; stats is
// read at scrape time, so the hot path pays nothing.
func (m *Metrics) Cache(name string, stats func() cache.Stats) {
	labels := prometheus.Labels{"cache": name}
	counter := func(metric, help string, v func(cache.Stats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Name: metric, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(stats())) })
	}
	m.reg.MustRegister(
		counter("cache_hits_total", "Cache lookups answered.", func(s cache.Stats) uint64 { return s.Hits }),
		counter("cache_misses_total", "Cache lookups not answered.", func(s cache.Stats) uint64 { return s.Misses }),
		counter("cache_evictions_total", "Entries removed by the bound, expiry or invalidation.", func(s cache.Stats) uint64 { return s.Evictions }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Name: "cache_entries", Help: "Entries held.", ConstLabels: labels},
			func() float64 { return float64(stats().Size) }),
	)
}

// Registry is the registry, for collectors of other packages.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}
