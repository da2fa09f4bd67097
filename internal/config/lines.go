package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Locator finds the YAML line of a configuration path such as
// "routes[1] (files).rules[0].action", the form every validation message
// starts with.
type Locator struct{ root *yaml.Node }

// NewLocator reads the YAML document b; a document that does not parse
// yields a Locator that knows no line.
func NewLocator(b []byte) Locator {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil || len(doc.Content) == 0 {
		return Locator{}
	}
	return Locator{root: doc.Content[0]}
}

// Line returns the 1-based line of the deepest node of path that exists in
// the document, 0 when not even its first key does.
func (l Locator) Line(path string) int {
	n, line := l.root, 0
	for n != nil && path != "" {
		i := strings.IndexAny(path, ".[ :")
		if i < 0 {
			i = len(path)
		}
		key := path[:i]
		path = path[i:]
		if key == "" || n.Kind != yaml.MappingNode {
			break
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next, line = n.Content[j+1], n.Content[j].Line
			}
		}
		n = next
		// Indexes, then an optional " (name)", then "." and the next key.
		for n != nil && strings.HasPrefix(path, "[") {
			end := strings.IndexByte(path, ']')
			idx, err := strconv.Atoi(path[1:max(end, 1)])
			if end < 0 || err != nil || n.Kind != yaml.SequenceNode || idx < 0 || idx >= len(n.Content) {
				return line
			}
			n, line = n.Content[idx], n.Content[idx].Line
			path = path[end+1:]
		}
		if strings.HasPrefix(path, " (") {
			end := strings.Index(path, ")")
			if end < 0 {
				return line
			}
			path = path[end+1:]
		}
		if !strings.HasPrefix(path, ".") {
			break
		}
		path = path[1:]
	}
	return line
}

// withLines prefixes each joined validation error with the line its path
// points at.
func withLines(b []byte, err error) error {
	if err == nil {
		return nil
	}
	loc := NewLocator(b)
	var errs []error
	for _, e := range unjoin(err) {
		if line := loc.Line(e.Error()); line > 0 {
			e = fmt.Errorf("line %d: %w", line, e)
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// unjoin returns the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// maxSyntaxScan bounds the lines syntaxError re-parses after the reported
// one.
const maxSyntaxScan = 2000

// syntaxError rewrites a YAML syntax error with the line where the document
// stops parsing. The decoder reports where the enclosing block began, and
// for parser errors counts lines from 0, so the line it names is at or
// before the mistake; from there, the first prefix of whole lines that fails
// to parse ends at the line to look at.
func syntaxError(b []byte, err error) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	reported, _ := strconv.Atoi(m[1])
	msg := strings.TrimPrefix(err.Error(), m[0])
	lines := bytes.SplitAfter(b, []byte("\n"))
	from := max(reported, 1)
	if from > len(lines) {
		return fmt.Errorf("line %d: YAML syntax: %s", len(lines), msg)
	}
	prefix := bytes.Join(lines[:from-1], nil)
	for i := from - 1; i < len(lines) && i < from-1+maxSyntaxScan; i++ {
		prefix = append(prefix, lines[i]...)
		var n yaml.Node
		if yaml.Unmarshal(prefix, &n) != nil {
			return fmt.Errorf("line %d: YAML syntax: %s", i+1, msg)
		}
	}
	return fmt.Errorf("line %d: YAML syntax: %s (in the block starting there)", reported+1, msg)
}

var (
	unknownField = regexp.MustCompile(`field (.*) not found in type config\.(\w+)`)
	goType       = regexp.MustCompile(`(\[\]|map\[\w+\])*\*?config\.\w+`)
	cannotDecode = regexp.MustCompile("(?s)cannot unmarshal (!\\S*)(?: `(.*?)`)? into (\\S+)")
)

// typeError rewrites the decoder's messages, which name Go types, in the
// configuration's own words.
func typeError(msg string) error {
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		keys := Keys(typeNamed(m[2]))
		return errors.New(strings.Replace(msg, m[0], fmt.Sprintf("unknown key %q (valid keys: %s)", m[1], strings.Join(keys, ", ")), 1))
	}
	if m := cannotDecode.FindStringSubmatch(msg); m != nil {
		found := "found " + yamlKind(m[1])
		if v := m[2]; v != "" {
			if len(v) > 40 {
				v = v[:40] + "..."
			}
			found = fmt.Sprintf("%q is %s", v, yamlKind(m[1]))
		}
		return errors.New(strings.Replace(msg, m[0], fmt.Sprintf("%s, want %s", found, wantKind(m[3])), 1))
	}
	// Any other decoder message: still no Go type names.
	return errors.New(goType.ReplaceAllString(msg, "a configuration section"))
}

func yamlKind(tag string) string {
	switch strings.TrimPrefix(tag, "!!") {
	case "str":
		return "a string"
	case "int":
		return "a number"
	case "bool":
		return "true or false"
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "float":
		return "a number"
	case "null":
		return "empty"
	}
	return "a value tagged " + tag
}

func wantKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	case goType == "config.Duration":
		return "a duration such as 30s or 5m"
	case strings.HasPrefix(goType, "config.") || strings.HasPrefix(goType, "*config."):
		return "a mapping"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "a string"
	}
	return "another type"
}

// typeNamed finds the configuration struct type called name.
func typeNamed(name string) reflect.Type {
	var found reflect.Type
	walkTypes(reflect.TypeFor[File](), map[reflect.Type]bool{}, func(t reflect.Type) {
		if t.Name() == name {
			found = t
		}
	})
	return found
}

func walkTypes(t reflect.Type, seen map[reflect.Type]bool, fn func(reflect.Type)) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	fn(t)
	for f := range t.Fields() {
		walkTypes(f.Type, seen, fn)
	}
}

// Keys returns the YAML keys a configuration struct type accepts, sorted.
func Keys(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	slices.Sort(keys)
	return keys
}
