package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestServeAuditAndLimits: serve with a file audit log and a route limit.
// Beyond the burst the answer is 429 with Retry-After and the decision id;
// every decision is in the file, with its id and without the token.
func TestServeAuditAndLimits(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.jsonl")
	cfg := filepath.Join(dir, "config.yaml")
	writeFile(t, cfg, fmt.Sprintf(`issuers: [{name: a, secret: %s}]
routes: [{name: main, default: true, issuers: [a], limits: [{key: subject, requests: 1, per: 1h, burst: 2}]}]
audit: {sink: file, file: {path: %s}}
`, reloadSecret, log))
	s := startServer(t, nil, cfg)
	tok := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	var statuses []int
	for range 3 {
		resp, err := s.client.Check(context.Background(), envoyRequest(map[string]string{"authorization": "Bearer " + tok}))
		if err != nil {
			t.Fatal(err)
		}
		d := resp.GetDeniedResponse()
		if d == nil {
			statuses = append(statuses, 200)
			continue
		}
		statuses = append(statuses, int(d.GetStatus().GetCode()))
		headers := map[string]string{}
		for _, h := range d.GetHeaders() {
			headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		if headers["retry-after"] == "" || headers["x-extauthz-decision-id"] != "r-1" {
			t.Errorf("denial headers %v", headers)
		}
	}
	if fmt.Sprint(statuses) != "[200 200 429]" {
		t.Errorf("statuses %v, want [200 200 429]", statuses)
	}
	if err := s.stop(); err != nil { // flushes the audit log
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte(reloadSecret)) {
		t.Error("the audit log holds the token or the secret")
	}
	var outcomes []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r struct {
			DecisionID string `json:"decision_id"`
			Outcome    string `json:"outcome"`
			Subject    string `json:"subject"`
			RateLimit  string `json:"rate_limit"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.DecisionID != "r-1" || r.Subject == "" {
			t.Errorf("record %s", sc.Bytes())
		}
		outcomes = append(outcomes, r.Outcome+"/"+r.RateLimit)
	}
	if fmt.Sprint(outcomes) != "[allowed/ allowed/ rate_limited/main/limits[0]]" {
		t.Errorf("records %v", outcomes)
	}
}
