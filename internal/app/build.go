package app

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/extauthz/extauthz/internal/adminapi"
	"github.com/extauthz/extauthz/internal/httpauthz"
)

// settings are the serve options once checked. build finds every mistake
// in the flags before run reads the configuration, dials Redis, starts the
// tracer or opens a listener: a typo costs nothing and says only itself.
type settings struct {
	ServeOptions
	log    *slog.Logger
	memory memoryLimit
	// The forward-auth front end's request convention and trusted
	// proxies, checked even when the front end is off.
	httpConvention httpauthz.Convention
	httpTrusted    []netip.Prefix
	// adminAuth is how admin callers authenticate; its token file is read
	// by run.
	adminAuth adminapi.AuthConfig
}

// build checks o and returns the settings run works from. It does no I/O
// beyond reading the cgroup's memory limit when --memory-limit is auto.
func build(o ServeOptions, env Env) (settings, error) {
	s := settings{ServeOptions: o}
	var err error
	if s.log, err = newLogger(env.Stderr, o.LogLevel, o.LogFormat); err != nil {
		return settings{}, usageError{err}
	}
	if s.memory, err = resolveMemoryLimit(o.MemoryLimit, env.Getenv, memlimit.FromCgroup); err != nil {
		return settings{}, usageError{err}
	}
	if s.httpConvention, err = httpauthz.ParseConvention(o.HTTPConvention); err != nil {
		return settings{}, usageError{fmt.Errorf("--http-convention: %w", err)}
	}
	if s.httpTrusted, err = httpauthz.ParseTrustedProxies(o.HTTPTrusted); err != nil {
		return settings{}, usageError{fmt.Errorf("--http-trusted-proxies: %w", err)}
	}
	if s.httpConvention == httpauthz.Auto && o.HTTPAddr != "" && !loopbackOnly(s.httpTrusted) {
		// auto believes any convention's headers from a trusted peer: behind
		// a proxy that forwards the client's own request (Envoy's
		// http_service), a client's X-Forwarded-Uri would name the request
		// checked.
		return settings{}, usageError{errors.New("--http-convention auto reads every proxy's forwarding headers and is for trying things out on loopback: " +
			"with --http-trusted-proxies beyond loopback, name the proxy's convention (nginx, forwarded for Caddy and Traefik, envoy)")}
	}
	if err := checkNotNegative(o); err != nil {
		return settings{}, usageError{err}
	}
	if s.adminAuth, err = checkAdminFlags(o); err != nil {
		return settings{}, usageError{err}
	}
	if err := checkDevelopmentSecret(o, env.Getenv); err != nil {
		return settings{}, usageError{err}
	}
	return s, nil
}

// checkDevelopmentSecret refuses the built-in default's development secret
// (no --config, no JWT_SECRET) on a listener that answers checks and is
// not on loopback: anyone can mint tokens with that secret, so it may only
// serve callers on the same machine.
func checkDevelopmentSecret(o ServeOptions, getenv func(string) string) error {
	if o.ConfigFile != "" || getenv("JWT_SECRET") != "" {
		return nil
	}
	for _, l := range []struct{ flag, addr string }{{"--grpc-addr", o.GRPCAddr}, {"--http-addr", o.HTTPAddr}} {
		if l.addr != "" && adminapi.Exposed(l.addr) {
			return fmt.Errorf("%s %s is not a loopback address, and without --config or JWT_SECRET the built-in default "+
				"accepts tokens signed with the public development secret: anyone could mint a token for any user. "+
				"Set JWT_SECRET (at least 32 random bytes) or pass --config FILE, or listen on 127.0.0.1", l.flag, l.addr)
		}
	}
	return nil
}

// checkNotNegative refuses durations and caps below zero (0 is "off" or
// "no cap" for each of them).
func checkNotNegative(o ServeOptions) error {
	for _, d := range []struct {
		flag string
		v    int64
	}{
		{"--shutdown-timeout", int64(o.ShutdownTimeout)},
		{"--drain-period", int64(o.DrainPeriod)},
		{"--watch-interval", int64(o.WatchInterval)},
		{"--http-read-timeout", int64(o.HTTPReadTimeout)},
		{"--http-max-conns", int64(o.HTTPMaxConns)},
		{"--http-max-bodies", int64(o.HTTPMaxBodies)},
	} {
		if d.v < 0 {
			return fmt.Errorf("%s must not be negative", d.flag)
		}
	}
	return nil
}

// checkAdminFlags checks that the admin listener's authentication flags go
// together, and refuses an exposed address without authentication.
func checkAdminFlags(o ServeOptions) (adminapi.AuthConfig, error) {
	var allowed []string
	for id := range strings.SplitSeq(o.AdminAllowedClients, ",") {
		if id = strings.TrimSpace(id); id != "" {
			allowed = append(allowed, id)
		}
	}
	switch {
	case o.AdminClientCA != "" && len(allowed) == 0:
		return adminapi.AuthConfig{}, errors.New("--admin-client-ca needs --admin-allowed-clients: name the client identities (URI SAN, DNS SAN or CN) allowed to call the admin API")
	case len(allowed) > 0 && o.AdminClientCA == "":
		return adminapi.AuthConfig{}, errors.New("--admin-allowed-clients needs --admin-client-ca to verify client certificates against")
	case o.AdminClientCA != "" && (o.AdminTLSCert == "" || o.AdminTLSKey == ""):
		return adminapi.AuthConfig{}, errors.New("--admin-client-ca needs --admin-tls-cert and --admin-tls-key: mTLS needs TLS")
	case (o.AdminTLSCert == "") != (o.AdminTLSKey == ""):
		return adminapi.AuthConfig{}, errors.New("admin TLS: both a certificate and a key are required (--admin-tls-cert, --admin-tls-key)")
	}
	auth := adminapi.AuthConfig{TokenFile: o.AdminTokenFile, AllowedClients: allowed}
	if !auth.Enabled() && o.AdminAddr != "" && adminapi.Exposed(o.AdminAddr) {
		return adminapi.AuthConfig{}, fmt.Errorf("--admin-addr %s is not a loopback address and the admin API has no authentication: "+
			"anyone reaching it could revoke users, invalidate sessions and complete elicitations. "+
			"Configure --admin-token-file and/or mTLS (--admin-tls-cert, --admin-tls-key, --admin-client-ca, --admin-allowed-clients), "+
			"or listen on 127.0.0.1", o.AdminAddr)
	}
	return auth, nil
}

// loopbackOnly reports whether every prefix holds loopback addresses only.
func loopbackOnly(prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		// Loopback addresses are one range per family (127.0.0.0/8, ::1):
		// a prefix within it starts and ends there.
		if !p.Masked().Addr().IsLoopback() || !lastAddr(p).IsLoopback() {
			return false
		}
	}
	return true
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
