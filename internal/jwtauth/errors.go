package jwtauth

import "errors"

// Every error Verify returns is one of these sentinels, unwrapped, so callers
// branch with errors.Is and may show Error() to the client as an OAuth
// error_description: the texts name no token bytes, claim values, key
// material or configuration.
//
// ErrKeysUnavailable means something is broken (the issuer's keys never
// loaded; map it to 503). Every other error is a denial of the token (401).
var (
	ErrMalformed       = errors.New("token is malformed")
	ErrUnknownIssuer   = errors.New("token issuer is unknown")
	ErrIssuer          = errors.New("token issuer is not accepted here")
	ErrAlgorithm       = errors.New("token signing algorithm is not accepted")
	ErrUnknownKey      = errors.New("token signing key is unknown")
	ErrSignature       = errors.New("token signature is invalid")
	ErrExpired         = errors.New("token is expired")
	ErrNotYetValid     = errors.New("token is not valid yet")
	ErrIssuedInFuture  = errors.New("token is issued in the future")
	ErrAudience        = errors.New("token audience is not accepted here")
	ErrType            = errors.New("token type is not accepted")
	ErrMissingClaim    = errors.New("token is missing a required claim")
	ErrKeysUnavailable = errors.New("token signing keys are unavailable")
)
