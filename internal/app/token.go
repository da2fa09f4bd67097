package app

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jwtauth"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

var tokenCmd = command{
	name: "token",
	summary: "Print a token the built-in default configuration accepts: signed with JWT_SECRET (at least\n" +
		"32 bytes; without it the public development secret, with a warning) and JWT_ALGORITHM (HS256).",
	examples: []string{"TOKEN=$(extauthz token --sub alice --session sess-42 --ttl 1h)"},
}

// tokenCommand prints a token that the built-in default accepts: signed with
// JWT_SECRET (or the development secret) and JWT_ALGORITHM (HS256).
func tokenCommand(args []string, env Env) error {
	fs := tokenCmd.flagSet()
	sub := fs.String("sub", "", "subject (user id); required")
	session := fs.String("session", "", "session_id claim")
	iss := fs.String("iss", "", "iss claim")
	scope := fs.String("scope", "", "scope claim (space-separated)")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	var aud, extra multiFlag
	fs.Var(&aud, "aud", "aud claim (repeatable)")
	fs.Var(&extra, "claim", "extra string claim as name=value (repeatable)")
	if err := tokenCmd.parseFlags(fs, args, env.Stdout, 0); err != nil {
		return err
	}
	var problems []error
	if *sub == "" {
		problems = append(problems, errors.New("--sub is required"))
	}
	if *ttl <= 0 {
		problems = append(problems, errors.New("--ttl must be positive"))
	}
	// The same configuration, secret rules and warning as serve without
	// --config.
	cfg, _, err := loadConfig("", env, warnings(env))
	if err != nil {
		problems = append(problems, err)
	}
	now := time.Now()
	claims := map[string]any{"sub": *sub, "iat": now.Unix(), "exp": now.Add(*ttl).Unix()}
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			problems = append(problems, fmt.Errorf("--claim %q: want name=value", kv))
			continue
		}
		claims[k] = v
	}
	if err := errors.Join(problems...); err != nil {
		return tokenCmd.usageErr(fs, err)
	}
	if *session != "" {
		claims["session_id"] = *session
	}
	if *iss != "" {
		claims["iss"] = *iss
	}
	if *scope != "" {
		claims["scope"] = *scope
	}
	switch len(aud) {
	case 0:
	case 1:
		claims["aud"] = aud[0]
	default:
		claims["aud"] = []string(aud)
	}
	secret := config.DevSecret
	if s := env.Getenv("JWT_SECRET"); s != "" {
		secret = s
	}
	alg := cfg.Issuers[0].Algorithms[0]
	tok, err := jwtauth.SignHMAC(alg, []byte(secret), claims)
	if err != nil {
		return fmt.Errorf("JWT_SECRET: %w", err)
	}
	fmt.Fprintln(env.Stdout, tok)
	return nil
}
