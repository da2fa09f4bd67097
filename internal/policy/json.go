package policy

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// ErrNoArguments is an expression reading mcp.arguments on a request whose
// body was not read in full: the rule cannot be decided, so it denies.
var ErrNoArguments = errors.New("policy: the call's arguments are not available (body not read in full)")

var (
	errNotObject = errors.New("policy: not an object of the expected type")
	errMalformed = errors.New("policy: arguments are not a JSON object")
	// errKeyCase: the object holds a key equal to the one read only under
	// case folding, or a value read whole (a list, an object converted or
	// compared) holds an object with two such keys, at any depth. Go's
	// encoding/json (mcp-go's BindArguments) and .NET's web defaults bind
	// such keys to the same field, the last one winning, so the tool may
	// read another value than the expression.
	errKeyCase = errors.New("policy: the arguments hold keys equal but for case, which tools may read as one another")
)

// mcpArguments returns the call's arguments as a CEL map that decodes
// nothing until a member is read, and then only that member: a rule that
// reads mcp.arguments.path costs a scan of the object's top level and the
// decoding of one string, whatever else the arguments hold.
func mcpArguments(m *MCP) any {
	if !m.BodyComplete {
		return ErrNoArguments
	}
	if m.Arguments == "" {
		return emptyMap
	}
	if m.args.raw != m.Arguments || !m.args.indexed {
		m.args.reset(m.Arguments)
	}
	return &m.args
}

// smallObject is how many members a jsonObject indexes without allocating;
// bigObject from how many it looks keys up in a map rather than a scan.
const (
	smallObject = 8
	bigObject   = 16
)

// jsonObject is a JSON object as a CEL map(string, dyn), read lazily from
// its raw text. The text must be valid JSON in valid UTF-8 without
// duplicate keys (jsonrpc.Parse refuses other bodies); anything else reads
// as an error or as its bytes say, never a panic.
//
// On first use the top level is scanned once into an index of members;
// each member's value is decoded when first read and kept, so that an
// expression reading a member in a loop pays once. Members that are objects
// are jsonObjects too; arrays are decoded when read. A jsonObject belongs
// to one evaluation: it is not safe for concurrent use.
type jsonObject struct {
	raw     string
	indexed bool
	bad     bool // raw is not a JSON object
	members []member
	small   [smallObject]member
	byKey   map[string]int // for big objects: key -> index in members
	folds   map[string]int // for big objects: foldKey(key) -> how many keys
}

type member struct {
	key   string // the raw key token, quotes included
	value string // the raw value
	val   ref.Val
}

var (
	_       traits.Mapper = (*jsonObject)(nil)
	mapType               = types.MapType
)

// reset points o at raw. The inline array is not cleared: index
// overwrites every entry it uses.
func (o *jsonObject) reset(raw string) {
	o.raw, o.indexed, o.bad, o.members, o.byKey, o.folds = raw, false, false, nil, nil, nil
}

// index scans the top level once; it reports false when the text is not a
// JSON object.
func (o *jsonObject) index() bool {
	if o.indexed {
		return !o.bad
	}
	o.indexed = true
	o.members = o.small[:0]
	if !o.scan() {
		o.bad, o.members = true, nil
		return false
	}
	if len(o.members) > bigObject {
		o.byKey = make(map[string]int, len(o.members))
		o.folds = make(map[string]int, len(o.members))
		for i, m := range o.members {
			k, ok := decodeKey(m.key)
			if !ok {
				o.bad, o.members, o.byKey, o.folds = true, nil, nil, nil
				return false
			}
			o.byKey[k] = i
			o.folds[foldKey(k)]++
		}
	}
	return true
}

func (o *jsonObject) scan() bool {
	s := o.raw
	i := jsonrpc.SkipSpace(s, 0)
	if i >= len(s) || s[i] != '{' {
		return false
	}
	i = jsonrpc.SkipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return jsonrpc.SkipSpace(s, i+1) == len(s)
	}
	// Each iteration consumes at least one byte: bounded by len(s).
	for i < len(s) {
		if s[i] != '"' {
			return false
		}
		ke := jsonrpc.SkipString(s, i)
		if ke < 0 {
			return false
		}
		key := s[i:ke]
		i = jsonrpc.SkipSpace(s, ke)
		if i >= len(s) || s[i] != ':' {
			return false
		}
		vs := jsonrpc.SkipSpace(s, i+1)
		ve := jsonrpc.SkipValue(s, vs)
		if ve < 0 {
			return false
		}
		if c := s[vs]; c != '"' && c != '{' && c != '[' && !validScalar(s[vs:ve]) {
			return false
		}
		o.members = append(o.members, member{key: key, value: s[vs:ve]})
		i = jsonrpc.SkipSpace(s, ve)
		if i >= len(s) {
			return false
		}
		if s[i] == '}' {
			return jsonrpc.SkipSpace(s, i+1) == len(s)
		}
		if s[i] != ',' {
			return false
		}
		i = jsonrpc.SkipSpace(s, i+1)
	}
	return false
}

