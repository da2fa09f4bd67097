// Package lineage derives the conversation lineage of a request as it crosses
// agent hops (UI -> agent -> sub-agent -> MCP tool) and says which lineage
// headers to set on, and strip from, the upstream request.
//
// Lineage is three values: the root context id (the conversation at the top
// of the chain, stable across hops), the parent context id (the immediate
// caller's context, absent at the root) and the depth (agent hops before this
// one, 0 at the root). An actor chain (the subjects of an RFC 8693 act claim,
// outermost first) rides along.
//
// Derive applies the rules. Inbound lineage headers count only when the
// caller is trusted (see Trust); from anyone else they are dropped and the
// request starts a new chain. The act claim of the verified token is the
// signed truth about delegation: it sets the actor chain and a lower bound
// for the depth, whatever the headers say. A depth above the route's maximum
// is a runaway delegation loop and is refused with ErrTooDeep.
//
// Optionally the service signs the lineage it derived into a short-lived JWT
// (Signer) that the next hop, possibly behind another proxy, verifies against
// the published JWKS (SignedVerifier) and accepts as a trusted lineage source
// even when the caller is not otherwise trusted.
//
// A request is handled in this order; each step takes and returns plain
// values:
//
//	in := names.Inbound(headers)
//	act := ActChain(claims)                    // once per verified token
//	trusted := trust.Trusted(Caller{...})
//	carried, err := verifier.Verify(ctx, in.Signed, sub) // if one came in; on error log, go on without
//	res, err := Derive(in, facts, Options{Trusted: trusted, Signed: carried, ...})
//	res.Signed, err = signer.Sign(&res, user, session)   // on routes that sign
//	set, remove = res.AppendHeaders(set, remove, names)
//
// The package knows nothing of Envoy or of the configuration file.
package lineage
