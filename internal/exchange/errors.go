package exchange

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// Kind says what a failed exchange means for the client whose request
// needed the exchanged token.
type Kind uint8

const (
	// Unavailable: the STS could not be asked or gave no usable answer
	// (unreachable, timed out, 5xx, malformed response, breaker open) or
	// refused this service itself (invalid_client, invalid_request: a
	// misconfiguration). Something is broken; answer 503 with Retry-After.
	Unavailable Kind = iota + 1
	// Unauthorized: the STS refused the subject token (invalid_grant,
	// invalid_token). The client should get a new token: 401.
	Unauthorized
	// Forbidden: the STS will not issue a token for this target, scope or
	// client (invalid_target, invalid_scope, unauthorized_client,
	// access_denied): 403.
	Forbidden
	// InteractionRequired: the user must first authorize a third party
	// (interaction_required, consent_required, login_required). MCP and A2A
	// clients get an elicitation (see package elicit); others 403.
	InteractionRequired
)

var kindNames = [...]string{Unavailable: "unavailable", Unauthorized: "unauthorized", Forbidden: "forbidden", InteractionRequired: "interaction_required"}

// String is the kind's name, usable as a metric label.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// HTTPStatus is the status to answer the client with when the request is
// denied in plain HTTP.
func (k Kind) HTTPStatus() int {
	switch k {
	case Unauthorized:
		return http.StatusUnauthorized
	case Forbidden, InteractionRequired:
		return http.StatusForbidden
	}
	return http.StatusServiceUnavailable
}

// Error is every error Exchange returns. Its Error text is built from fixed
// phrases and the STS's error code only, so it is safe to show a client: it
// never holds token bytes, secrets or the STS's free-form description.
type Error struct {
	Kind Kind
	// Code is the RFC 6749 error code the STS answered ("invalid_grant"),
	// "" when there was none (network failure, breaker open, bad response).
	Code string
	// Description is the STS's error_description, cut to the characters
	// RFC 6749 allows and to 256 bytes, any echo of the subject or actor
	// token replaced by "[token]". It is the STS's text, not ours: log it;
	// show it to clients only if the STS is trusted to word it for them.
	Description string
	// Status is the HTTP status the STS answered, 0 when it did not.
	Status int
	// RetryAfter, for Unavailable, is when a retry may succeed: the STS's
	// Retry-After, else the time until the breaker lets calls through again,
	// else a default. Zero for other kinds.
	RetryAfter time.Duration

	reason string // fixed phrase for Error(), e.g. "timed out"
	cause  error  // underlying failure, for logs (Unwrap)
}

// Error describes the failure without anything client-supplied or secret.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("token exchange ")
	switch e.Kind {
	case Unauthorized:
		b.WriteString("refused the subject token")
	case Forbidden:
		b.WriteString("refused to issue a token for this target")
	case InteractionRequired:
		b.WriteString("needs the user to authorize first")
	default:
		b.WriteString("unavailable")
	}
	if e.reason != "" {
		b.WriteString(": ")
		b.WriteString(e.reason)
	}
	if e.Code != "" {
		b.WriteString(" (")
		b.WriteString(e.Code)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the underlying failure (a network error, a context error),
// nil for the STS's own answers.
func (e *Error) Unwrap() error { return e.cause }

// KindOf returns the Kind of an error from Exchange, Unavailable for any
// other non-nil error and 0 for nil.
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Unavailable
}

// kindForCode maps an RFC 6749 / RFC 8693 / OpenID Connect error code from
// a 4xx answer to a Kind. ok reports whether the code means the STS is
// healthy (a denial or a misconfiguration), as opposed to overloaded or
// failing (server_error, temporarily_unavailable), which counts against the
// breaker.
func kindForCode(code string) (k Kind, healthy bool) {
	switch code {
	case "invalid_grant", "invalid_token":
		return Unauthorized, true
	case "invalid_target", "invalid_scope", "unauthorized_client", "access_denied", "insufficient_scope":
		return Forbidden, true
	case "interaction_required", "consent_required", "login_required", "account_selection_required":
		return InteractionRequired, true
	case "server_error", "temporarily_unavailable":
		return Unavailable, false
	}
	// invalid_request, invalid_client, unsupported_grant_type and unknown
	// codes: this service's request or credentials are wrong. The client
	// can do nothing about it, and the STS is alive.
	return Unavailable, true
}

// maxCodeLen and maxDescriptionLen bound what is kept of an STS error.
const (
	maxCodeLen        = 64
	maxDescriptionLen = 256
)

// cleanCode returns code if it is a plausible RFC 6749 error code (the
// characters section 5.2 allows, no space, bounded), else "".
func cleanCode(code string) string {
	if code == "" || len(code) > maxCodeLen {
		return ""
	}
	for i := 0; i < len(code); i++ {
		if c := code[i]; !errorChar(c) || c == ' ' {
			return ""
		}
	}
	return code
}

// cleanDescription keeps the characters RFC 6749 section 5.2 allows in an
// error_description, dropping the rest, and cuts it to maxDescriptionLen.
func cleanDescription(d string) string {
	if len(d) > maxDescriptionLen {
		d = d[:maxDescriptionLen]
	}
	for i := 0; i < len(d); i++ {
		if !errorChar(d[i]) {
			b := make([]byte, 0, len(d))
			for j := 0; j < len(d); j++ {
				if errorChar(d[j]) {
					b = append(b, d[j])
				}
			}
			return string(b)
		}
	}
	return d
}

// minEcho is the shortest run of token characters scrub takes for a
// piece of a token: shorter ones are words.
const minEcho = 12

// scrub replaces with "[token]" every run of token characters (RFC 6750
// b64token) in an STS's error description that holds at least minEcho
// bytes of the request's subject or actor token: some STSs echo the token
// they refuse, whole or cut, and the description is logged.
func (r *request) scrub(desc string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(desc); {
		if !tokenChar(desc[i]) {
			i++
			continue
		}
		j := i
		for j < len(desc) && tokenChar(desc[j]) {
			j++
		}
		// A sentence's period or an ellipsis may stick to the echo.
		if run := strings.Trim(desc[i:j], "."); len(run) >= minEcho && r.holds(run) {
			b.WriteString(desc[last:i])
			b.WriteString("[token]")
			last = j
		}
		i = j
	}
	if last == 0 {
		return desc
	}
	b.WriteString(desc[last:])
	return b.String()
}

// holds reports whether piece is part of the subject or actor token.
func (r *request) holds(piece string) bool {
	return strings.Contains(r.subject, piece) || (r.actor != nil && strings.Contains(r.actor.value, piece))
}

// tokenChar: the characters of RFC 6750's b64token but its trailing "=",
// which would join "subject_token=" to the token echoed after it.
func tokenChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0
}

// errorChar: %x20-21 / %x23-5B / %x5D-7E (RFC 6749 section 5.2).
func errorChar(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'
}

// Bounds for a Retry-After the STS sends.
const (
	minRetryAfter     = time.Second
	maxRetryAfter     = 5 * time.Minute
	defaultRetryAfter = 5 * time.Second
)
