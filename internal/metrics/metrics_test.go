package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/check"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestExposition(t *testing.T) {
	m := New()
	m.Checked("files", check.Allowed, 3*time.Microsecond)
	m.Checked("files", check.Allowed, 3*time.Microsecond)
	m.Checked("files", check.InvalidToken, time.Millisecond)
	m.SessionConflict("files")
	m.SessionLookup("files", true)
	m.SessionLookup("files", false)
	m.SessionLookup("files", false)
	m.SessionCreated("files")
	m.SessionRefused("files")
	m.JWKSFetch("corp", nil)
	m.JWKSFetch("corp", errors.New("down"))
	m.Reloaded(nil)
	m.Reloaded(errors.New("bad"))
	m.STSCall("ok", 10*time.Millisecond)
	m.CredentialVerified("api_keys", "denied")
	m.RedisOp("bind", "timeout")
	m.Cache("verdicts", func() cache.Stats { return cache.Stats{Hits: 7, Misses: 2, Evictions: 1, Size: 5} })
	body := scrape(t, m)
	for _, want := range []string{
		`extauthz_checks_total{outcome="allowed",route="files"} 2`,
		`extauthz_checks_total{outcome="invalid_token",route="files"} 1`,
		`extauthz_check_duration_seconds_count{route="files"} 3`,
		`extauthz_session_hijack_attempts_total{route="files"} 1`,
		`extauthz_session_lookups_total{result="hit",route="files"} 1`,
		`extauthz_session_lookups_total{result="miss",route="files"} 2`,
		`extauthz_session_bindings_created_total{route="files"} 1`,
		`extauthz_session_bindings_refused_total{route="files"} 1`,
		`extauthz_jwks_fetches_total{issuer="corp",result="error"} 1`,
		`extauthz_jwks_fetches_total{issuer="corp",result="ok"} 1`,
		`extauthz_config_reloads_total{result="error"} 1`,
		`extauthz_config_generation 1`,
		`extauthz_sts_calls_total{result="ok"} 1`,
		`extauthz_credential_verifications_total{kind="api_keys",outcome="denied"} 1`,
		`extauthz_redis_operations_total{op="bind",result="timeout"} 1`,
		`extauthz_cache_hits_total{cache="verdicts"} 7`,
		`extauthz_cache_entries{cache="verdicts"} 5`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want+"\n") && !strings.Contains(body, want+" ") {
			t.Errorf("exposition lacks %s", want)
		}
	}
}

func BenchmarkChecked(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.Checked("files", check.Allowed, time.Microsecond)
	}
}

// TestLimitAndAuditMetrics: rate limit decisions by route and key kind,
// the limiter's and the audit writer's counters.
func TestLimitAndAuditMetrics(t *testing.T) {
	m := New()
	m.RateLimitDecided("tools", "subject", false)
	m.RateLimitDecided("tools", "subject", true)
	m.RateLimitDecided("tools", "subject", true)
	m.RateLimiter(func() uint64 { return 4 }, func() uint64 { return 1 })
	m.Audit(func() uint64 { return 10 }, func() uint64 { return 2 }, func() uint64 { return 0 })
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`extauthz_rate_limit_decisions_total{key="subject",result="allowed",route="tools"} 1`,
		`extauthz_rate_limit_decisions_total{key="subject",result="limited",route="tools"} 2`,
		`extauthz_rate_limit_fallbacks_total 4`,
		`extauthz_rate_limit_redis_errors_total 1`,
		`extauthz_audit_records_total{result="written"} 10`,
		`extauthz_audit_records_total{result="dropped"} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
