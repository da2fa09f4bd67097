package lineage

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/MicahParks/jwkset"
	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/pemkey"
)

const (
	// DefaultSignedTTL is how long a signed lineage token lives unless
	// configured: long enough for an agent turn between receiving a request
	// and delegating, short enough to be useless when leaked.
	DefaultSignedTTL = 5 * time.Minute
	// SignedType is the JOSE "typ" of a signed lineage token. It keeps these
	// tokens from ever passing for access tokens, and the other way round.
	SignedType = "lineage+jwt"

	// keyCheckInterval is how often the key file is looked at for rotation.
	keyCheckInterval = time.Second
	// retiredSlack is how long past the token lifetime a replaced key stays
	// published, for clock skew between us and the peers.
	retiredSlack = time.Minute
	// maxKeyFileSize bounds a private key file.
	maxKeyFileSize = 64 << 10
)

// SignerOptions configure a Signer.
type SignerOptions struct {
	// KeyFile is a PEM private key: Ed25519 (PKCS #8, signs EdDSA) or ECDSA
	// P-256 (PKCS #8 or SEC 1, signs ES256). Replacing the file rotates the
	// key; the old public key stays published until tokens signed with it
	// have expired.
	KeyFile string
	// Issuer is the "iss" of the tokens, how peers know whose keys to use.
	Issuer string
	// TTL is the token lifetime; 0 means DefaultSignedTTL.
	TTL    time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// Signer mints signed lineage tokens and publishes their public keys as a
// JWK set. It is safe for concurrent use.
type Signer struct {
	file   string
	issuer string
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger

	state     atomic.Pointer[signerState]
	nextCheck atomic.Int64 // UnixNano of the next look at the key file
	reloadMu  sync.Mutex   // one reload at a time; others keep signing
}

// signerState is an immutable snapshot: the key in use, replaced keys still
// published, and the JWK set document.
type signerState struct {
	key     *signingKey
	retired []retiredKey
	jwks    []byte
	stamp   os.FileInfo // the key file as last read
}

type retiredKey struct {
	key   *signingKey
	until time.Time
}

// signingKey is one private key, ready to sign.
type signingKey struct {
	kid    string
	ed     ed25519.PrivateKey // one of ed, ec
	ec     *ecdsa.PrivateKey
	jwk    jwkset.JWKMarshal // public part
	public any               // ed25519.PublicKey or *ecdsa.PublicKey
	alg    string
	header []byte // base64url JOSE header followed by "."
}

// NewSigner loads the key file. A missing or unusable key is an error.
func NewSigner(o SignerOptions) (*Signer, error) {
	if o.Issuer == "" {
		return nil, errors.New("lineage signer: issuer is required")
	}
	if o.TTL < 0 {
		return nil, fmt.Errorf("lineage signer: negative TTL %s", o.TTL)
	}
	if o.TTL == 0 {
		o.TTL = DefaultSignedTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Signer{file: o.KeyFile, issuer: o.Issuer, ttl: o.TTL, now: o.Now, log: o.Logger}
	stamp, err := os.Stat(o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("lineage signer: %w", err)
	}
	key, err := loadSigningKey(o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("lineage signer: %w", err)
	}
	st, err := newSignerState(key, nil, stamp)
	if err != nil {
		return nil, fmt.Errorf("lineage signer: %w", err)
	}
	s.state.Store(st)
	s.nextCheck.Store(o.Now().Add(keyCheckInterval).UnixNano())
	return s, nil
}

// Issuer is the "iss" of the tokens this signer mints.
func (s *Signer) Issuer() string { return s.issuer }

// KeyID is the "kid" of the key in use: its RFC 7638 thumbprint.
func (s *Signer) KeyID() string { return s.current().key.kid }

// JWKS returns the JWK set document with the public keys peers need: the key
// in use and replaced keys whose tokens may still be alive. The slice is
// shared: do not modify it.
func (s *Signer) JWKS() []byte { return s.current().jwks }

// Handler serves JWKS, for an admin or well-known endpoint.
func (s *Signer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		doc := s.JWKS()
		h := w.Header()
		h.Set("Content-Type", "application/json")
		// Short, so that peers see a rotated key soon.
		h.Set("Cache-Control", "public, max-age=60")
		h.Set("Content-Length", strconv.Itoa(len(doc)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(doc)
		}
	})
}

// Sign mints a token carrying r's lineage for the next hop, with the user and
// session from the verified token ("" leaves a claim out). An actor chain
// that came from a trusted caller's header is left out (see Derive).
func (s *Signer) Sign(r *Result, user, session string) (string, error) {
	if !ValidID(r.Root) || r.Depth < 0 {
		return "", errors.New("lineage signer: result has no valid root or depth")
	}
	st := s.current()
	k := st.key
	now := s.now()
	iat := now.Unix()
	exp := now.Add(s.ttl).Unix()

	var scratch [512]byte
	p := append(scratch[:0], `{"iss":`...)
	p = appendJSONString(p, s.issuer)
	if user != "" {
		p = append(p, `,"sub":`...)
		p = appendJSONString(p, user)
	}
	if session != "" {
		p = append(p, `,"sid":`...)
		p = appendJSONString(p, session)
	}
	p = append(p, `,"iat":`...)
	p = strconv.AppendInt(p, iat, 10)
	p = append(p, `,"exp":`...)
	p = strconv.AppendInt(p, exp, 10)
	p = append(p, `,"root":`...)
	p = appendJSONString(p, r.Root)
	if r.Parent != "" {
		p = append(p, `,"parent":`...)
		p = appendJSONString(p, r.Parent)
	}
	if r.Context != "" {
		p = append(p, `,"ctx":`...)
		p = appendJSONString(p, r.Context)
	}
	p = append(p, `,"depth":`...)
	p = strconv.AppendInt(p, int64(r.Depth), 10)
	// A chain only a header vouches for is not signed: the next hop, maybe
	// a route trusting nobody's headers, would take it for signed truth.
	if len(r.ActorChain) > 0 && !r.headerActors {
		p = append(p, `,"actors":[`...)
		for i, a := range r.ActorChain {
			if i > 0 {
				p = append(p, ',')
			}
			p = appendJSONString(p, a)
		}
		p = append(p, ']')
	}
	p = append(p, '}')

	return k.sign(k.header, p)
}

// SignJWT signs claims, a JSON object, as a compact JWS of type typ with the
// key in use, so that other tokens the service issues are verified with the
// same published JWK set. typ must differ from SignedType, so that neither
// kind of token passes for the other; claims are signed as they are (the
// caller includes "iss", see Issuer). typ is a media type name: letters,
// digits and "+-.".
func (s *Signer) SignJWT(typ string, claims []byte) (string, error) {
	if typ == SignedType || !validType(typ) {
		return "", fmt.Errorf("lineage signer: token type %q cannot be used", typ)
	}
	k := s.current().key
	h := make([]byte, 0, 96)
	h = append(h, `{"alg":"`...)
	h = append(h, k.alg...)
	h = append(h, `","kid":"`...)
	h = append(h, k.kid...)
	h = append(h, `","typ":"`...)
	h = append(h, typ...)
	h = append(h, `"}`...)
	header := base64.RawURLEncoding.AppendEncode(make([]byte, 0, base64.RawURLEncoding.EncodedLen(len(h))+1), h)
	return k.sign(append(header, '.'), claims)
}

// validType reports whether typ is a short media type name needing no JSON
// escaping.
func validType(typ string) bool {
	if typ == "" || len(typ) > 64 {
		return false
	}
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// sign makes the compact JWS of payload under header (base64url, followed
// by ".").
func (k *signingKey) sign(header, payload []byte) (string, error) {
	enc := base64.RawURLEncoding
	out := make([]byte, 0, len(header)+enc.EncodedLen(len(payload))+1+enc.EncodedLen(2*32+32))
	out = append(out, header...)
	out = enc.AppendEncode(out, payload)
	switch {
	case k.ed != nil:
		sig := ed25519.Sign(k.ed, out)
		out = append(out, '.')
		out = enc.AppendEncode(out, sig)
	default:
		digest := sha256.Sum256(out)
		sigR, sigS, err := ecdsa.Sign(rand.Reader, k.ec, digest[:])
		if err != nil {
			return "", fmt.Errorf("lineage signer: %w", err)
		}
		// JWS wants r and s as fixed-size big-endian halves (RFC 7518 3.4).
		var sig [64]byte
		sigR.FillBytes(sig[:32])
		sigS.FillBytes(sig[32:])
		out = append(out, '.')
		out = enc.AppendEncode(out, sig[:])
	}
	return string(out), nil
}

// AppendJSONString appends s to b as a JSON string (invalid UTF-8 becomes
// U+FFFD, as encoding/json does), for callers building SignJWT's claims.
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

// publicKey returns the public key with kid among the published ones.
func (s *Signer) publicKey(kid string) (any, bool) {
	st := s.current()
	if st.key.kid == kid {
		return st.key.public, true
	}
	for _, r := range st.retired {
		if r.key.kid == kid {
			return r.key.public, true
		}
	}
	return nil, false
}

// current returns the state, after looking at the key file when it is time.
// Only one caller reloads; the others go on with the state they have.
func (s *Signer) current() *signerState {
	now := s.now()
	st := s.state.Load()
	if now.UnixNano() < s.nextCheck.Load() || !s.reloadMu.TryLock() {
		return st
	}
	defer s.reloadMu.Unlock()
	if now.UnixNano() < s.nextCheck.Load() {
		return s.state.Load() // reloaded while we waited for the lock
	}
	s.nextCheck.Store(now.Add(keyCheckInterval).UnixNano())
	st = s.state.Load()
	next := s.reload(st, now)
	s.state.Store(next)
	return next
}

// reload rotates to a replaced key file and drops retired keys whose tokens
// have all expired. A key file that cannot be used is logged and the current
// key kept.
func (s *Signer) reload(st *signerState, now time.Time) *signerState {
	key, stamp := st.key, st.stamp
	retired := slices.DeleteFunc(slices.Clone(st.retired), func(r retiredKey) bool { return !now.Before(r.until) })

	fi, err := os.Stat(s.file)
	switch {
	case err != nil:
		// Keep signing: a file briefly missing mid-replacement is normal.
		if stamp != nil {
			s.log.Warn("lineage signing key file unreadable, keeping the current key", "file", s.file, "error", err)
			stamp = nil
		}
	case !sameFile(stamp, fi):
		stamp = fi // a bad file is reported once, not every second
		k, err := loadSigningKey(s.file)
		switch {
		case err != nil:
			s.log.Error("lineage signing key file unusable, keeping the current key", "file", s.file, "error", err)
		case k.kid != key.kid:
			retired = append(retired, retiredKey{key: key, until: now.Add(s.ttl + retiredSlack)})
			s.log.Info("lineage signing key rotated", "file", s.file, "kid", k.kid, "previous_kid", key.kid)
			key = k
		}
	}
	if key == st.key && len(retired) == len(st.retired) {
		return &signerState{key: st.key, retired: st.retired, jwks: st.jwks, stamp: stamp}
	}
	next, err := newSignerState(key, retired, stamp)
	if err != nil {
		s.log.Error("lineage JWK set cannot be built, keeping the current key", "error", err)
		return &signerState{key: st.key, retired: st.retired, jwks: st.jwks, stamp: stamp}
	}
	return next
}

// newSignerState builds the state and its JWK set document. A retired key
// that is back in use is published once.
func newSignerState(key *signingKey, retired []retiredKey, stamp os.FileInfo) (*signerState, error) {
	retired = slices.DeleteFunc(retired, func(r retiredKey) bool { return r.key.kid == key.kid })
	set := jwkset.JWKSMarshal{Keys: make([]jwkset.JWKMarshal, 0, 1+len(retired))}
	set.Keys = append(set.Keys, key.jwk)
	for _, r := range retired {
		set.Keys = append(set.Keys, r.key.jwk)
	}
	doc, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	return &signerState{key: key, retired: retired, jwks: doc, stamp: stamp}, nil
}

// sameFile reports whether the key file is unchanged since old was taken:
// same file (a replaced file or a re-pointed symlink is not), size and
// modification time.
func sameFile(old, cur os.FileInfo) bool {
	return old != nil && os.SameFile(old, cur) && old.Size() == cur.Size() && old.ModTime().Equal(cur.ModTime())
}

// loadSigningKey reads and parses a PEM private key file.
func loadSigningKey(path string) (*signingKey, error) {
	data, err := bounded.ReadFile(path, maxKeyFileSize)
	if err != nil {
		return nil, err
	}
	return parseSigningKey(data)
}

// parseSigningKey takes the first private key in PEM data.
func parseSigningKey(data []byte) (*signingKey, error) {
	key, err := pemkey.Parse(data)
	if err != nil {
		return nil, err
	}
	return newSigningKey(key)
}

// newSigningKey prepares key for signing: its algorithm, public JWK, kid and
// encoded header.
func newSigningKey(key any) (*signingKey, error) {
	k := &signingKey{}
	switch key := key.(type) {
	case ed25519.PrivateKey:
		k.ed, k.public, k.alg = key, key.Public(), string(jwkset.AlgEdDSA)
	case *ecdsa.PrivateKey:
		if key.Curve != elliptic.P256() {
			return nil, fmt.Errorf("ECDSA key on %s: only P-256 (ES256) is supported", key.Curve.Params().Name)
		}
		k.ec, k.public, k.alg = key, &key.PublicKey, string(jwkset.AlgES256)
	default:
		return nil, fmt.Errorf("unsupported private key type %T: use Ed25519 or ECDSA P-256", key)
	}
	jwk, err := jwkset.NewJWKFromKey(k.public, jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.ALG(k.alg), USE: jwkset.UseSig},
	})
	if err != nil {
		return nil, err
	}
	k.jwk = jwk.Marshal()
	k.kid = thumbprint(k.jwk)
	k.jwk.KID = k.kid

	var h []byte
	h = append(h, `{"alg":"`...)
	h = append(h, k.alg...)
	h = append(h, `","kid":"`...)
	h = append(h, k.kid...) // base64url: nothing to escape
	h = append(h, `","typ":"`+SignedType+`"}`...)
	k.header = base64.RawURLEncoding.AppendEncode(nil, h)
	k.header = append(k.header, '.')
	return k, nil
}

// thumbprint is the RFC 7638 JWK thumbprint (SHA-256, base64url) of an OKP
// or EC public key: the hash of its required members in lexical order.
func thumbprint(jwk jwkset.JWKMarshal) string {
	var b []byte
	b = append(b, `{"crv":"`...)
	b = append(b, jwk.CRV...)
	b = append(b, `","kty":"`...)
	b = append(b, jwk.KTY...)
	b = append(b, `","x":"`...)
	b = append(b, jwk.X...)
	if jwk.KTY == jwkset.KtyEC {
		b = append(b, `","y":"`...)
		b = append(b, jwk.Y...)
	}
	b = append(b, `"}`...)
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c < 0x80 {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
