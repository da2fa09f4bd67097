package envoyconfig

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// schemaWalker walks the YAML tree alongside the protobuf descriptors, so
// that an unknown field, a bad enum value, a duplicate key, an unresolvable
// @type or a deprecated field is reported with its line. It is deliberately
// lenient where protojson has special forms (well-known types, numbers as
// strings): protojson decodes afterwards and has the last word.
type schemaWalker struct {
	problems []*Problem
	// onEnum, when set, sees every enum value node (tests break them).
	onEnum func(n *yaml.Node)
	// visits counts message nodes walked: aliases are followed, so a
	// document can be far larger walked than written.
	visits int
}

// maxVisits bounds the message nodes one walk visits.
const maxVisits = 1_000_000

func (w *schemaWalker) report(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	w.problems = append(w.problems, &Problem{Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// jsonSpecial are the well-known types whose JSON form is not an object of
// their fields; their content is left to protojson.
var jsonSpecial = map[protoreflect.FullName]bool{
	"google.protobuf.Struct":      true,
	"google.protobuf.Value":       true,
	"google.protobuf.ListValue":   true,
	"google.protobuf.Duration":    true,
	"google.protobuf.Timestamp":   true,
	"google.protobuf.FieldMask":   true,
	"google.protobuf.DoubleValue": true,
	"google.protobuf.FloatValue":  true,
	"google.protobuf.Int64Value":  true,
	"google.protobuf.UInt64Value": true,
	"google.protobuf.Int32Value":  true,
	"google.protobuf.UInt32Value": true,
	"google.protobuf.BoolValue":   true,
	"google.protobuf.StringValue": true,
	"google.protobuf.BytesValue":  true,
}

const anyName protoreflect.FullName = "google.protobuf.Any"

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// message checks n as a value of the message md.
func (w *schemaWalker) message(n *yaml.Node, md protoreflect.MessageDescriptor, path string) {
	n = resolve(n)
	if n == nil || isNull(n) || jsonSpecial[md.FullName()] {
		return
	}
	if w.visits++; w.visits == maxVisits {
		w.report(n, path, "more than %d objects once aliases are expanded", maxVisits)
	}
	if w.visits >= maxVisits {
		return
	}
	if md.FullName() == anyName {
		w.any(n, path)
		return
	}
	if n.Kind != yaml.MappingNode {
		return // a type error protojson reports
	}
	w.fields(n, md, path, "")
}

// any checks an Any: its @type must resolve, and its other keys must be
// fields of that type.
func (w *schemaWalker) any(n *yaml.Node, path string) {
	if n.Kind != yaml.MappingNode {
		return
	}
	var url *yaml.Node
	for _, p := range pairs(n) {
		if p.key.Value == "@type" {
			url = resolve(p.value)
		}
	}
	if url == nil {
		w.report(n, path, "google.protobuf.Any without @type")
		return
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url.Value)
	if err != nil {
		w.report(url, path, "unknown @type %q: misspelled, or an extension this checker does not link in", url.Value)
		return
	}
	md := mt.Descriptor()
	if jsonSpecial[md.FullName()] {
		return // {"@type": ..., "value": ...}
	}
	w.fields(n, md, path+"<"+string(md.Name())+">", "@type")
}

// fields checks every key of the mapping n as a field of md.
func (w *schemaWalker) fields(n *yaml.Node, md protoreflect.MessageDescriptor, path, skip string) {
	seen := make(map[string]bool)
	for _, p := range pairs(n) {
		key := p.key.Value
		if key == skip {
			continue
		}
		if seen[key] {
			w.report(p.key, path, "duplicate key %q", key)
			continue
		}
		seen[key] = true
		fd := md.Fields().ByName(protoreflect.Name(key))
		if fd == nil {
			fd = md.Fields().ByJSONName(key)
		}
		if fd == nil {
			w.report(p.key, path, "unknown field %q in %s%s", key, md.FullName(), suggest(key, md))
			continue
		}
		fpath := join2(path, key)
		if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts.GetDeprecated() {
			w.report(p.key, fpath, "field %q of %s is deprecated", key, md.FullName())
		}
		w.field(p.value, fd, fpath)
	}
}

func (w *schemaWalker) field(v *yaml.Node, fd protoreflect.FieldDescriptor, path string) {
	v = resolve(v)
	if v == nil || isNull(v) {
		return
	}
	switch {
	case fd.IsList():
		if v.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range v.Content {
			w.value(item, fd, path+"["+itemName(item, i)+"]")
		}
	case fd.IsMap():
		if v.Kind != yaml.MappingNode {
			return
		}
		for _, p := range pairs(v) {
			w.value(p.value, fd.MapValue(), path+"["+p.key.Value+"]")
		}
	default:
		w.value(v, fd, path)
	}
}

func (w *schemaWalker) value(v *yaml.Node, fd protoreflect.FieldDescriptor, path string) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		w.message(v, fd.Message(), path)
	case protoreflect.EnumKind:
		w.enum(v, fd.Enum(), path)
	}
}

func (w *schemaWalker) enum(v *yaml.Node, ed protoreflect.EnumDescriptor, path string) {
	v = resolve(v)
	if v == nil || v.Kind != yaml.ScalarNode || isNull(v) {
		return
	}
	if w.onEnum != nil {
		w.onEnum(v)
	}
	if _, err := strconv.ParseInt(v.Value, 10, 32); err == nil {
		return // protojson accepts numbers
	}
	ev := ed.Values().ByName(protoreflect.Name(v.Value))
	if ev == nil {
		w.report(v, path, "invalid value %q for enum %s (one of %s)", v.Value, ed.FullName(), enumNames(ed))
		return
	}
	if opts, ok := ev.Options().(*descriptorpb.EnumValueOptions); ok && opts.GetDeprecated() {
		w.report(v, path, "enum value %q of %s is deprecated", v.Value, ed.FullName())
	}
}

type pair struct{ key, value *yaml.Node }

// pairs lists the key/value pairs of a mapping with YAML merge keys (<<)
// expanded: the mapping's own keys first, then merged keys it does not
// override, earlier merged mappings winning over later ones.
func pairs(n *yaml.Node) []pair {
	return appendPairs(nil, n, 0)
}

// maxMergeDepth bounds merges of merges (and alias cycles through them).
const maxMergeDepth = 16

func appendPairs(out []pair, n *yaml.Node, depth int) []pair {
	var merged []*yaml.Node
	start := len(out)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Tag == "!!merge" {
			merged = append(merged, resolve(v))
			continue
		}
		out = append(out, pair{k, v})
	}
	if depth >= maxMergeDepth {
		return out
	}
	has := func(key string) bool {
		for _, p := range out[start:] {
			if p.key.Value == key {
				return true
			}
		}
		return false
	}
	add := func(m *yaml.Node) {
		if m == nil || m.Kind != yaml.MappingNode {
			return
		}
		for _, p := range appendPairs(nil, m, depth+1) {
			if !has(p.key.Value) {
				out = append(out, p)
			}
		}
	}
	for _, v := range merged {
		switch {
		case v == nil:
		case v.Kind == yaml.MappingNode:
			add(v)
		case v.Kind == yaml.SequenceNode:
			for _, m := range v.Content {
				add(resolve(m))
			}
		}
	}
	return out
}

