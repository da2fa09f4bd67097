package introspect

import (
	"errors"
	"time"
)

// ErrInactive is the server's active:false: the token is unknown, expired,
// revoked or not meant for this service. A 401 invalid_token.
var ErrInactive = errors.New("token is not active")

// ErrUnavailable is matched (errors.Is) by every *UnavailableError.
var ErrUnavailable = errors.New("token introspection is unavailable")

// UnavailableError means no usable answer could be had: the endpoint is
// down, slow, failing or answered something unusable. A 503 with
// RetryAfter. Its text is safe to show the client: it names no token, URL
// or credential.
type UnavailableError struct {
	RetryAfter time.Duration
	reason     string
	cause      error
}

func (e *UnavailableError) Error() string { return "token introspection is unavailable: " + e.reason }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause, for logs.
func (e *UnavailableError) Unwrap() error { return e.cause }

func unavailable(reason string, cause error) *UnavailableError {
	return &UnavailableError{reason: reason, cause: cause}
}

func clampRetry(d time.Duration) time.Duration {
	return min(max(d, minRetryAfter), maxRetryAfter)
}
