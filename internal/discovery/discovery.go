// Package discovery finds an OAuth authorization server's or OpenID
// provider's metadata from its issuer identifier: the one implementation
// behind JWT key sets found by discovery (jwtauth), token endpoints found
// by discovery (exchange) and introspection endpoints found by discovery
// (introspect).
//
// Order: the RFC 8414 location first, then the OpenID Connect Discovery
// one. RFC 8414 section 3 inserts the well-known path between the host and
// the issuer's path ("https://idp/.well-known/oauth-authorization-server/t/1"
// for the issuer "https://idp/t/1"), so that issuers sharing a host never
// share a metadata document; OpenID Connect Discovery 1.0 section 4 appends
// it ("https://idp/t/1/.well-known/openid-configuration"). Both documents
// must name the issuer they were fetched for (RFC 8414 section 3.3, OpenID
// Connect Discovery section 4.3); a document naming another is skipped.
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/extauthz/extauthz/internal/bounded"
)

// Metadata is what this service reads of an issuer's metadata document.
type Metadata struct {
	Issuer        string `json:"issuer"`
	JWKSURI       string `json:"jwks_uri"`
	TokenEndpoint string `json:"token_endpoint"`
	// IntrospectionEndpoint is RFC 8414's introspection_endpoint (RFC 7662).
	IntrospectionEndpoint string `json:"introspection_endpoint"`
}

// URLs are the metadata locations of issuer, in the order Discover tries
// them; nil when issuer is not an absolute URL.
func URLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil
	}
	path := strings.TrimSuffix(u.Path, "/")
	oauth := url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/oauth-authorization-server" + path}
	oidc := url.URL{Scheme: u.Scheme, Host: u.Host, Path: path + "/.well-known/openid-configuration"}
	return []string{oauth.String(), oidc.String()}
}

// Discover fetches issuer's metadata from the first location of URLs that
// serves a document naming issuer, each read with at most limit bytes, and
// checks the field it needs: valid (for example JWKSURI or TokenEndpoint)
// must accept the document. Errors name URLs without credentials or query.
func Discover(ctx context.Context, client *http.Client, issuer string, limit int64, valid func(Metadata) error) (Metadata, error) {
	urls := URLs(issuer)
	if urls == nil {
		return Metadata{}, fmt.Errorf("discovery: issuer %q is not an absolute URL", bounded.Redact(issuer))
	}
	var errs []error
	for _, u := range urls {
		doc, err := bounded.Get(ctx, client, u, "application/json", limit)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var md Metadata
		if err := json.Unmarshal(doc, &md); err != nil {
			errs = append(errs, fmt.Errorf("%s: decode metadata: %w", bounded.Redact(u), err))
			continue
		}
		if md.Issuer != issuer {
			errs = append(errs, fmt.Errorf("%s: metadata names issuer %q", bounded.Redact(u), bounded.Redact(md.Issuer)))
			continue
		}
		if err := valid(md); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", bounded.Redact(u), err))
			continue
		}
		return md, nil
	}
	return Metadata{}, fmt.Errorf("discovery: %w", errors.Join(errs...))
}

// JWKSURI accepts metadata whose jwks_uri is an http(s) URL.
func JWKSURI(md Metadata) error { return field("jwks_uri", md.JWKSURI) }

// TokenEndpoint accepts metadata whose token_endpoint is an http(s) URL.
func TokenEndpoint(md Metadata) error { return field("token_endpoint", md.TokenEndpoint) }

// IntrospectionEndpoint accepts metadata whose introspection_endpoint is an
// http(s) URL.
func IntrospectionEndpoint(md Metadata) error {
	return field("introspection_endpoint", md.IntrospectionEndpoint)
}

func field(name, v string) error {
	if err := CheckHTTPURL(v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// CheckHTTPURL accepts an absolute http or https URL with a host.
func CheckHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return bounded.ScrubURLError(err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("%q is not an http(s) URL", bounded.Redact(s))
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", bounded.Redact(s))
	}
	return nil
}