// itemName names a list item by its name field, else by its index.
func itemName(item *yaml.Node, i int) string {
	if item = resolve(item); item.Kind == yaml.MappingNode {
		for _, p := range pairs(item) {
			if p.key.Value == "name" {
				if v := resolve(p.value); v.Kind == yaml.ScalarNode && v.Value != "" {
					return v.Value
				}
			}
		}
	}
	return strconv.Itoa(i)
}

func join2(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func enumNames(ed protoreflect.EnumDescriptor) string {
	vals := ed.Values()
	names := make([]string, 0, vals.Len())
	for i := range vals.Len() {
		names = append(names, string(vals.Get(i).Name()))
	}
	const show = 12
	if len(names) > show {
		return strings.Join(names[:show], ", ") + ", ..."
	}
	return strings.Join(names, ", ")
}

// suggest names the field of md closest to a misspelled key, if one is close.
func suggest(key string, md protoreflect.MessageDescriptor) string {
	type candidate struct {
		name string
		dist int
	}
	var best []candidate
	fields := md.Fields()
	for i := range fields.Len() {
		name := string(fields.Get(i).Name())
		if d := distance(key, name); d <= max(2, len(name)/4) {
			best = append(best, candidate{name, d})
		}
	}
	if len(best) == 0 {
		return ""
	}
	sort.Slice(best, func(i, j int) bool {
		if best[i].dist != best[j].dist {
			return best[i].dist < best[j].dist
		}
		return best[i].name < best[j].name
	})
	return fmt.Sprintf(" (did you mean %q?)", best[0].name)
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
