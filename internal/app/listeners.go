package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/extauthz/extauthz/internal/adminapi"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/metrics"
	"github.com/extauthz/extauthz/internal/secrets"
)

// The service's HTTP listeners besides the front ends:
//   - ops (--ops-addr): read-only, unauthenticated: /healthz, /readyz,
//     /metrics and the lineage JWKS. Nothing on it changes state or reveals
//     a secret, so probes and scrapers need no credential.
//   - admin (--admin-addr): the admin gRPC API, the elicitation completion
//     and, with --pprof, /debug/pprof/. Every call is authenticated (bearer
//     token file, mTLS with allowed client identities, or both) and logged
//     with who made it. Without authentication configured it may only listen
//     on loopback.

// adminSecurity builds the admin listener's authentication and TLS from
// the checked settings (build has refused the combinations that do not go
// together), reading the token file and the certificates.
func adminSecurity(s settings, m *metrics.Metrics) (*adminapi.Audit, *tls.Config, error) {
	var tlsCfg *tls.Config
	if s.AdminTLSCert != "" {
		var err error
		if tlsCfg, err = adminapi.ServerTLS(s.AdminTLSCert, s.AdminTLSKey, s.AdminClientCA); err != nil {
			return nil, nil, err
		}
	}
	auth, err := adminapi.NewAuthenticator(s.adminAuth, adminapi.AuthOptions{Logger: s.log, OnRefused: m.AdminRefused})
	if err != nil {
		return nil, nil, err
	}
	if !auth.Enabled() && s.AdminAddr != "" {
		s.log.Warn("the admin API is unauthenticated: anyone on this host can call it; configure --admin-token-file or mTLS",
			slog.String("admin_addr", s.AdminAddr))
	}
	if auth.Enabled() && tlsCfg == nil && s.AdminAddr != "" && adminapi.Exposed(s.AdminAddr) {
		s.log.Warn("the admin token crosses the network in clear: add --admin-tls-cert and --admin-tls-key, or listen on loopback",
			slog.String("admin_addr", s.AdminAddr))
	}
	return adminapi.NewAudit(auth, s.log), tlsCfg, nil
}

// opsHandler serves the read-only endpoints: probes, metrics and the
// lineage JWKS.
func opsHandler(pl *check.Pipeline, m *metrics.Metrics, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: key sets still loading, revocations not read from the shared store yet, or the shared store unreachable")
			return
		}
		fmt.Fprintln(w, "ready")
	})
	// The public keys of signed lineage tokens, for the next hops' proxies.
	mux.HandleFunc("GET /.well-known/lineage-jwks.json", func(w http.ResponseWriter, r *http.Request) {
		s := pl.Policy().Signer()
		if s == nil {
			http.Error(w, "lineage signing is not configured", http.StatusNotFound)
			return
		}
		s.Handler().ServeHTTP(w, r)
	})
	return mux
}

// adminHTTPHandler serves the admin listener's plain HTTP routes, every one
// behind the audit (authentication and a log line per call). completed,
// when not nil, is told about every completed elicitation (the response
// path notifies the client's open stream).
func adminHTTPHandler(pl *check.Pipeline, audit *adminapi.Audit, profiling bool, completed func(context.Context, elicit.Pending)) http.Handler {
	mux := http.NewServeMux()
	if profiling {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("POST /elicitations/{id}/complete", func(w http.ResponseWriter, r *http.Request) {
		completeElicitation(pl, w, r, completed)
	})
	return audit.HTTP(mux)
}

// completeElicitation is called by whatever handles the OAuth redirect of a
// re-authorization, with the state the redirect carried (form field or
// query parameter "state"); the user's retry then goes through. The state
// is signed for the elicitation and its user: the id alone is refused (403).
func completeElicitation(pl *check.Pipeline, w http.ResponseWriter, r *http.Request, completed func(context.Context, elicit.Pending)) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "unreadable form", http.StatusBadRequest)
		return
	}
	id := r.PathValue("id")
	adminapi.SetTarget(r.Context(), "elicitation="+strconv.Quote(id))
	if len(r.Form["state"]) > 1 {
		http.Error(w, "more than one state", http.StatusBadRequest)
		return
	}
	p, err := pl.CompleteElicitation(r.Context(), id, r.Form.Get("state"))
	var full *elicit.FullError
	switch {
	case errors.As(err, &full):
		// Still pending: the completion may be retried.
		w.Header().Set("Retry-After", strconv.Itoa(int((max(full.RetryAfter, time.Second)+time.Second-1)/time.Second)))
		http.Error(w, "too many consents are held; retry later", http.StatusServiceUnavailable)
	case errors.Is(err, elicit.ErrNotPending):
		http.Error(w, "no such pending elicitation", http.StatusNotFound)
	case errors.Is(err, elicit.ErrStateMissing):
		http.Error(w, "the state the authorization URL carried is required", http.StatusForbidden)
	case errors.Is(err, elicit.ErrStateExpired):
		http.Error(w, "the state has expired", http.StatusForbidden)
	case err != nil:
		http.Error(w, "the state was not issued for this elicitation", http.StatusForbidden)
	default:
		adminapi.SetTarget(r.Context(), fmt.Sprintf("elicitation=%q issuer=%q subject=%q", id, p.Issuer, p.Subject))
		if completed != nil {
			completed(r.Context(), p)
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// elicitationKey is the key that signs elicitation states: from the
// configured environment variable or file, or nil (a random one per
// process). Read at start only.
func elicitationKey(e config.Elicitations, env Env) ([]byte, error) {
	if e.StateKeyEnv == "" && e.StateKeyFile == "" {
		return nil, nil
	}
	s, err := secrets.Load(env.Getenv, e.StateKeyEnv, e.StateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("elicitations state key: %w", err)
	}
	key := []byte(s)
	if len(key) < elicit.MinStateKeyBytes {
		return nil, fmt.Errorf("elicitations: the state key must be at least %d bytes", elicit.MinStateKeyBytes)
	}
	return key, nil
}

// listen opens a TCP listener on addr and registers it with c; an empty
// address is a listener that is off (nil).
func listen(c *closers, name, addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	c.add(name+" listener", lis.Close)
	return lis, nil
}

// serveAdminOps serves the listeners that are on: the admin one over TLS
// when it has a certificate.
func serveAdminOps(admin *http.Server, adminLis net.Listener, ops *http.Server, opsLis net.Listener, errc chan<- error) {
	if adminLis != nil {
		go func() {
			if admin.TLSConfig != nil {
				errc <- admin.ServeTLS(adminLis, "", "")
				return
			}
			errc <- admin.Serve(adminLis)
		}()
	}
	if opsLis != nil {
		go func() { errc <- ops.Serve(opsLis) }()
	}
}

func addrOf(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}
