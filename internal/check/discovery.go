package check

import (
	"encoding/json"
	"strings"

	"github.com/extauthz/extauthz/internal/config"
)

// wellKnownResource is the RFC 9728 well-known prefix; the resource's path,
// if any, follows it.
const wellKnownResource = "/.well-known/oauth-protected-resource"

// resourceDocument is the RFC 9728 protected resource metadata.
type resourceDocument struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers,omitempty"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	ResourceName           string   `json:"resource_name,omitempty"`
	ResourceDocumentation  string   `json:"resource_documentation,omitempty"`
	// DPoPAlgs are the proof algorithms a DPoP-bound token may come with
	// (binding.go), on every route.
	DPoPAlgs []string `json:"dpop_signing_alg_values_supported"`
	// DPoPRequired and CertificateBound say the route takes only tokens
	// bound that way (sender_constrained).
	DPoPRequired     bool `json:"dpop_bound_access_tokens_required,omitempty"`
	CertificateBound bool `json:"tls_client_certificate_bound_access_tokens,omitempty"`
}

// protectedResource answers GET /.well-known/oauth-protected-resource[path]
// for the route serving path, so MCP servers need no code for discovery.
func (p *Policy) protectedResource(req *Request) (Verdict, bool) {
	if req.Method != "GET" && req.Method != "HEAD" {
		return Verdict{}, false
	}
	path := pathOnly(req.Path)
	rest, ok := strings.CutPrefix(path, wellKnownResource)
	if !ok || (rest != "" && rest[0] != '/') {
		return Verdict{}, false
	}
	if rest == "" {
		rest = "/"
	}
	var r *Route
	if name := req.ContextExtensions["route"]; name != "" {
		r, ok = p.routes.ByName(name)
	} else {
		r, ok = p.routes.Match(req.Host, rest)
	}
	if !ok || r.resource.Disabled {
		return Verdict{}, false
	}
	doc := resourceDocument{
		Resource:               r.resourceURL(req),
		AuthorizationServers:   r.resource.AuthorizationServers,
		ScopesSupported:        r.resource.ScopesSupported,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           r.resource.ResourceName,
		ResourceDocumentation:  r.resource.ResourceDocumentation,
		DPoPAlgs:               dpopAlgList,
		DPoPRequired:           r.senderConstrained == config.SenderDPoP,
		CertificateBound:       r.senderConstrained == config.SenderMTLS,
	}
	if len(doc.AuthorizationServers) == 0 {
		doc.AuthorizationServers = r.issuerURLs
	}
	if len(doc.ScopesSupported) == 0 {
		doc.ScopesSupported = r.allScopes
	}
	body, _ := json.Marshal(doc)
	return Verdict{
		Outcome: ResourceMetadata,
		Route:   r.Name,
		Body:    body,
		// A forward-auth proxy treats the 200 as an allow: nobody is
		// authenticated, so strip every identity header.
		Remove: r.publicRemove(),
		ResponseHeaders: []Header{
			{Name: "content-type", Value: "application/json"},
			{Name: "cache-control", Value: "public, max-age=300"},
			// Browser-based MCP clients fetch this cross-origin.
			{Name: "access-control-allow-origin", Value: "*"},
		},
	}, true
}

// resourceURL is the route's resource identifier: configured, or the
// request's origin with the route's path prefix.
func (r *Route) resourceURL(req *Request) string {
	if r.resource.Resource != "" {
		return r.resource.Resource
	}
	return r.origin(req) + strings.TrimSuffix(r.pathPrefix, "/")
}

// metadataURL is the RFC 9728 protected resource metadata URL named in
// challenges: configured, or derived like resourceURL with the path
// inserted after the well-known prefix.
func (r *Route) metadataURL(req *Request) string {
	if r.resourceMetadata != "" {
		return r.resourceMetadata
	}
	if req.Host == "" {
		return ""
	}
	return r.origin(req) + wellKnownResource + strings.TrimSuffix(r.pathPrefix, "/")
}

func (r *Route) origin(req *Request) string {
	scheme := req.Scheme
	if scheme != "http" && scheme != "https" {
		scheme = "https"
	}
	return scheme + "://" + req.Host
}
