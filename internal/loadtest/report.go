package loadtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a run: every scenario's two measurements and
// verdict.
type Report struct {
	Callers     int           `json:"callers"`
	Connections int           `json:"connections"`
	Warmup      time.Duration `json:"warmup_ns"`
	Duration    time.Duration `json:"duration_ns"`
	MaxRequests uint64        `json:"max_requests,omitempty"`
	// Scenarios in the order they ran.
	Scenarios []ScenarioResult `json:"scenarios"`
}

// ScenarioResult is one scenario: the do-nothing server's and the service's
// measurements, their ratios and whether the target was met.
type ScenarioResult struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Target      Target  `json:"target"`
	Noop        *Result `json:"noop"`
	Service     *Result `json:"service"`
	// RPSRatio is the service's throughput over the do-nothing server's.
	RPSRatio float64 `json:"rps_ratio"`
	// P99Ratio is the service's p99 latency over the do-nothing server's.
	P99Ratio float64 `json:"p99_ratio"`
	Pass     bool    `json:"pass"`
	// Failures says why the scenario failed; empty when it passed.
	Failures []string `json:"failures,omitempty"`
}

// Passed reports whether every scenario met its target.
func (r *Report) Passed() bool {
	for _, s := range r.Scenarios {
		if !s.Pass {
			return false
		}
	}
	return true
}

// WriteJSON writes the report as indented JSON; durations are nanoseconds.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people: two rows per scenario (the
// do-nothing server, then the service with the ratios and verdict), then why
// each failing scenario failed.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "%d callers on %d connections; per server: %s warm-up, %s measured", r.Callers, r.Connections, r.Warmup, r.Duration)
	if r.MaxRequests > 0 {
		fmt.Fprintf(w, " (at most %d requests)", r.MaxRequests)
	}
	fmt.Fprint(w, "\nlatencies in milliseconds; ratios are service / do-nothing server\n\n")

	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tSERVER\tRPS\tP50\tP90\tP99\tMAX\tERRORS\tRPS RATIO\tP99 RATIO\tTARGET\tRESULT")
	var notes []string
	for _, s := range r.Scenarios {
		row := func(name, server string, res *Result) {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%d", name, server, res.RPS,
				millis(res.P50), millis(res.P90), millis(res.P99), millis(res.Max), res.Errors)
			if res.TokensExhausted {
				notes = append(notes, fmt.Sprintf("%s %s: tokens used up after %s; measured over that time", s.Name, server, res.Elapsed.Round(time.Millisecond)))
			}
		}
		row(s.Name, "noop", s.Noop)
		fmt.Fprint(tw, "\t\t\t\t\n")
		row("", "service", s.Service)
		verdict := "PASS"
		if !s.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "\t%.2f\t%.2f\t%s\t%s\n", s.RPSRatio, s.P99Ratio, s.Target, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// The noop rows' empty verdict cells are padded; drop the padding.
	for line := range strings.Lines(buf.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	for _, s := range r.Scenarios {
		for _, f := range s.Failures {
			fmt.Fprintf(w, "\n%s: FAIL: %s", s.Name, f)
		}
	}
	for _, n := range notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	verdict := "PASS: every scenario met its target"
	if !r.Passed() {
		verdict = "FAIL: a scenario missed its target"
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}

func millis(d time.Duration) string {
	return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond))
}
