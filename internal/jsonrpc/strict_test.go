package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// The strict reference decoder: what a careful reader of RFC 8259 and
// JSON-RPC 2.0 makes of a body, built only on encoding/json's tokenizer.
// It refuses every input on which mainstream decoders are known to
// disagree: invalid UTF-8 or a byte order mark (replaced or skipped by
// some), a duplicate key anywhere (first wins in some, last in others),
// trailing data (ignored by stream decoders such as the SDKs'), and, in
// the objects upstreams decode into structs, a key that matches one of the
// members we read only case-insensitively (Go's encoding/json matches it,
// the go-sdk's decoder does not). Parse must be at least this strict: when
// Parse accepts a body, the reference accepts it and reads the same
// values.

// jvalue is a decoded JSON value with its object members in order.
type jvalue struct {
	kind    kind // null, str, num, boolean, object, array
	str     string
	num     json.Number
	members []jmember
	items   []jvalue
}

type jmember struct {
	key   string
	value jvalue
}

var errStrict = errors.New("strict: refused")

// strictDecode decodes body strictly, nil and errStrict when it refuses.
func strictDecode(body []byte) (*jvalue, error) {
	if !utf8.Valid(body) || bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) || !json.Valid(body) {
		return nil, errStrict
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := strictValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errStrict // trailing data
	}
	return &v, nil
}

func strictValue(dec *json.Decoder, depth int) (jvalue, error) {
	if depth > MaxDepth {
		return jvalue{}, errStrict
	}
	tok, err := dec.Token()
	if err != nil {
		return jvalue{}, errStrict
	}
	switch t := tok.(type) {
	case nil:
		return jvalue{kind: null}, nil
	case bool:
		return jvalue{kind: boolean}, nil
	case json.Number:
		return jvalue{kind: num, num: t}, nil
	case string:
		return jvalue{kind: str, str: t}, nil
	case json.Delim:
		if t == '[' {
			v := jvalue{kind: array}
			for dec.More() {
				item, err := strictValue(dec, depth+1)
				if err != nil {
					return jvalue{}, err
				}
				v.items = append(v.items, item)
			}
			_, err := dec.Token()
			return v, err
		}
		v := jvalue{kind: object}
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return jvalue{}, errStrict
			}
			key := k.(string)
			if seen[key] {
				return jvalue{}, errStrict // duplicate key
			}
			seen[key] = true
			val, err := strictValue(dec, depth+1)
			if err != nil {
				return jvalue{}, err
			}
			v.members = append(v.members, jmember{key, val})
		}
		_, err := dec.Token()
		return v, err
	}
	return jvalue{}, errStrict
}

// get returns the member key of an object (exact match), nil when absent
// or not an object.
func (v *jvalue) get(key string) *jvalue {
	if v == nil || v.kind != object {
		return nil
	}
	for i := range v.members {
		if v.members[i].key == key {
			return &v.members[i].value
		}
	}
	return nil
}

// text is the string v holds, "" for anything else.
func (v *jvalue) text() string {
	if v == nil || v.kind != str {
		return ""
	}
	return v.str
}

// structObjects are the objects upstreams decode into structs, by path, and
// the members of each we read: a key folding onto one of them is refused.
var structObjects = []struct {
	path    []string
	members []string
}{
	{nil, []string{"jsonrpc", "method", "id", "params", "result", "error"}},
	{[]string{"params"}, []string{"name", "uri", "_meta", "protocolVersion", "capabilities", "arguments", "message", "id", "taskId", "task_id", "contextId", "context_id", "parent"}},
	{[]string{"params", "message"}, []string{"contextId", "context_id", "taskId", "task_id", "referenceTaskIds", "reference_task_ids"}},
	{[]string{"params", "capabilities"}, []string{"elicitation"}},
	{[]string{"params", "capabilities", "elicitation"}, []string{"url"}},
	{[]string{"params", "_meta", "io.modelcontextprotocol/clientCapabilities"}, []string{"elicitation"}},
	{[]string{"params", "_meta", "io.modelcontextprotocol/clientCapabilities", "elicitation"}, []string{"url"}},
}

// foldsOntoMember reports whether some struct-decoded object of top has a
// key equal to one of its members only under Unicode case folding.
func foldsOntoMember(top *jvalue) bool {
	for _, so := range structObjects {
		obj := top
		for _, k := range so.path {
			obj = obj.get(k)
		}
		if obj == nil || obj.kind != object {
			continue
		}
		for _, m := range obj.members {
			for _, want := range so.members {
				if m.key != want && bytes.EqualFold([]byte(m.key), []byte(want)) {
					return true
				}
			}
		}
	}
	return false
}
