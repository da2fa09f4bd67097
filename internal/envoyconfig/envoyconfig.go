// Package envoyconfig checks an Envoy bootstrap configuration offline, without
// Envoy: the YAML is decoded strictly into go-control-plane's v3 Bootstrap with
// every typed_config resolved, the API's validation rules run on it and inside
// every google.protobuf.Any (which the top-level validation does not enter),
// and the names Envoy only resolves at start-up are cross-checked: clusters
// that routes and filters name exist, a gRPC cluster speaks HTTP/2, the router
// is the last HTTP filter, per-route filter configs name a filter of their
// connection manager.
//
// It cannot prove that Envoy accepts a configuration, but it catches what
// usually breaks one: misspelled fields, bad enum values, unknown extension
// types, deprecated fields, out-of-range values, missing settings and dangling
// names, with the YAML line where one is known.
package envoyconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	k8syaml "sigs.k8s.io/yaml"
)

// MaxSize bounds the configuration Check and Parse accept.
const MaxSize = 4 << 20

// maxProblems bounds how many problems one check reports.
const maxProblems = 50

// A Problem is one thing wrong with a configuration.
type Problem struct {
	// Line is the 1-based line in the YAML document, 0 when unknown (the
	// checks that run on the decoded configuration know only the path).
	Line int
	// Path says where in the configuration, for example
	// static_resources.clusters[extauthz].load_assignment. List items are
	// named by their name field when they have one, by index otherwise.
	Path string
	// Msg says what is wrong.
	Msg string
}

func (p *Problem) Error() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Check parses an Envoy bootstrap (YAML or JSON) strictly and validates it.
// The error joins every [Problem] found, up to a bound; nil means the
// configuration passed every check.
func Check(doc []byte) error {
	b, err := Parse(doc)
	if err != nil {
		return err
	}
	return Validate(b)
}

// Parse decodes an Envoy bootstrap (YAML or JSON) strictly: an unknown field,
// a bad enum value, a duplicate key, an @type that names no linked-in message
// or a deprecated field is an error, reported with its YAML line. It does not
// run the validation rules; see [Validate].
func Parse(doc []byte) (*bootstrapv3.Bootstrap, error) {
	if len(doc) > MaxSize {
		return nil, fmt.Errorf("configuration is %d bytes, more than the %d accepted", len(doc), MaxSize)
	}
	root, err := decodeYAML(doc)
	if err != nil {
		return nil, err
	}
	// The conversion refuses excessive aliasing, so it runs before the
	// schema walk, which follows aliases.
	js, err := k8syaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("YAML to JSON: %w", err)
	}
	var w schemaWalker
	w.message(root, (&bootstrapv3.Bootstrap{}).ProtoReflect().Descriptor(), "")
	if len(w.problems) > 0 {
		return nil, join(w.problems)
	}
	// The schema walk is lenient where it is unsure; protojson is the
	// authority on what decodes.
	var b bootstrapv3.Bootstrap
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, &b); err != nil {
		return nil, fmt.Errorf("decode Bootstrap: %w", err)
	}
	return &b, nil
}

// Validate runs the API's validation rules on b and inside every Any in it,
// and cross-checks the names Envoy resolves at start-up.
func Validate(b *bootstrapv3.Bootstrap) error {
	v := &validator{}
	v.bootstrap(b)
	if len(v.problems) > 0 {
		return join(v.problems)
	}
	return nil
}

// decodeYAML returns the document node of the single YAML document in doc.
func decodeYAML(doc []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty configuration")
		}
		return nil, fmt.Errorf("YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("YAML: more than one document; a bootstrap is one document")
	}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		return root.Content[0], nil
	}
	return &root, nil
}

func join(problems []*Problem) error {
	errs := make([]error, 0, len(problems)+1)
	for i, p := range problems {
		if i == maxProblems {
			errs = append(errs, fmt.Errorf("... and %d more problems", len(problems)-maxProblems))
			break
		}
		errs = append(errs, p)
	}
	return errors.Join(errs...)
}
