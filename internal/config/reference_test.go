package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
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
