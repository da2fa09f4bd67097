// Package httpauthz is the HTTP forward-auth front end: it answers the
// authorization requests of Envoy's ext_authz http_service, nginx
// auth_request, Traefik ForwardAuth and Caddy forward_auth with the same
// pipeline as the gRPC front end. It turns the authorization request into a
// check.Request and the check.Verdict into an HTTP response; it knows nothing
// else of the decision. Load shedding (limits.max_concurrent_checks) and the
// per-check trace span are the pipeline's, so they apply here as there.
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
// Caddy's forward_auth keeps the client's query on the check URL unless the
// URI it sets has one ("rewrite /check?"), so a route parameter is refused
// (400) when the check URL carries the original request's query and that
// names a route: the client could have chosen it.
//
// # Trust
//
// Forwarding headers are honored only from Options.TrustedProxies (loopback
// by default); from any other peer the request is taken as itself. The
// answer goes to whoever asked, so a client that reaches the service
// directly gains nothing by asking about another request; the risk is a
// proxy that relays a client's headers. With the Nginx and Forwarded
// conventions a request from another peer that carries the convention's URI
// header is refused (400): it is a proxy missing from the list, and its
// checks taken as themselves would all be of its own check path.
//
// Traefik, Caddy and nginx pass every client header on to the authorization
// request, each overwriting only the headers of its own convention. A client could therefore add the headers of
// another convention (X-Original-URI behind Traefik, X-Forwarded-Uri behind
// nginx) to have a public path checked instead of the real one. Auto refuses
// (400) a request whose descriptions of the original request disagree, and a
// header repeated with different values; naming the convention ignores the
// others entirely, which is the setting for production. A URI with "." or
// ".." segments (also percent-encoded) is refused: the path checked must be
// the path the upstream serves. nginx must set X-Forwarded-Host itself (its
// auth subrequest otherwise carries the client's).
//
// # The client certificate
//
// check.Request.ClientCert (for certificate-bound tokens, RFC 8705) comes
// from X-Forwarded-Client-Cert, only from Options.TrustedProxies (the same
// list that makes the forwarding headers believable) and only from its
// last element, the one the nearest proxy added: its Cert (URL-encoded
// PEM, hashed here) or else its Hash (64 hex digits); a Cert and a Hash
// that disagree are neither believed. Envoy and Istio write the header
// (forward_client_cert_details SANITIZE_SET or APPEND_FORWARD); the
// shipped nginx files set it to Cert="$ssl_client_escaped_cert" and the
// Caddyfile to Hash={http.request.tls.client.fingerprint}, overwriting a
// client's copy. A proxy that passes a client's header on unchanged
// (Traefik, nginx or Caddy without those lines) lets the client name any
// certificate: it must remove the header. Anything else, and any other
// peer, presents no certificate, so a bound token is refused. No second
// header (X-Client-Cert and the like) is read: every proxy would have to
// strip it too.
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
//   - nginx: "auth_request_set" and "proxy_set_header" for every owned
//     header (docs/forward-auth/nginx-location.conf). An empty variable
//     removes the header, so a client's copy never reaches the upstream;
//     Authorization is copied too, so that the client's token is removed
//     and an exchanged one set.
//   - Traefik: authResponseHeaders listing every owned header; Traefik
//     deletes each listed header from the request before copying the
//     answer's, which removes forgeries.
//   - Caddy: set each owned header from the answer and delete it where the
//     answer lacks it (docs/forward-auth/Caddyfile): Caddy 2.6's
//     copy_headers sends the literal placeholder instead.
//
// Refused: never a 2xx, which every forward-auth proxy takes for an allow.
// The verdict's status, headers (WWW-Authenticate, Content-Type,
// Retry-After) and body (a JSON-RPC error for MCP and A2A calls); a direct
// answer that Envoy returns as a 200 (the protected resource metadata, a URL
// elicitation) is a 403 here. With the Nginx and Forwarded conventions the
// refusal also names its full answer in AnswerHeader: the proxy fetches
// AnswerPath + id once and returns it to the client as it is, so that nginx
// (which turns statuses other than 401 and 403 into 500 and drops the body)
// and Caddy give the client what Envoy would. Answers are bounded, expire
// after seconds and are handed to trusted proxies only; a fetch that finds
// none gets 503. With the Nginx convention the challenge travels only in the
// fetched answer, since nginx copies a 401's WWW-Authenticate itself.
// docs/forward-auth.md has the proxy configurations, which the end-to-end
// tests run as they are.
//
// # Protected resource metadata
//
// The pipeline answers GET /.well-known/oauth-protected-resource[/path]
// itself (RFC 9728). Through nginx and Caddy it comes by the answer fetch.
// A request made to the service itself gets the document as a 200: with the
// Nginx and Forwarded conventions, a request for the metadata path without
// forwarding headers (Traefik routes it to the service); with the Envoy and
// Auto conventions and Options.PathPrefix set, a request outside the prefix.
//
// # The body
//
// Envoy (with_request_body), Traefik (forwardBody) and nginx with the njs
// recipe send the request body; it becomes check.Request.Body, cut at
// Options.MaxBodyBytes and then marked partial, which the pipeline never
// trusts. X-Envoy-Auth-Partial-Body is read only from trusted peers with the
// Envoy and Auto conventions (only Envoy sets it). nginx auth_request and
// Caddy forward_auth never send the body. Without it Mcp-Method and Mcp-Name
// are the client's claim: rules allow on them only on routes whose upstream
// checks them (upstream_validates_mcp_headers), the -32020 mismatch check
// cannot run, A2A lineage cannot start from params.message.contextId,
// JSON-RPC denials cannot echo the request id, and tokens in MCP
// params._meta are not found.
package httpauthz
