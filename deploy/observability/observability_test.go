// Package observability holds the test of the Grafana dashboard and the
// Prometheus alerting rules: every extauthz metric they name must be one the
// service exports.
package observability

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/metrics"
)

// exported returns the metric names the service's registry exposes once
// every metric has been touched (a vector without a series is not
// gathered), histograms with their series suffixes.
func exported(t *testing.T) []string {
	t.Helper()
	m := metrics.New()
	m.Checked("r", check.Allowed, time.Millisecond)
	m.SessionConflict("r")
	m.JWKSFetch("i", nil)
	m.Reloaded(errors.New("x"))
	m.STSCall("ok", time.Millisecond)
	m.RedisOp("bind", "ok")
	m.Cache("verdicts", func() cache.Stats { return cache.Stats{} })
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		n := f.GetName()
		names = append(names, n)
		if f.GetType().String() == "HISTOGRAM" {
			names = append(names, n+"_bucket", n+"_sum", n+"_count")
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\bextauthz_[a-z_]+\b`)

func named(t *testing.T, exprs []string) []string {
	t.Helper()
	var out []string
	for _, e := range exprs {
		out = append(out, metricName.FindAllString(e, -1)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	checkNames(t, named(t, exprs), 10)
}

func TestAlertRulesMetricsExist(t *testing.T) {
	b, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v needs alert, expr, a severity and a summary", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			exprs = append(exprs, r.Expr)
		}
	}
	checkNames(t, named(t, exprs), 8)
}

// checkNames fails on a name the service does not export, and when fewer
// than min metrics are used (a regex that found nothing proves nothing).
func checkNames(t *testing.T, used []string, min int) {
	t.Helper()
	have := exported(t)
	if len(used) < min {
		t.Errorf("only %d metrics found: %v", len(used), used)
	}
	for _, n := range used {
		if !slices.Contains(have, n) {
			t.Errorf("%s is not a metric the service exports (%v)", n, have)
		}
	}
}
