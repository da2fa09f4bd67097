package envoytest

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// captureFS holds CheckRequests logged from real Envoys (or written by the
// authors of ext_authz servers), copied verbatim; see its README for sources.
//
//go:embed testdata/captures/*.json
var captureFS embed.FS

const captureDir = "testdata/captures"

// Capture is one real CheckRequest.
type Capture struct {
	// Name is the capture's file name without ".json".
	Name    string
	Request *authv3.CheckRequest
}

// captureSource says where in a capture file the message sits.
type captureSource struct {
	file string
	// jsonPath leads to the message: object keys and array indexes.
	jsonPath []string
	// attributes: the message is an AttributeContext, not a CheckRequest.
	attributes bool
	// goJSON: the message is in Go's encoding/json form, not protojson.
	goJSON bool
}

var captureSources = []captureSource{
	{file: "01-opa-envoy-plugin-istio-ingress-http11.json"},
	{file: "02-opa-envoy-plugin-context-extensions-metadata.json"},
	{file: "03-opa-envoy-plugin-grpc-raw-body.json"},
	{file: "04-opa-docs-envoy-primer-v3-input.json", jsonPath: []string{"attributes"}, attributes: true},
	{file: "05-authorino-observability-log-apikey.log.json", jsonPath: []string{"object"}, attributes: true, goJSON: true},
	{file: "06-kyverno-envoy-plugin-istio-attributecontext.json", attributes: true},
	{file: "07-aperture-classifier-preview-k6-post.json", jsonPath: []string{"samples", "0", "attributes"}, attributes: true},
}

// Captures decodes every capture, in file order, strictly: an unknown field
// or a malformed value is an error.
func Captures() ([]Capture, error) {
	out := make([]Capture, 0, len(captureSources))
	for _, src := range captureSources {
		req, err := src.decode()
		if err != nil {
			return nil, fmt.Errorf("envoytest: capture %s: %w", src.file, err)
		}
		out = append(out, Capture{Name: strings.TrimSuffix(src.file, ".json"), Request: req})
	}
	return out, nil
}

func (src captureSource) decode() (*authv3.CheckRequest, error) {
	raw, err := captureFS.ReadFile(path.Join(captureDir, src.file))
	if err != nil {
		return nil, err
	}
	msg, err := extractJSON(raw, src.jsonPath)
	if err != nil {
		return nil, err
	}
	if src.goJSON {
		if msg, err = normaliseGoJSON(msg); err != nil {
			return nil, err
		}
	}
	strict := protojson.UnmarshalOptions{} // unknown fields are errors
	req := &authv3.CheckRequest{}
	var target proto.Message = req
	if src.attributes {
		req.Attributes = &authv3.AttributeContext{}
		target = req.Attributes
	}
	if err := strict.Unmarshal(msg, target); err != nil {
		return nil, err
	}
	return req, nil
}

// extractJSON returns the raw JSON found by following jsonPath from the top.
func extractJSON(raw []byte, jsonPath []string) ([]byte, error) {
	cur := json.RawMessage(raw)
	for _, step := range jsonPath {
		if i, err := strconv.Atoi(step); err == nil {
			var arr []json.RawMessage
			if err := json.Unmarshal(cur, &arr); err != nil {
				return nil, fmt.Errorf("at %q: %w", step, err)
			}
			if i < 0 || i >= len(arr) {
				return nil, fmt.Errorf("at %q: index out of range (%d elements)", step, len(arr))
			}
			cur = arr[i]
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return nil, fmt.Errorf("at %q: %w", step, err)
		}
		next, ok := obj[step]
		if !ok {
			return nil, fmt.Errorf("no key %q", step)
		}
		cur = next
	}
	return cur, nil
}

// normaliseGoJSON turns a message that Go's encoding/json printed from the
// generated structs into protojson: a oneof shows up as its Go interface
// field wrapping its Go wrapper type ({"Address":{"SocketAddress":{...}}},
// {"PortSpecifier":{"PortValue":8000}}), which becomes the oneof member
// ({"socketAddress":{...}}, {"portValue":8000}); a Timestamp shows up as
// {"seconds":s,"nanos":n}, which becomes RFC 3339. Snake-case field names
// need nothing: protojson accepts them.
func normaliseGoJSON(msg []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.UseNumber() // keep numbers exactly as printed
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	v, err := normaliseValue(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func normaliseValue(v any) (any, error) {
	switch t := v.(type) {
	case []any:
		for i := range t {
			n, err := normaliseValue(t[i])
			if err != nil {
				return nil, err
			}
			t[i] = n
		}
		return t, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			val, err := normaliseValue(val)
			if err != nil {
				return nil, err
			}
			if k == "time" {
				if val, err = goTimestamp(val); err != nil {
					return nil, fmt.Errorf("time: %w", err)
				}
			}
			if member, inner, ok := oneofWrapper(k, val); ok {
				k, val = member, inner
			}
			out[k] = val
		}
		return out, nil
	default:
		return v, nil
	}
}

// oneofWrapper recognises {"Address":{"SocketAddress":x}}: a capitalised key
// (a Go interface field) holding an object with one capitalised key (the Go
// wrapper type's field). It returns the oneof member's JSON name and x.
func oneofWrapper(key string, val any) (member string, inner any, ok bool) {
	obj, isObj := val.(map[string]any)
	if !startsUpper(key) || !isObj || len(obj) != 1 {
		return "", nil, false
	}
	for k, v := range obj {
		if startsUpper(k) {
			r, size := utf8.DecodeRuneInString(k)
			return string(unicode.ToLower(r)) + k[size:], v, true
		}
	}
	return "", nil, false
}

func startsUpper(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r)
}

// goTimestamp turns {"seconds":s,"nanos":n} into an RFC 3339 string and
// leaves any other value alone.
func goTimestamp(v any) (any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return v, nil
	}
	var secs, nanos int64
	for k, val := range obj {
		n, isNum := val.(json.Number)
		if !isNum || (k != "seconds" && k != "nanos") {
			return v, nil
		}
		i, err := n.Int64()
		if err != nil {
			return nil, err
		}
		if k == "seconds" {
			secs = i
		} else {
			nanos = i
		}
	}
	return time.Unix(secs, nanos).UTC().Format(time.RFC3339Nano), nil
}
