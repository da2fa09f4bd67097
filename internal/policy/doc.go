// Package policy compiles and evaluates the CEL expressions of access rules
// (`when:`), the dialect Envoy RBAC, Kubernetes and agentgateway use.
//
// An expression reads typed variables (see Input): jwt (the token's claims),
// identity, request, mcp, a2a, lineage and now. Compile parses, type-checks
// and bounds the expression's cost at load, and finds what it reads: the
// top-level variables, the jwt claims by name (a grant keeps only those),
// whether it reads only the identity (then it is evaluated once per grant)
// and whether it reads mcp.arguments (then it needs the whole body).
//
// Eval runs an expression against an Input, which is itself the activation:
// no map of variables is built per request, and the call's arguments are
// read lazily from their raw JSON, only the members the expression names.
// CanCall evaluates with the arguments unknown, for tools/list filtering: a
// tool is hidden only when no arguments could make a call pass.
//
// Errors mean the expression could not be decided (a missing key, a type
// mismatch at runtime, the cost limit, arguments not available); callers
// deny on them.
package policy
