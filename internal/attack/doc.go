// Package attack is the adversarial suite. An attacker holds a valid
// low-privilege token (or none) and controls every byte of the request; each
// file here is one class of the threat model (parser differentials,
// canonical forms, one meaning per name, who may set a header, what the proxy
// does with our answer, bounded state, control plane) and sends its cases to
// the real service: over ext_authz gRPC as Envoy would, through an Envoy-like
// proxy to a real MCP server (go-sdk) that records every tool it executes,
// and to the forward-auth front end. A case passes only when the request is
// refused with the named status and body and, end to end, the forbidden tool
// did not run.
//
// The package has no code outside its tests.
package attack
