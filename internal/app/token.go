package app

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/config"
)

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// tokenCommand prints a token that the built-in default accepts: signed with
// JWT_SECRET (or the development secret) and JWT_ALGORITHM (HS256).
func tokenCommand(args []string, env Env) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	sub := fs.String("sub", "", "subject (user id); required")
	session := fs.String("session", "", "session_id claim")
	iss := fs.String("iss", "", "iss claim")
	scope := fs.String("scope", "", "scope claim (space-separated)")
	ttl := fs.Duration("ttl", time.Hour, "lifetime")
	var aud, extra multiFlag
	fs.Var(&aud, "aud", "aud claim (repeatable)")
	fs.Var(&extra, "claim", "extra string claim as name=value (repeatable)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var problems []error
	if *sub == "" {
		problems = append(problems, errors.New("--sub is required"))
	}
	if *ttl <= 0 {
		problems = append(problems, errors.New("--ttl must be positive"))
	}
	cfg, _, err := config.Default(env.Getenv)
	if err != nil {
		problems = append(problems, err)
	}
	now := time.Now()
	claims := jwt.MapClaims{"sub": *sub, "iat": now.Unix(), "exp": now.Add(*ttl).Unix()}
	for _, kv := range extra {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			problems = append(problems, fmt.Errorf("--claim %q: want name=value", kv))
			continue
		}
		claims[k] = v
	}
	if err := errors.Join(problems...); err != nil {
		return usageError{err}
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
	tok, err := jwt.NewWithClaims(jwt.GetSigningMethod(alg), claims).SignedString([]byte(secret))
	if err != nil {
		return err
	}
	fmt.Fprintln(env.Stdout, tok)
	return nil
}
