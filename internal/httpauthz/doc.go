// Package httpauthz is the HTTP forward-auth front end: it answers the
// authorization requests of Envoy's ext_authz http_service, nginx
// auth_request, Traefik ForwardAuth and Caddy forward_auth with the same
// pipeline as the gRPC front end. It turns the authorization request into a
// check.Request and the check.Verdict into an HTTP response; it knows nothing
// else of the decision.
//
// # The original request
//
// A forward-auth request describes the request the proxy is about to pass
// on. Each proxy has its convention (Options.Convention; Auto reads them all):
//
//	proxy                 method                   path and query         host                          scheme
//	nginx auth_request    X-Original-Method, else  X-Original-URI         X-Forwarded-Host, else Host   X-Forwarded-Proto
//	                      the subrequest's own
//	ingress-nginx         X-Original-Method        X-Original-URL         X-Original-URL                X-Original-URL
//	Traefik ForwardAuth   X-Forwarded-Method       X-Forwarded-Uri        X-Forwarded-Host              X-Forwarded-Proto
//	Caddy forward_auth    X-Forwarded-Method       X-Forwarded-Uri        X-Forwarded-Host              X-Forwarded-Proto
//	Envoy http_service    the request's own        own, minus PathPrefix  Host                          X-Forwarded-Proto
//
// A method header counts only next to the URI header of its convention.
// nginx's auth subrequest keeps the original method and headers but not the
// URI or the host: the configuration sets them. The other headers of the
// original request (Authorization, Cookie, Mcp-Session-Id, Mcp-Method,
// Mcp-Name, the lineage headers) reach the check as they are with nginx,
// Traefik and Caddy; Envoy sends only Host, Method, Path, Content-Length,
// Authorization and what authorization_request.allowed_headers adds (list
// Cookie, the Mcp-* and the lineage headers).
//
// The handler's own query parameter "route" names the route, like Envoy's
// context_extensions: "proxy_pass http://extauthz-http/check?route=files".
//
// # Trust
//
// Forwarding headers are honored only from Options.TrustedProxies (loopback
// by default); from any other peer the request is taken as itself. The
// answer goes to whoever asked, so a client that reaches the service
// directly gains nothing by asking about another request; the risk is a
// proxy that relays a client's headers. Traefik, Caddy and nginx pass every
// client header on to the authorization request, each overwriting only the
// headers of its own convention. A client could therefore add the headers of
// another convention (X-Original-URI behind Traefik, X-Forwarded-Uri behind
// nginx) to have a public path checked instead of the real one. Auto refuses
// (400) a request whose descriptions of the original request disagree, and a
// header repeated with different values; naming the convention ignores the
// others entirely, which is the setting for production. A URI with "." or
// ".." segments (also percent-encoded) is refused: the path checked must be
// the path the upstream serves. nginx must set X-Forwarded-Host itself (its
// auth subrequest otherwise carries the client's).
//
// # The answer
//
// Allowed: 200, with every header the verdict sets upstream (X-User-Id,
// X-Session-Id, the claim and lineage headers) in the response, and
// RemoveHeader (X-Envoy-Auth-Headers-To-Remove) listing the owned headers to
// strip from the upstream request. Each proxy applies them its way:
//
//   - Envoy http_service: authorization_response.allowed_upstream_headers
//     matching the identity and lineage headers; Envoy removes the listed
//     headers by itself.
//   - nginx: "auth_request_set $extauthz_user $upstream_http_x_user_id;" and
//     "proxy_set_header X-User-Id $extauthz_user;" for every owned header.
//     An empty variable removes the header, so a client's copy never reaches
//     the upstream; set "proxy_set_header Authorization "";" unless a route
//     forwards the token.
//   - Traefik: authResponseHeaders listing every owned header; Traefik
//     deletes each listed header from the request before copying the
//     answer's, which removes forgeries.
//   - Caddy: copy_headers listing every owned header (recent versions delete
//     a listed header the answer lacks; on older ones add
//     "request_header -X-Session-Id" and the like before forward_auth).
//
// Denied: the verdict's status, headers (WWW-Authenticate, Content-Type,
// Retry-After) and body (a JSON-RPC error for MCP and A2A calls). Envoy,
// Traefik and Caddy return all three to the client. nginx auth_request
// understands only 2xx, 401 and 403, and answers 500 for anything else (a
// malformed request, 400, or keys not loaded yet, 503); it never forwards
// the body, and copies WWW-Authenticate only on 401. For the 403
// insufficient_scope challenge:
//
//	auth_request_set $extauthz_www_authenticate $upstream_http_www_authenticate;
//	error_page 403 = @extauthz_403;
//	location @extauthz_403 {
//	    add_header WWW-Authenticate $extauthz_www_authenticate always;
//	    return 403;
//	}
//
// # Protected resource metadata
//
// The pipeline answers GET /.well-known/oauth-protected-resource[/path]
// itself (RFC 9728). Here that is a 200 with the document: requested at the
// service directly, the client gets it; through a forward-auth proxy a 200 is
// an allow, the proxy passes the request on and the upstream answers it (no
// proxy returns the body of a 2xx authorization answer). Route that path to
// the service instead, with the original host, e.g. for nginx:
//
//	location ^~ /.well-known/oauth-protected-resource {
//	    proxy_pass http://extauthz-http;
//	    proxy_set_header Host $http_host;
//	    proxy_set_header X-Forwarded-Proto $scheme;
//	}
//
// # The body
//
// Envoy (with_request_body) and Traefik (forwardBody) can send the request
// body; it becomes check.Request.Body, cut at Options.MaxBodyBytes and then
// marked partial, which the pipeline never trusts. nginx auth_request and
// Caddy forward_auth never send it. Without the body:
//
//   - JSON-RPC method and tool rules need the MCP 2026-07-28 Mcp-Method and
//     Mcp-Name headers; a POST naming neither is denied on routes with rules.
//   - The -32020 header/body mismatch check cannot run (nothing to compare).
//   - A2A lineage cannot start from params.message.contextId; the root is the
//     Mcp-Session-Id, the token's session or a new id instead.
//   - JSON-RPC denials cannot echo the request id.
//   - Tokens in MCP params._meta (token_in_meta) are not found.
package httpauthz
