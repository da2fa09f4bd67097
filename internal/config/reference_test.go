package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestReferenceDocumentsEveryKey compares the keys the decoder accepts
// (reflected from the yaml tags) with the keys docs/configuration.md
// documents: a new key fails here until it is documented, and the reference
// documents no key the decoder refuses.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	accepted := keyPaths()
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_\\[\\].]+)` \\|").FindAllStringSubmatch(doc, -1) {
		documented[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?m)^## ([a-z_]+)$`).FindAllStringSubmatch(doc, -1) {
		documented[m[1]] = true
	}
	for _, k := range accepted {
		if documented[k] {
			continue
		}
		// A mapping or list whose keys are all documented is documented.
		if slices.ContainsFunc(accepted, func(c string) bool { return strings.HasPrefix(c, k+".") || strings.HasPrefix(c, k+"[].") }) &&
			!slices.ContainsFunc(accepted, func(c string) bool {
				return (strings.HasPrefix(c, k+".") || strings.HasPrefix(c, k+"[].")) && !documented[c]
			}) {
			continue
		}
		t.Errorf("docs/configuration.md does not document %s: add a row | `%s` | type | default | meaning |", k, k)
	}
	for k := range documented {
		if !slices.Contains(accepted, k) {
			t.Errorf("docs/configuration.md documents %s, which the decoder does not accept", k)
		}
	}
	for _, must := range []string{"resource_name", "tls_server_name", "action: allow", "--wait", "--json"} {
		if !strings.Contains(doc, must) {
			t.Errorf("the reference does not mention %s", must)
		}
	}
}

// keyPaths returns every key path the decoder accepts, such as
// "routes[].rules[].action" and "redis.tls_server_name".
func keyPaths() []string {
	var out []string
	var walk func(t reflect.Type, prefix string, depth int)
	walk = func(t reflect.Type, prefix string, depth int) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 8 {
			return
		}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := prefix + name
			out = append(out, p)
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				walk(ft.Elem(), p+"[].", depth+1)
			} else {
				walk(ft, p+".", depth+1)
			}
		}
	}
	walk(reflect.TypeFor[File](), "", 0)
	slices.Sort(out)
	return out
}

// TestReferenceExampleParses: the complete example of docs/configuration.md
// is a valid configuration as written. (internal/configcheck also validates
// it against its environment, with every file it names in place.)
func TestReferenceExampleParses(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## A complete example\n")
	if !ok {
		t.Fatal("docs/configuration.md has no section \"A complete example\"")
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)\n```").FindStringSubmatch(rest)
	if m == nil {
		t.Fatal("the complete example has no yaml block")
	}
	f, err := Parse([]byte(m[1]))
	if err != nil {
		t.Fatalf("the complete example does not parse:\n%v", err)
	}
	// Every top-level section is shown.
	var top map[string]any
	if err := yaml.Unmarshal([]byte(m[1]), &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range Keys(reflect.TypeFor[File]()) {
		if _, ok := top[k]; !ok {
			t.Errorf("the complete example has no %s section", k)
		}
	}
	if len(f.Routes) == 0 || len(f.Issuers) == 0 {
		t.Errorf("the complete example decodes to no routes or issuers: %+v", f)
	}
}
