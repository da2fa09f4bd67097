// Package whoami builds the report the example's upstreams answer with: the
// identity and lineage headers a request reached them with, and what the
// bearer token that reached them says. It is what a workload behind extauthz
// sees; it authenticates nothing itself.
package whoami

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Headers are the request headers the report shows when present: the ones
// extauthz sets upstream (and strips when a client sent them).
var Headers = []string{
	"x-user-id", "x-session-id", "x-user-name",
	"x-root-context-id", "x-parent-context-id", "x-lineage-depth", "x-actor-chain",
	"x-extauthz-dry-run",
}

// Report is what one request looked like on arrival.
type Report struct {
	// Service is the upstream that answered.
	Service string `json:"service"`
	// Headers holds the identity and lineage headers present, by their
	// lower-case names.
	Headers map[string]string `json:"headers"`
	// Token describes the bearer token that reached the upstream, nil when
	// none did (extauthz removes the client's token unless a route forwards
	// it or exchanges it).
	Token *Token `json:"token,omitempty"`
}

// Token holds claims of the bearer token that reached the upstream, read
// without verification, for display only: the example shows which token
// arrived (an exchanged one names this upstream in aud). The token itself is
// never shown.
type Token struct {
	Subject  string          `json:"sub,omitempty"`
	Issuer   string          `json:"iss,omitempty"`
	Audience json.RawMessage `json:"aud,omitempty"`
	Party    string          `json:"azp,omitempty"`
	Session  string          `json:"sid,omitempty"`
	Scope    string          `json:"scope,omitempty"`
	Actor    json.RawMessage `json:"act,omitempty"`
	Expires  int64           `json:"exp,omitempty"`
	// Opaque is set when the bearer is not a readable JWT.
	Opaque bool `json:"opaque,omitempty"`
}

// FromHeader builds the report for a request with header h.
func FromHeader(service string, h http.Header) Report {
	r := Report{Service: service, Headers: map[string]string{}}
	for _, name := range Headers {
		if v := h.Values(name); len(v) > 0 {
			r.Headers[name] = strings.Join(v, ",")
		}
	}
	scheme, token, ok := strings.Cut(h.Get("Authorization"), " ")
	if ok && strings.EqualFold(scheme, "bearer") && token != "" {
		r.Token = readClaims(token)
	}
	return r
}

// readClaims decodes the payload of a JWT without verifying it.
func readClaims(token string) *Token {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return &Token{Opaque: true}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return &Token{Opaque: true}
	}
	var t Token
	if err := json.Unmarshal(payload, &t); err != nil {
		return &Token{Opaque: true}
	}
	return &t
}

// Serve runs h on addr until SIGINT or SIGTERM, then shuts down gracefully;
// it exits the process if the listener fails.
func Serve(addr string, h http.Handler, log *slog.Logger, what string, attrs ...any) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	log.Info(what+" listening", append([]any{"addr", addr}, attrs...)...)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
}
