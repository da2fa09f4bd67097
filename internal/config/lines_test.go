package config

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestParseErrorsNameLinesNotGoTypes(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // each must appear in the error
	}{
		{
			name: "unterminated quote",
			yaml: "issuers:\n  - name: a\n    issuer: \"x\nroutes: []\n",
			want: []string{"line 3: YAML syntax"},
		},
		{
			name: "bad indentation is reported on its own line",
			yaml: "issuers:\n  - name: a\n   bad: 1\nroutes: []\n",
			want: []string{"line 3: YAML syntax"},
		},
		{
			name: "unclosed flow list",
			yaml: "a: b\nc: [1, 2\nd: 3\n",
			want: []string{"line 2: YAML syntax"},
		},
		{
			name: "a bad duration hides nothing",
			yaml: "issuers:\n  - name: a\n    leeway: 30\n    algorithms: HS256\n    bogus: 1\nroutes:\n  - name: r\n    hosts: 3\n    rules: {a: 1}\n",
			want: []string{
				`line 3: invalid duration "30"`,
				`line 4: "HS256" is a string, want a list`,
				`line 5: unknown key "bogus" (valid keys: algorithms,`,
				`line 8: "3" is a number, want a list`,
				`line 9: found a mapping, want a list`,
			},
		},
		{
			name: "validation problems carry their line",
			yaml: "issuers:\n  - name: a\n    secret_env: S\nroutes:\n  - name: r\n    issuers: [a]\n    rules:\n      - methods: [tools/call]\n        action: maybe\n  - name: q\n    issuers: [nobody]\n",
			want: []string{
				`line 9: routes[0] (r).rules[0].action: "maybe" is neither allow nor deny`,
				`line 11: routes[1] (q).issuers: unknown issuer "nobody"`,
			},
		},
		{
			name: "policy problems, all at once, with CEL's place and message",
			yaml: "issuers:\n  - name: a\n    secret_env: S\nroutes:\n  - name: r\n    issuers: [a]\n    rules:\n" +
				"      - name: typo\n        when: identity.subjct == 'x'\n" +
				"      - name: not bool\n        when: |\n          identity.subject +\n            'x'\n" +
				"      - name: runaway\n        when: mcp.arguments.a.all(x, mcp.arguments.a.all(y, mcp.arguments.a.all(z, x == y)))\n" +
				"      - name: pdp\n        action: deny\n        authzen: {endpoint: 'http://pdp.example.com/access/v1/evaluation', client_auth: {method: client_secret_post, client_id: a, client_secret_env: S}}\n",
			want: []string{
				`line 9: routes[0] (r).rules[0] (typo).when: line 1, column 9: undefined field 'subjct'`,
				`line 11: routes[0] (r).rules[1] (not bool).when: expression yields string, want bool`,
				`line 15: routes[0] (r).rules[2] (runaway).when: expression may cost up to`,
				`line 18: routes[0] (r).rules[3] (pdp).authzen: a deny rule denies without asking`,
				`line 18: routes[0] (r).rules[3] (pdp).authzen: authzen endpoint must use https`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "config.") || strings.Contains(err.Error(), "[]string") {
				t.Errorf("error names a Go type:\n%v", err)
			}
		})
	}
}

func TestLocator(t *testing.T) {
	doc := []byte("issuers:\n  - name: a\n    jwks_file: k.json\nroutes:\n  - name: r\n    exchange:\n      sts: x\n")
	loc := NewLocator(doc)
	for path, want := range map[string]int{
		"issuers[0] (a).jwks_file: missing": 3,
		"issuers[0]":                        2,
		"routes[0] (r).exchange.sts":        7,
		"routes[3].name":                    4,
		"redis.addrs":                       0,
		"identity: something":               0,
	} {
		if got := loc.Line(path); got != want {
			t.Errorf("Line(%q) = %d, want %d", path, got, want)
		}
	}
}

func TestSyntaxErrorLine(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		line string
	}{
		{"a flow list over two lines before the mistake", "a: [1,\n    2]\nb:\n  - x\n - y\nc: d\n", "line 5: YAML syntax"},
		{"a tab", "issuers:\n\t- name: a\n", "line 2: YAML syntax"},
		{"a mistake deep in a long list", "issuers:\n" + strings.Repeat("  - name: a\n", 3000) + " bad: 1\n", "line 3002: YAML syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil || !strings.HasPrefix(err.Error(), tt.line) {
				t.Fatalf("err = %v, want %s", err, tt.line)
			}
		})
	}
}

// FuzzParse: any document gives a file or errors in the file's words, with
// lines inside the document.
func FuzzParse(f *testing.F) {
	f.Add([]byte("issuers: [{name: a, secret_env: S}]\nroutes: [{name: r, issuers: [a]}]\n"))
	f.Add([]byte("issuers:\n  - name: a\n   bad: 1\n"))
	f.Add([]byte("routes:\n  - {name: r, hosts: 3, rules: {a: 1}}\nissuers: [{leeway: 30}]\n"))
	f.Add([]byte("a: [1,\n  2\n"))
	line := regexp.MustCompile(`(?m)^line (\d+): `)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		_, err := Parse(b)
		if err == nil {
			return
		}
		msg := err.Error()
		if strings.Contains(msg, "config.") {
			t.Fatalf("error names a Go type: %s", msg)
		}
		// YAML breaks lines at LF, CR LF and a lone CR.
		lines := bytes.Count(b, []byte("\n")) + bytes.Count(b, []byte("\r")) + 1
		for _, m := range line.FindAllStringSubmatch(msg, -1) {
			if n, _ := strconv.Atoi(m[1]); n < 1 || n > lines {
				t.Fatalf("line %d outside the document's %d lines: %s", n, lines, msg)
			}
		}
	})
}
