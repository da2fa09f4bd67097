// Package e2e holds the end-to-end tests: the service's HTTP forward-auth
// front end behind real proxies (nginx auth_request, nginx with njs, Caddy),
// configured with the files of docs/forward-auth as they are, in front of an
// MCP server and A2A agents built with the official SDKs, driven by the SDKs'
// own clients: the Go SDKs, the TypeScript MCP SDK v1 and v2 and the A2A
// JavaScript SDK (client and agent, A2A v1.0; also behind Envoy's ext_authz
// and ext_proc as envoytest speaks them) through the scripts in
// testdata/ts (their packages pinned in package-lock.json, installed by make
// deps with npm ci).
//
// The tests need nginx, its js module and caddy (Debian's nginx,
// libnginx-mod-http-js and caddy packages), and Node.js with the script's
// packages. Without them they skip, unless CI=true, where a missing one
// fails them.
package e2e
