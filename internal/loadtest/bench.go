package loadtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.yaml.in/yaml/v3"
)

// The benchmark's issuers, as the generated configuration names them.
const (
	// SecretEnv is the environment variable the service reads the HS256
	// secret from.
	SecretEnv = "JWT_SECRET"

	IssuerDev = "dev"
	IssuerRSA = "bench-rsa"
	IssuerEC  = "bench-ec"

	// IssuerRSAURL and IssuerECURL are the iss claims of the RS256 and ES256
	// tokens; HS256 tokens carry none.
	IssuerRSAURL = "https://bench.invalid/rsa"
	IssuerECURL  = "https://bench.invalid/ec"

	KIDRSA = "rs1"
	KIDEC  = "es1"

	// Files in a setup directory.
	ConfigFileName = "config.yaml"
	JWKSFileName   = "jwks.json"
	rsaKeyFileName = "rsa.pem"
	ecKeyFileName  = "ec.pem"

	// TokenLifetime is how long minted tokens stay valid.
	TokenLifetime = time.Hour
)

// Keys are the signing keys of the benchmark's issuers.
type Keys struct {
	// HMAC is the HS256 secret; the service gets it through SecretEnv.
	HMAC []byte
	RSA  *rsa.PrivateKey
	EC   *ecdsa.PrivateKey
}

// GenerateKeys makes a fresh RSA-2048 and P-256 key; hmacSecret is kept as
// given.
func GenerateKeys(hmacSecret []byte) (*Keys, error) {
	if len(hmacSecret) == 0 {
		return nil, errors.New("loadtest: empty HMAC secret")
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("loadtest: generating RSA key: %w", err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("loadtest: generating EC key: %w", err)
	}
	return &Keys{HMAC: hmacSecret, RSA: rk, EC: ek}, nil
}

// RandomSecret returns a fresh HS256 secret, printable so it can travel in
// an environment variable.
func RandomSecret() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return []byte(base64.RawURLEncoding.EncodeToString(b))
}

// Setup is a directory holding what the service needs to accept the
// benchmark's tokens.
type Setup struct {
	Dir        string
	ConfigFile string
	JWKSFile   string
}

// WriteSetup writes into dir the JWKS with the public keys, the service
// configuration naming it, and the private keys (mode 0600) so that a later
// run can sign tokens for a service started with that configuration
// (LoadKeys). The HMAC secret is not written: it travels in SecretEnv.
func WriteSetup(dir string, keys *Keys) (Setup, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Setup{}, err
	}
	s := Setup{Dir: abs, ConfigFile: filepath.Join(abs, ConfigFileName), JWKSFile: filepath.Join(abs, JWKSFileName)}
	jwks, err := JWKS(keys)
	if err != nil {
		return Setup{}, err
	}
	cfg, err := ConfigYAML(s.JWKSFile)
	if err != nil {
		return Setup{}, err
	}
	rsaDER, err := x509.MarshalPKCS8PrivateKey(keys.RSA)
	if err != nil {
		return Setup{}, err
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(keys.EC)
	if err != nil {
		return Setup{}, err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{JWKSFileName, jwks, 0o644},
		{ConfigFileName, cfg, 0o644},
		{rsaKeyFileName, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER}), 0o600},
		{ecKeyFileName, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}), 0o600},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(abs, f.name), f.data, f.mode); err != nil {
			return Setup{}, err
		}
	}
	return s, nil
}

// LoadKeys reads the private keys WriteSetup wrote into dir.
func LoadKeys(dir string, hmacSecret []byte) (*Keys, error) {
	if len(hmacSecret) == 0 {
		return nil, errors.New("loadtest: empty HMAC secret")
	}
	rk, err := readKey[*rsa.PrivateKey](filepath.Join(dir, rsaKeyFileName))
	if err != nil {
		return nil, err
	}
	ek, err := readKey[*ecdsa.PrivateKey](filepath.Join(dir, ecKeyFileName))
	if err != nil {
		return nil, err
	}
	return &Keys{HMAC: hmacSecret, RSA: rk, EC: ek}, nil
}

func readKey[K any](path string) (K, error) {
	var zero K
	b, err := os.ReadFile(path)
	if err != nil {
		return zero, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return zero, fmt.Errorf("loadtest: %s: no PKCS #8 private key", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return zero, fmt.Errorf("loadtest: %s: %w", path, err)
	}
	key, ok := k.(K)
	if !ok {
		return zero, fmt.Errorf("loadtest: %s: a %T, not a %T", path, k, zero)
	}
	return key, nil
}

// jwk is one public key of a JWKS (RFC 7517, RFC 7518 section 6).
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
}