// Find implements traits.Mapper.
func (o *jsonObject) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false // JSON keys are strings: no other key is in it
	}
	if !o.index() {
		return types.WrapErr(errMalformed), false
	}
	at, folded := -1, false
	if o.byKey != nil {
		if i, ok := o.byKey[string(k)]; ok {
			at = i
		}
		n := o.folds[foldKey(string(k))]
		folded = n > 1 || at < 0 && n > 0
	} else {
		// Every key is looked at: one in another case may come before or
		// after the exact one.
		for i := range o.members {
			switch raw := o.members[i].key; {
			case keyEquals(raw, string(k)):
				at = i
			case foldsOnto(raw, string(k)):
				folded = true
			}
		}
	}
	if folded {
		return types.WrapErr(errKeyCase), false
	}
	if at < 0 {
		return nil, false
	}
	m := &o.members[at]
	if m.val == nil {
		m.val = decodeValue(m.value)
	}
	return m.val, true
}

// decodeKey unescapes a raw JSON string token.
func decodeKey(raw string) (string, bool) {
	body := raw[1 : len(raw)-1]
	if !strings.Contains(body, `\`) {
		return body, true
	}
	var s string
	if json.Unmarshal([]byte(raw), &s) != nil {
		return "", false
	}
	return s, true
}

// foldsOnto reports whether a raw JSON string token differs from the
// decoded key but equals it under Unicode case folding. Folding maps one
// byte to at most three (K, U+212A, is k), and two ASCII first bytes fold
// together only as one letter in either case: most keys end there.
func foldsOnto(rawKey, key string) bool {
	body := rawKey[1 : len(rawKey)-1]
	if strings.IndexByte(body, '\\') >= 0 {
		var ok bool
		if body, ok = decodeKey(rawKey); !ok {
			return false
		}
	}
	if len(key) == 0 || len(body) < len(key) || len(body) > 3*len(key) {
		return false
	}
	if c, w := body[0], key[0]; c < utf8.RuneSelf && w < utf8.RuneSelf && c|0x20 != w|0x20 {
		return false
	}
	return body != key && strings.EqualFold(body, key)
}

// foldKey is s with every rune replaced by one chosen member of its case
// folding orbit (foldRune): two keys are equal under strings.EqualFold
// exactly when their fold keys are. A key of ASCII without upper-case
// letters, nearly every argument name, is its own fold key and is not
// copied.
func foldKey(s string) string {
	folded := true
	for i := 0; i < len(s) && folded; i++ {
		folded = s[i] < utf8.RuneSelf && !('A' <= s[i] && s[i] <= 'Z')
	}
	if folded {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune is the member of r's case folding orbit standing for all of it:
// the ASCII lower-case letter when the orbit has one (k for K, k and the
// Kelvin sign), else its least rune.
func foldRune(r rune) rune {
	least := r
	for f := r; ; {
		if 'a' <= f && f <= 'z' {
			return f
		}
		least = min(least, f)
		if f = unicode.SimpleFold(f); f == r {
			return least
		}
	}
}

// foldLevel is an object or list foldedKeys is inside.
type foldLevel struct {
	object bool
	start  int                 // its first key in foldedKeys' keys
	folds  map[string]struct{} // from bigObject keys on: their fold keys
}

// foldedKeys reports whether some object in the JSON value v, at any
// depth, holds two keys equal under Unicode case folding (as
// strings.EqualFold and bytes.EqualFold compare them, which is how Go's
// encoding/json matches a key to a struct field), or twice the same key.
// v must be valid JSON (anything else reads as it may, never a panic).
// Objects of up to bigObject keys are compared pairwise without
// allocating, bigger ones through a set of fold keys.
func foldedKeys(v string) bool {
	folded, _ := scanKeys(v, -1)
	return folded
}

// scanKeys is foldedKeys, stopping (deep) when v nests deeper than
// maxDepth objects and arrays (maxDepth < 0: no limit).
func scanKeys(v string, maxDepth int) (folded, deep bool) {
	var levelBuf [16]foldLevel
	var keyBuf [32]string
	levels, keys := levelBuf[:0], keyBuf[:0]
	expectKey := false
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '{', '[':
			if len(levels) == maxDepth {
				return false, true
			}
			levels = append(levels, foldLevel{object: v[i] == '{', start: len(keys)})
			expectKey = v[i] == '{'
		case '}', ']':
			if len(levels) == 0 {
				return false, false
			}
			keys = keys[:levels[len(levels)-1].start]
			levels = levels[:len(levels)-1]
			expectKey = false
		case ',':
			expectKey = len(levels) > 0 && levels[len(levels)-1].object
		case ':':
			expectKey = false
		case '"':
			e := jsonrpc.SkipString(v, i)
			if e < 0 {
				return false, false
			}
			if expectKey {
				k, ok := decodeKey(v[i:e])
				if !ok {
					return false, false
				}
				if levels[len(levels)-1].repeats(&keys, k) {
					return true, false
				}
				expectKey = false
			}
			i = e - 1
		}
	}
	return false, false
}

// repeats adds key k to the object l and reports whether one of its keys
// before folds onto it.
func (l *foldLevel) repeats(keys *[]string, k string) bool {
	if l.folds != nil {
		f := foldKey(k)
		if _, ok := l.folds[f]; ok {
			return true
		}
		l.folds[f] = struct{}{}
		return false
	}
	own := (*keys)[l.start:]
	for _, prev := range own {
		if strings.EqualFold(prev, k) {
			return true
		}
	}
	if len(own) < bigObject {
		*keys = append(*keys, k)
		return false
	}
	l.folds = make(map[string]struct{}, 2*bigObject)
	for _, prev := range own {
		l.folds[foldKey(prev)] = struct{}{}
	}
	l.folds[foldKey(k)] = struct{}{}
	*keys = (*keys)[:l.start] // the set holds them now
	return false
}

// keyEquals compares a raw JSON string token with a decoded key.
func keyEquals(rawKey, key string) bool {
	body := rawKey[1 : len(rawKey)-1]
	if !strings.Contains(body, `\`) {
		return body == key
	}
	s, ok := decodeKey(rawKey)
	return ok && s == key
}

// decodeValue turns one raw JSON value into a CEL value.
func decodeValue(v string) ref.Val {
	if v == "" {
		return types.WrapErr(errMalformed)
	}
	switch v[0] {
	case '"':
		body := v[1 : len(v)-1]
		if !strings.Contains(body, `\`) {
			return types.String(body)
		}
		var s string
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			return types.WrapErr(errMalformed)
		}
		return types.String(s)
	case '{':
		return &jsonObject{raw: v}
	case '[':
		return decodeList(v)
	case 't':
		if v == "true" {
			return types.True
		}
	case 'f':
		if v == "false" {
			return types.False
		}
	case 'n':
		if v == "null" {
			return types.NullValue
		}
	default:
		if validNumber(v) {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				return types.Double(f)
			}
		}
	}
	return types.WrapErr(errMalformed)
}

// maxListDepth is how deep a list read whole may nest (encoding/json's
// limit): a deeper one is an error, not a list.
const maxListDepth = 10000

// decodeList turns a raw JSON array into a CEL list whose objects are
// jsonObjects, so that reading a member of one is refused like at the top
// level when the object holds the key in another case. A list holding,
// at any depth, an object with two keys equal under case folding is an
// error as a whole: an expression may read it whole (all, exists, size,
// ==), and a tool decoding it with encoding/json reads one key as the
// other.
func decodeList(v string) ref.Val {
	folded, deep := scanKeys(v, maxListDepth)
	switch {
	case deep:
		return types.WrapErr(errMalformed)
	case folded:
		return types.WrapErr(errKeyCase)
	}
	l, end := parseList(v, 0)
	if end < 0 || jsonrpc.SkipSpace(v, end) != len(v) {
		return types.WrapErr(errMalformed)
	}
	return l
}

// parseList reads the array starting at v[i] ('['): its value (an error
// when malformed) and the index just past it (-1 when malformed). Nested
// lists are read in the same pass, objects are left to be read lazily.
func parseList(v string, i int) (ref.Val, int) {
	elems := []ref.Val{}
	i = jsonrpc.SkipSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return types.NewRefValList(types.DefaultTypeAdapter, elems), i + 1
	}
	// Each iteration consumes at least one byte: bounded by len(v).
	for i < len(v) {
		var ev ref.Val
		var e int
		switch v[i] {
		case '[':
			ev, e = parseList(v, i)
		case '{':
			if e = jsonrpc.SkipValue(v, i); e > 0 {
				ev = &jsonObject{raw: v[i:e]}
			}
		default:
			if e = jsonrpc.SkipValue(v, i); e > 0 {
				ev = decodeValue(v[i:e])
			}
		}
		if e < 0 {
			return types.WrapErr(errMalformed), -1
		}
		if types.IsError(ev) {
			return ev, -1
		}
		elems = append(elems, ev)
		i = jsonrpc.SkipSpace(v, e)
		if i >= len(v) {
			break
		}
		if v[i] == ']' {
			return types.NewRefValList(types.DefaultTypeAdapter, elems), i + 1
		}
		if v[i] != ',' {
			break
		}
		i = jsonrpc.SkipSpace(v, i+1)
	}
	return types.WrapErr(errMalformed), -1
}

// Get implements traits.Indexer.
func (o *jsonObject) Get(key ref.Val) ref.Val {
	v, ok := o.Find(key)
	if !ok {
		if v != nil {
			return v
		}
		return types.NewErr("no such key: %v", key)
	}
	return v
}

// Contains implements traits.Container (the in operator).
func (o *jsonObject) Contains(key ref.Val) ref.Val {
	v, ok := o.Find(key)
	if !ok && v != nil && types.IsError(v) {
		return v
	}
	return types.Bool(ok)
}

// Size implements traits.Sizer.
func (o *jsonObject) Size() ref.Val {
	if !o.index() {
		return types.WrapErr(errMalformed)
	}
	return types.Int(len(o.members))
}

// Iterator implements traits.Iterable: over the keys, in document order.
func (o *jsonObject) Iterator() traits.Iterator {
	var list []ref.Val
	if o.index() {
		list = make([]ref.Val, len(o.members))
		for i, m := range o.members {
			list[i] = decodeValue(m.key)
		}
	}
	return types.NewRefValList(types.DefaultTypeAdapter, list).Iterator()
}

// native decodes the whole object.
func (o *jsonObject) native() (map[string]any, error) {
	if foldedKeys(o.raw) {
		return nil, errKeyCase
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(o.raw), &m); err != nil || m == nil {
		return nil, errMalformed
	}
	return m, nil
}

// ConvertToNative implements ref.Val.
func (o *jsonObject) ConvertToNative(t reflect.Type) (any, error) {
	m, err := o.native()
	if err != nil {
		return nil, err
	}
	if t.Kind() == reflect.Interface || t == reflect.TypeFor[map[string]any]() {
		return m, nil
	}
	return types.DefaultTypeAdapter.NativeToValue(m).ConvertToNative(t)
}

// ConvertToType implements ref.Val.
func (o *jsonObject) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return o
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from map to '%s'", t)
}

// Equal implements ref.Val: as the decoded map would compare.
func (o *jsonObject) Equal(other ref.Val) ref.Val {
	m, err := o.native()
	if err != nil {
		return types.WrapErr(err)
	}
	if oo, ok := other.(*jsonObject); ok {
		om, err := oo.native()
		if err != nil {
			return types.WrapErr(err)
		}
		other = types.DefaultTypeAdapter.NativeToValue(om)
	}
	return types.DefaultTypeAdapter.NativeToValue(m).Equal(other)
}

// Type implements ref.Val.
func (o *jsonObject) Type() ref.Type { return mapType }

// Value implements ref.Val.
func (o *jsonObject) Value() any {
	m, err := o.native()
	if err != nil {
		return nil
	}
	return m
}

func validScalar(v string) bool {
	return v == "true" || v == "false" || v == "null" || validNumber(v)
}

// validNumber reports whether v is a JSON number (RFC 8259): strconv would
// also take Inf, NaN, hex and underscores.
func validNumber(v string) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(v) && v[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(v) && v[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(v)
}
