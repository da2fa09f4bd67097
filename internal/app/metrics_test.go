package app

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestMetricsScrape checks the real /metrics endpoint after real checks.
func TestMetricsScrape(t *testing.T) {
	vars := map[string]string{"JWT_SECRET": reloadSecret}
	s := startServer(t, vars, "")
	tok := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "alice", "session_id": "s", "exp": time.Now().Add(time.Hour).Unix()})
	for range 5 {
		s.statusOf(t, tok)
	}
	for range 3 {
		s.client.Check(context.Background(), envoyRequest(nil)) // missing token
	}
	s.statusOf(t, "not.a.token")
	_, body := httpGet(t, "http://"+s.opsAddr+"/metrics")
	tests := []struct {
		name   string
		series string
		want   float64
	}{
		{"allowed", `extauthz_checks_total{outcome="allowed",route="default"}`, 5},
		{"missing token", `extauthz_checks_total{outcome="missing_token",route="default"}`, 3},
		{"invalid token", `extauthz_checks_total{outcome="invalid_token",route="default"}`, 1},
		{"verdict cache hits", `extauthz_cache_hits_total{cache="verdicts"}`, 4},
		{"verdict cache entries", `extauthz_cache_entries{cache="verdicts"}`, 2},
		{"latency observations", `extauthz_check_duration_seconds_count{route="default"}`, 9},
		{"config loaded", `extauthz_config_reloads_total{result="ok"}`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(tt.series) + ` (\S+)$`)
			m := re.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("series %s missing", tt.series)
			}
			if v, _ := strconv.ParseFloat(m[1], 64); v != tt.want {
				t.Fatalf("%s = %v, want %v", tt.series, v, tt.want)
			}
		})
	}
	for _, leak := range []string{tok, "alice"} {
		if regexp.MustCompile(regexp.QuoteMeta(leak)).MatchString(body) {
			t.Fatalf("metrics expose %q: labels must be bounded", leak)
		}
	}
}
