package config

import (
	"fmt"
	"strings"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// DevSecret is the HMAC secret the built-in default uses when JWT_SECRET is
// unset. It is public: anyone can mint tokens with it.
const DevSecret = "extauthz-development-secret-do-not-use-in-production"

// Default is the built-in configuration used without a config file: HS256 (or
// JWT_ALGORITHM) tokens signed with JWT_SECRET, a single catch-all route, no
// iss or aud required. getenv reads the environment. The warnings say what a
// production deployment must change.
func Default(getenv func(string) string) (*File, []string, error) {
	var warnings []string
	alg := strings.ToUpper(strings.TrimSpace(getenv("JWT_ALGORITHM")))
	if alg == "" {
		alg = "HS256"
	}
	if !IsHMAC(alg) {
		return nil, nil, fmt.Errorf("JWT_ALGORITHM: %q is not one of HS256, HS384, HS512", alg)
	}
	issuer := Issuer{Name: "default", Algorithms: []string{alg}}
	if getenv("JWT_SECRET") != "" {
		issuer.SecretEnv = "JWT_SECRET"
	} else {
		issuer.Secret = DevSecret
		warnings = append(warnings, "JWT_SECRET is not set: using the built-in development secret; anyone can mint tokens this service accepts. Set JWT_SECRET or use --config in production.")
	}
	f := &File{
		Issuers: []Issuer{issuer},
		Routes: []Route{{
			Name: "default", Default: true, Issuers: []string{"default"},
			// MCP and A2A awareness for any JSON-RPC body; agent cards and
			// protected resource metadata are public (added for auto routes).
			Protocol: jsonrpc.ProtocolUnknown.String(),
		}},
	}
	// Every authenticated caller may continue a conversation's lineage.
	f.Lineage.Trust.All = true
	// The workloads this mode is for build paths from the identity headers.
	f.Identity.SafeValues = SafeValuesPathSegment
	f.applyDefaults()
	if err := f.Validate(); err != nil {
		return nil, nil, err
	}
	return f, warnings, nil
}
