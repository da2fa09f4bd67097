// Package e2e holds the end-to-end tests: the service's HTTP forward-auth
// front end behind a real nginx (auth_request), in front of an MCP server
// and A2A agents built with the official SDKs, driven by the SDKs' own
// clients. It has no code outside its tests.
//
// The tests need the nginx binary (Debian's nginx package). Without it they
// skip, unless CI=true, where a missing nginx fails them.
package e2e