// JWKS returns the JSON Web Key Set of the public RSA (kid rs1) and EC (kid
// es1) keys.
func JWKS(keys *Keys) ([]byte, error) {
	point, err := keys.EC.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		return nil, fmt.Errorf("loadtest: encoding EC key: %w", err)
	}
	if len(point) != 65 {
		return nil, fmt.Errorf("loadtest: EC key is not P-256")
	}
	b64 := base64.RawURLEncoding.EncodeToString
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: []jwk{
		{Kty: "RSA", Kid: KIDRSA, Use: "sig", Alg: "RS256",
			N: b64(keys.RSA.N.Bytes()), E: b64(big.NewInt(int64(keys.RSA.E)).Bytes())},
		{Kty: "EC", Kid: KIDEC, Use: "sig", Alg: "ES256", Crv: "P-256",
			X: b64(point[1:33]), Y: b64(point[33:])},
	}}
	return json.MarshalIndent(set, "", "  ")
}

// The service configuration the benchmark needs, in the service's schema.
type (
	benchConfig struct {
		Issuers []benchIssuer `yaml:"issuers"`
		Cache   benchCache    `yaml:"cache"`
		Routes  []benchRoute  `yaml:"routes"`
	}
	benchIssuer struct {
		Name       string   `yaml:"name"`
		Issuer     string   `yaml:"issuer,omitempty"`
		Algorithms []string `yaml:"algorithms,flow"`
		SecretEnv  string   `yaml:"secret_env,omitempty"`
		JWKSFile   string   `yaml:"jwks_file,omitempty"`
	}
	benchCache struct {
		MaxEntries int `yaml:"max_entries"`
	}
	benchRoute struct {
		Name    string   `yaml:"name"`
		Default bool     `yaml:"default"`
		Issuers []string `yaml:"issuers,flow"`
	}
)

// CacheEntries is the verdict cache size the configuration asks for: room
// for the RS256 pool many times over.
const CacheEntries = 100_000

// ConfigYAML returns the service configuration for the benchmark: the three
// issuers (HS256 with the secret from SecretEnv, RS256 and ES256 with keys
// from jwksFile) on one catch-all route.
func ConfigYAML(jwksFile string) ([]byte, error) {
	cfg := benchConfig{
		Issuers: []benchIssuer{
			{Name: IssuerDev, Algorithms: []string{"HS256"}, SecretEnv: SecretEnv},
			{Name: IssuerRSA, Issuer: IssuerRSAURL, Algorithms: []string{"RS256"}, JWKSFile: jwksFile},
			{Name: IssuerEC, Issuer: IssuerECURL, Algorithms: []string{"ES256"}, JWKSFile: jwksFile},
		},
		Cache:  benchCache{MaxEntries: CacheEntries},
		Routes: []benchRoute{{Name: "bench", Default: true, Issuers: []string{IssuerDev, IssuerRSA, IssuerEC}}},
	}
	var buf bytes.Buffer
	buf.WriteString("# Written by extauthz-loadtest: the issuers its tokens come from.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Alg is a token signing algorithm the benchmark uses.
type Alg string

// The algorithms, one per issuer.
const (
	HS256 Alg = "HS256"
	RS256 Alg = "RS256"
	ES256 Alg = "ES256"
)

// claims are the benchmark tokens' claims: the identity the service turns
// into x-user-id and x-session-id.
type claims struct {
	SessionID string `json:"session_id"`
	jwt.RegisteredClaims
}

// Minter signs benchmark tokens. It is safe for concurrent use.
type Minter struct {
	keys *Keys
	now  func() time.Time
}

// NewMinter returns a Minter signing with keys; now is the clock iat and exp
// are read from.
func NewMinter(keys *Keys, now func() time.Time) *Minter {
	return &Minter{keys: keys, now: now}
}

// Token signs the token of user n: sub "user-n", session_id "session-n",
// iat now, exp an hour later, the issuer's iss and, for RS256 and ES256,
// the key's kid. Different n give different tokens.
func (m *Minter) Token(alg Alg, n int) (string, error) {
	now := m.now()
	c := claims{
		SessionID: "session-" + strconv.Itoa(n),
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   "user-" + strconv.Itoa(n),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(TokenLifetime)),
		},
	}
	var (
		method jwt.SigningMethod
		key    any
		kid    string
	)
	switch alg {
	case HS256:
		method, key = jwt.SigningMethodHS256, m.keys.HMAC
	case RS256:
		method, key, kid = jwt.SigningMethodRS256, m.keys.RSA, KIDRSA
		c.Issuer = IssuerRSAURL
	case ES256:
		method, key, kid = jwt.SigningMethodES256, m.keys.EC, KIDEC
		c.Issuer = IssuerECURL
	default:
		return "", fmt.Errorf("loadtest: unknown algorithm %q", alg)
	}
	t := jwt.NewWithClaims(method, c)
	if kid != "" {
		t.Header["kid"] = kid
	}
	return t.SignedString(key)
}

// Tokens signs the tokens of users first to first+count-1, spread over every
// CPU: RSA signing is slow and this runs before a measurement, not during.
func (m *Minter) Tokens(alg Alg, first, count int) ([]string, error) {
	out := make([]string, count)
	workers := min(runtime.GOMAXPROCS(0), max(count, 1))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < count; i += workers {
				t, err := m.Token(alg, first+i)
				if err != nil {
					errs[w] = err
					return
				}
				out[i] = t
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
