package config

import (
	"strings"
	"testing"
	"time"
)

// TestRateLimitAndAuditErrors: every broken limit or audit setting is
// refused with the YAML path of the broken key.
func TestRateLimitAndAuditErrors(t *testing.T) {
	const head = "issuers: [{name: a, secret: s}]\n"
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"unknown key kind", head + "routes: [{name: r, issuers: [a], limits: [{key: user, requests: 1, per: 1s}]}]\n",
			[]string{"routes[0] (r).limits[0].key", `"user"`}},
		{"no requests", head + "routes: [{name: r, issuers: [a], limits: [{key: subject, per: 1s}]}]\n",
			[]string{"routes[0] (r).limits[0].requests"}},
		{"no interval", head + "routes: [{name: r, issuers: [a], limits: [{key: subject, requests: 5}]}]\n",
			[]string{"routes[0] (r).limits[0].per"}},
		{"too fast", head + "routes: [{name: r, issuers: [a], limits: [{key: subject, requests: 1000000000, per: 1s}]}]\n",
			[]string{"routes[0] (r).limits[0]", "one a microsecond"}},
		{"too long", head + "routes: [{name: r, issuers: [a], limits: [{key: subject, requests: 1, per: 48h}]}]\n",
			[]string{"longer than 24h"}},
		{"negative burst", head + "routes: [{name: r, issuers: [a], limits: [{key: subject, requests: 1, per: 1s, burst: -1}]}]\n",
			[]string{"limits[0].burst"}},
		{"unknown action", head + "routes: [{name: r, issuers: [a], limits: [{key: subject, requests: 1, per: 1s, action: log}]}]\n",
			[]string{"limits[0].action", `"log"`}},
		{"rule limit", head + "routes: [{name: r, issuers: [a], rules: [{name: d, names: [deploy], limits: [{key: root, requests: 0, per: 1m}]}]}]\n",
			[]string{"routes[0] (r).rules[0] (d).limits[0].requests"}},
		{"audit without sink", head + "routes: [{name: r, issuers: [a]}]\naudit: {decisions: denied}\n",
			[]string{"audit.sink: required"}},
		{"audit unknown sink", head + "routes: [{name: r, issuers: [a]}]\naudit: {sink: syslog}\n",
			[]string{"audit.sink", "syslog"}},
		{"audit file without path", head + "routes: [{name: r, issuers: [a]}]\naudit: {sink: file}\n",
			[]string{"audit.file.path"}},
		{"audit bad decisions", head + "routes: [{name: r, issuers: [a]}]\naudit: {sink: stdout, decisions: allowed}\n",
			[]string{"audit.decisions"}},
		{"audit sample above 1", head + "routes: [{name: r, issuers: [a]}]\naudit: {sink: stdout, sample_allowed: 2}\n",
			[]string{"audit.sample_allowed"}},
		{"audit bad argument path", head + "routes: [{name: r, issuers: [a]}]\naudit: {sink: stdout, log_arguments: [a..b]}\n",
			[]string{"audit.log_arguments[0]"}},
		{"audit unknown key", head + "routes: [{name: r, issuers: [a]}]\naudit: {sink: stdout, decision: all}\n",
			[]string{"line 3", "decision"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestRateLimitAndAuditAccepted(t *testing.T) {
	f, err := Parse([]byte(`issuers: [{name: a, secret: s}]
routes:
- name: r
  issuers: [a]
  limits: [{key: subject, requests: 600, per: 1m, burst: 100}]
  rules: [{name: d, names: [deploy], limits: [{key: subject_tool, requests: 10, per: 1h, action: deny}]}]
audit: {sink: file, decisions: denied, sample_allowed: 0.5, log_arguments: [q, o.lang], file: {path: /tmp/a.jsonl, max_size: 10, max_backups: 2}}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := f.Routes[0].Limits[0]
	if l.Key != "subject" || l.Requests != 600 || l.Per.D() != time.Minute || l.Burst != 100 {
		t.Errorf("route limit %+v", l)
	}
	if rl := f.Routes[0].Rules[0].Limits[0]; rl.Key != "subject_tool" || rl.Per.D() != time.Hour {
		t.Errorf("rule limit %+v", rl)
	}
	if a := f.Audit; a.Sink != "file" || *a.SampleAllowed != 0.5 || a.File.MaxBackups != 2 || len(a.LogArguments) != 2 {
		t.Errorf("audit %+v", a)
	}
}
