package adminapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/secrets"
)

// MinTokenBytes is the shortest admin bearer token accepted: 32 bytes, e.g.
// `openssl rand -hex 16` or more.
const MinTokenBytes = 32

// Reasons a call is refused, as the metric label and the log's "reason".
const (
	ReasonNoCredential   = "no_credential"      // neither a bearer token nor a client certificate
	ReasonBadToken       = "bad_token"          // a token that is not in the token file
	ReasonNoClientCert   = "no_client_cert"     // mTLS is configured and no certificate was presented
	ReasonClientNotAllow = "client_not_allowed" // a verified certificate whose identity is not allowed
	ReasonTokenFile      = "token_file_broken"  // the token file is unreadable or invalid: nobody gets in
)

// AuthConfig says how admin callers prove who they are. With both a token
// file and mTLS, a call needs both. With neither, Authenticate lets every
// caller in as "unauthenticated": the service then binds the admin listener
// to loopback only (see Exposed).
type AuthConfig struct {
	// TokenFile holds the accepted bearer tokens, one a line (several
	// lines let tokens rotate without a restart). It is re-read when it
	// changes; each token is at least MinTokenBytes.
	TokenFile string
	// AllowedClients are the identities a verified client certificate must
	// carry one of: a URI SAN (a SPIFFE ID), a DNS SAN, or the subject
	// common name, compared exactly. Non-empty turns mTLS on: the TLS
	// configuration must then verify client certificates (ServerTLS).
	AllowedClients []string
}

// Enabled reports whether callers must authenticate.
func (c AuthConfig) Enabled() bool { return c.TokenFile != "" || len(c.AllowedClients) > 0 }

// Caller is who made an admin call, for the audit log. Identity is a
// client certificate's identity, "token#N" (the N-th token of the token
// file), both joined by "+", or "unauthenticated"; never a token.
type Caller struct {
	Identity string
	Addr     string // the peer's address
}

// Authenticator checks admin calls. It is safe for concurrent use.
type Authenticator struct {
	cfg       AuthConfig
	tokens    *tokenFile // nil without a token file
	log       *slog.Logger
	onRefused func(reason string)
}

// AuthOptions are an Authenticator's surroundings.
type AuthOptions struct {
	Logger *slog.Logger // refusals and token file problems; discarded when nil
	// OnRefused counts a refused call by reason (a metric); may be nil.
	OnRefused func(reason string)
}

// NewAuthenticator checks the configuration (the token file must hold at
// least one valid token now) and returns an Authenticator.
func NewAuthenticator(c AuthConfig, o AuthOptions) (*Authenticator, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnRefused == nil {
		o.OnRefused = func(string) {}
	}
	for _, id := range c.AllowedClients {
		if strings.TrimSpace(id) == "" || strings.TrimSpace(id) != id {
			return nil, fmt.Errorf("admin allowed clients: %q is not an identity", id)
		}
	}
	a := &Authenticator{cfg: c, log: o.Logger, onRefused: o.OnRefused}
	if c.TokenFile != "" {
		a.tokens = &tokenFile{path: c.TokenFile}
		if _, err := a.tokens.current(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Enabled reports whether callers must authenticate.
func (a *Authenticator) Enabled() bool { return a.cfg.Enabled() }

// Refusal is a refused call: Reason is one of the Reason constants.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonNoCredential:
		return "admin API: authentication required (a bearer token or a client certificate)"
	case ReasonNoClientCert:
		return "admin API: a client certificate is required"
	case ReasonClientNotAllow:
		return "admin API: this client certificate is not allowed"
	}
	// A bad token and a broken token file read the same from outside.
	return "admin API: invalid credentials"
}

// Authenticate decides whether a call may go ahead. state is the TLS
// connection's (nil on a cleartext listener), authorization the values of
// the Authorization header (or gRPC metadata), addr the peer's address.
// A refusal is counted (OnRefused) and returned as a *Refusal; Audit logs it
// with the method, the reason and never the token.
func (a *Authenticator) Authenticate(ctx context.Context, state *tls.ConnectionState, authorization []string, addr string) (Caller, error) {
	c := Caller{Identity: "unauthenticated", Addr: addr}
	if !a.Enabled() {
		return c, nil
	}
	var who []string
	if len(a.cfg.AllowedClients) > 0 {
		id, reason := a.clientIdentity(state)
		if reason != "" {
			return c, a.refuse(reason)
		}
		who = append(who, id)
	}
	if a.tokens != nil {
		n, reason := a.bearer(ctx, authorization)
		if reason != "" {
			return c, a.refuse(reason)
		}
		who = append(who, "token#"+strconv.Itoa(n))
	}
	c.Identity = strings.Join(who, "+")
	return c, nil
}

func (a *Authenticator) refuse(reason string) error {
	a.onRefused(reason)
	return &Refusal{Reason: reason}
}

// clientIdentity returns the first allowed identity of the verified client
// certificate. The TLS stack has verified the chain (ServerTLS); only
// verified chains count.
func (a *Authenticator) clientIdentity(state *tls.ConnectionState) (string, string) {
	if state == nil || len(state.VerifiedChains) == 0 || len(state.VerifiedChains[0]) == 0 {
		return "", ReasonNoClientCert
	}
	leaf := state.VerifiedChains[0][0]
	for _, id := range certIdentities(leaf) {
		if slices.Contains(a.cfg.AllowedClients, id) {
			return id, ""
		}
	}
	return "", ReasonClientNotAllow
}

// certIdentities are the names a certificate can be allowed by: URI SANs
// (SPIFFE IDs), DNS SANs, then the subject common name.
func certIdentities(c *x509.Certificate) []string {
	var ids []string
	for _, u := range c.URIs {
		ids = append(ids, u.String())
	}
	ids = append(ids, c.DNSNames...)
	if c.Subject.CommonName != "" {
		ids = append(ids, c.Subject.CommonName)
	}
	return ids
}

// bearer returns which token (1-based, in file order) the Authorization
// values carry.
func (a *Authenticator) bearer(ctx context.Context, values []string) (int, string) {
	if len(values) == 0 {
		return 0, ReasonNoCredential
	}
	if len(values) > 1 {
		return 0, ReasonBadToken
	}
	scheme, tok, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return 0, ReasonBadToken
	}
	hashes, err := a.tokens.current()
	if err != nil {
		a.log.LogAttrs(ctx, slog.LevelError, "admin: the token file is unusable: refusing every call",
			slog.String("file", a.cfg.TokenFile), slog.String("error", err.Error()))
		return 0, ReasonTokenFile
	}
	// Compare digests, every one of them: neither the length of the
	// presented token nor which line matched shows in the time taken.
	sum := sha256.Sum256([]byte(tok))
	match := 0
	for i, h := range hashes {
		if subtle.ConstantTimeCompare(sum[:], h[:]) == 1 {
			match = i + 1
		}
	}
	if match == 0 {
		return 0, ReasonBadToken
	}
	return match, ""
}

