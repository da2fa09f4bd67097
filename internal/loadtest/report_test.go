package loadtest

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

func sampleReport() *Report {
	us := time.Microsecond
	res := func(rps float64, p50, p90, p99, maxLat time.Duration, errs uint64) *Result {
		r := &Result{Addr: "127.0.0.1:9191", Callers: 16, Connections: 2, Elapsed: 10 * time.Second,
			Requests: uint64(rps * 10), RPS: rps, P50: p50, P90: p90, P99: p99, Max: maxLat, Mean: p50, Errors: errs}
		if errs > 0 {
			r.ErrorKinds = []ErrorKind{{Kind: "denied Unauthenticated http 401", Count: errs, Example: "invalid token"}}
		}
		return r
	}
	m := NewMinter(&Keys{}, fixedClock)
	sc := StandardScenarios(m, ScenarioOptions{})
	fresh := res(9100, 1500*us, 2600*us, 4100*us, 9*time.Millisecond, 0)
	fresh.TokensExhausted, fresh.Elapsed = true, 8700*time.Millisecond
	return &Report{
		Callers: 16, Connections: 2, Warmup: 2 * time.Second, Duration: 10 * time.Second,
		Scenarios: []ScenarioResult{
			Evaluate(sc[0], res(21000, 610*us, 980*us, 1700*us, 12*time.Millisecond, 0), res(19800, 650*us, 1040*us, 1850*us, 14*time.Millisecond, 0)),
			Evaluate(sc[1], res(20500, 620*us, 990*us, 1750*us, 11*time.Millisecond, 0), res(15000, 840*us, 1400*us, 2500*us, 20*time.Millisecond, 12)),
			Evaluate(sc[2], res(20800, 615*us, 985*us, 1720*us, 10*time.Millisecond, 0), fresh),
		},
	}
}

func TestReportGolden(t *testing.T) {
	rep := sampleReport()
	var table, js bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	matchGolden(t, "report.golden.txt", table.Bytes())
	matchGolden(t, "report.golden.json", js.Bytes())

	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Scenarios[1].Pass || back.Passed() || !back.Scenarios[0].Pass {
		t.Errorf("verdicts lost in JSON: %+v", back.Scenarios)
	}
}

func TestReportPassed(t *testing.T) {
	rep := sampleReport()
	if rep.Passed() {
		t.Error("a report with a failing scenario passed")
	}
	rep.Scenarios = rep.Scenarios[:1]
	if !rep.Passed() {
		t.Errorf("a report of one passing scenario failed: %q", rep.Scenarios[0].Failures)
	}
	if !(&Report{}).Passed() {
		t.Error("an empty report failed")
	}
}

func matchGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}
