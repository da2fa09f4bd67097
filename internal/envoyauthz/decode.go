package envoyauthz

import (
	"encoding/json"
	"errors"
	"fmt"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// DecodeCheckRequest reads a CheckRequest written as protojson: the request
// itself, an AttributeContext alone (as some tools log it), or a document
// whose "attributes" member is one (OPA's input, with extra members).
func DecodeCheckRequest(b []byte) (*authv3.CheckRequest, error) {
	req := &authv3.CheckRequest{}
	strictErr := protojson.Unmarshal(b, req)
	if strictErr == nil {
		return req, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if raw, ok := top["attributes"]; ok {
		req = &authv3.CheckRequest{Attributes: &authv3.AttributeContext{}}
		if err := protojson.Unmarshal(raw, req.Attributes); err != nil {
			return nil, fmt.Errorf("attributes: %w", err)
		}
		return req, nil
	}
	if _, ok := top["request"]; ok {
		attrs := &authv3.AttributeContext{}
		if err := protojson.Unmarshal(b, attrs); err != nil {
			return nil, fmt.Errorf("attribute context: %w", err)
		}
		return &authv3.CheckRequest{Attributes: attrs}, nil
	}
	return nil, errors.Join(errors.New("neither a CheckRequest nor an AttributeContext"), strictErr)
}