// tokenFile is the token file, re-read when its size or modification time
// changes (a rotated Kubernetes secret replaces the file).
type tokenFile struct {
	path string

	mu      sync.Mutex
	size    int64
	modTime time.Time
	hashes  [][sha256.Size]byte
	err     error
}

// current returns the digests of the file's tokens, reading it again when
// it changed. A file that cannot be read or holds no valid token is an
// error: nobody is let in until it is fixed.
func (f *tokenFile) current() ([][sha256.Size]byte, error) {
	fi, err := os.Stat(f.path)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		f.size, f.modTime, f.hashes, f.err = -1, time.Time{}, nil, fmt.Errorf("admin token file: %w", err)
		return nil, f.err
	}
	if f.hashes != nil || f.err != nil {
		if fi.Size() == f.size && fi.ModTime().Equal(f.modTime) {
			return f.hashes, f.err
		}
	}
	f.size, f.modTime = fi.Size(), fi.ModTime()
	f.hashes, f.err = readTokens(f.path)
	return f.hashes, f.err
}

func readTokens(path string) ([][sha256.Size]byte, error) {
	data, err := bounded.ReadFile(path, secrets.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("admin token file: %w", err)
	}
	var hashes [][sha256.Size]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) < MinTokenBytes {
			// The error names the line, never its content.
			return nil, fmt.Errorf("admin token file %s: line %d: a token must be at least %d bytes", path, i+1, MinTokenBytes)
		}
		hashes = append(hashes, sha256.Sum256(line))
	}
	if len(hashes) == 0 {
		return nil, fmt.Errorf("admin token file %s: no token", path)
	}
	return hashes, nil
}

// ServerTLS is the admin listener's TLS configuration: its certificate
// (re-read when the files change) and, with clientCAFile, verification of
// client certificates against it. A client may still connect without a
// certificate, so that Authenticate can refuse it with a reason (and count
// it) instead of a bare handshake failure; a certificate that does not
// verify fails the handshake.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("admin TLS: both a certificate and a key are required")
	}
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if _, err := kp.get(nil); err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: kp.get}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("admin client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("admin client CA %s: no PEM certificate", clientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// keyPair is a certificate and key, loaded again when either file changes.
type keyPair struct {
	certFile, keyFile string

	mu    sync.Mutex
	stamp string
	cert  *tls.Certificate
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	stamp := fileStamp(k.certFile) + "|" + fileStamp(k.keyFile)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cert != nil && stamp == k.stamp {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil // mid-rotation: keep serving the last good pair
		}
		return nil, fmt.Errorf("admin TLS: %w", err)
	}
	k.cert, k.stamp = &c, stamp
	return k.cert, nil
}

func fileStamp(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(fi.Size(), 10) + "@" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// Exposed reports whether addr (host:port) can be reached from another
// host: anything but a loopback IP or "localhost". An empty or unspecified
// host listens everywhere; a host name other than localhost may resolve to
// anything, so it counts as exposed.
func Exposed(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}
