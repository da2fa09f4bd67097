// Package configcheck checks a configuration file the way serve would use
// it, short of network calls: it decodes and validates the file, then checks
// everything serve reads at start (environment variables; secret, key set,
// PEM key, CA bundle and actor token files), and finally compiles it. With
// Online it also fetches the JWK sets and discovery documents serve would
// fetch. Every problem is reported at once, with its YAML line when known.
package configcheck

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/lineage"
	"github.com/extauthz/extauthz/internal/pemkey"
	"github.com/extauthz/extauthz/internal/policy"
	"github.com/extauthz/extauthz/internal/secrets"
)

// Options say what the check may use.
type Options struct {
	// Getenv reads the environment serve would run with.
	Getenv func(string) string
	// Online fetches JWK set URLs and discovery documents with HTTPClient.
	Online     bool
	HTTPClient *http.Client
}

// Result is what a check found.
type Result struct {
	File     *config.File // nil when the file did not decode or validate
	Problems []string     // each prefixed with "line N: " when the line is known
	// Warnings are settings serve runs with that will not do what they
	// seem to (a rule that reads arguments the front end never sends).
	Warnings []string
}

// File checks the configuration file at path.
func File(ctx context.Context, path string, o Options) Result {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Result{Problems: []string{err.Error()}}
	}
	return Bytes(ctx, raw, o)
}

// Bytes checks a configuration document.
func Bytes(ctx context.Context, raw []byte, o Options) Result {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	f, err := config.ParseAll(raw)
	if f == nil {
		return Result{Problems: lines(err)}
	}
	// A file that decodes is checked further even when it is invalid, so
	// that every problem is reported in one run.
	c := &checker{loc: config.NewLocator(raw), getenv: o.Getenv}
	if err != nil {
		c.problems = lines(err)
	}
	c.issuers(f)
	c.exchanges(f)
	c.rules(f)
	c.tasks(f)
	c.lineage(f)
	c.redis(f)
	if o.Online {
		c.online(ctx, f, o.HTTPClient)
	}
	if len(c.problems) > 0 {
		if err != nil {
			f = nil // not a configuration serve would run
		}
		return Result{File: f, Problems: byLine(c.problems), Warnings: byLine(c.warnings)}
	}
	// Whatever else serve refuses at start. Without Online no request
	// leaves the process: remote key sets are only loaded above.
	client := &http.Client{Transport: offline{}}
	if o.Online {
		client = o.HTTPClient
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := check.Compile(cctx, f, check.Deps{Logger: slog.New(slog.DiscardHandler), Getenv: o.Getenv, HTTPClient: client})
	if err != nil {
		return Result{File: f, Problems: lines(err), Warnings: byLine(c.warnings)}
	}
	p.Close()
	return Result{File: f, Warnings: byLine(c.warnings)}
}

// tasks warns about mcp routes whose tasks cannot all be bound: without the
// body, a task operation is known only by Mcp-Method, which MCP clients
// before 2026-07-28 do not send (config refuses a2a and auto routes); and
// about upstream_scopes_task_lists where no task is bound, and so no list
// refused.
func (c *checker) tasks(f *config.File) {
	owns := f.Sessions.OwnsTasks()
	for i, r := range f.Routes {
		if r.UpstreamScopesTaskLists && (!owns || r.RequestBody == config.RequestBodyNone) {
			c.warn(fmt.Sprintf("routes[%d].upstream_scopes_task_lists", i), "has no effect: the route binds no task "+
				"(sessions.task_ownership is off, or its front end sends no body), so no task list is refused")
		}
		if owns && r.RequestBody == config.RequestBodyNone && r.Protocol == "mcp" {
			c.warn(fmt.Sprintf("routes[%d].request_body", i), "is none: sessions.task_ownership binds no task of MCP clients before 2026-07-28, which send no Mcp-Method "+
				"(later clients' task operations are refused without the body); send the body to the service, or set sessions.task_ownership: false if no task is to be bound")
		}
	}
}

// rules checks the secrets of rules' decision points and warns about rule
// expressions that read the arguments on routes that never see the body.
func (c *checker) rules(f *config.File) {
	var env *policy.Env
	for i, r := range f.Routes {
		rp := named("routes", i, r.Name)
		for j, rule := range r.Rules {
			p := named(rp+".rules", j, rule.Name)
			if z := rule.AuthZEN; z != nil {
				if z.ClientAuth.ClientSecretEnv != "" {
					c.env(p+".authzen.client_auth.client_secret_env", z.ClientAuth.ClientSecretEnv)
				}
				if z.ClientAuth.ClientSecretFile != "" {
					if b, ok := c.file(p+".authzen.client_auth.client_secret_file", z.ClientAuth.ClientSecretFile); ok && strings.TrimSpace(string(b)) == "" {
						c.add(p+".authzen.client_auth.client_secret_file", "%s is empty", z.ClientAuth.ClientSecretFile)
					}
				}
			}
			if rule.When == "" || r.RequestBody != config.RequestBodyNone {
				continue
			}
			if env == nil {
				var err error
				if env, err = policy.NewEnv(policy.Options{}); err != nil {
					return
				}
			}
			if prg, err := env.Compile(rule.When); err == nil && prg.ReadsArguments() {
				c.warn(p+".when", "reads mcp.arguments, but this route's front end does not send the body (request_body: none): every call it matches is denied (policy_error)")
			}
		}
	}
}

// warn records a warning at path, with its line.
func (c *checker) warn(path, format string, args ...any) {
	msg := path + ": " + fmt.Sprintf(format, args...)
	if line := c.loc.Line(path); line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	c.warnings = append(c.warnings, msg)
}

// offline refuses every request.
type offline struct{}

func (offline) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, errors.New("not fetched offline")
}

var lineNumber = regexp.MustCompile(`^line (\d+): `)

// byLine orders problems by their line; those without one come last.
func byLine(problems []string) []string {
	line := func(p string) int {
		if m := lineNumber.FindStringSubmatch(p); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		return math.MaxInt
	}
	slices.SortStableFunc(problems, func(a, b string) int { return cmp.Compare(line(a), line(b)) })
	return problems
}

func lines(err error) []string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

type checker struct {
	loc      config.Locator
	getenv   func(string) string
	problems []string
	warnings []string
}

// add records a problem at path (a configuration path such as
// "issuers[0] (keycloak).jwks_file").
func (c *checker) add(path, format string, args ...any) {
	msg := path + ": " + fmt.Sprintf(format, args...)
	if line := c.loc.Line(path); line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	c.problems = append(c.problems, msg)
}

// env checks that the variable a key names is set.
func (c *checker) env(path, name string) string {
	v := c.getenv(name)
	if v == "" {
		c.add(path, "environment variable %s is not set", name)
	}
	return v
}

// file checks that path is readable and returns its content.
func (c *checker) file(where, name string) ([]byte, bool) {
	b, err := os.ReadFile(name)
	if err != nil {
		c.add(where, "%v", unwrapPath(err))
		return nil, false
	}
	return b, true
}

// unwrapPath keeps the operation and reason of a file error, whose path the
// message already names through its key.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %s: %w", pe.Op, pe.Path, pe.Err)
	}
	return err
}

func named(kind string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s[%d]", kind, i)
	}
	return fmt.Sprintf("%s[%d] (%s)", kind, i, name)
}

func (c *checker) secret(path, s string) {
	if s != "" && len(s) < jwtauth.MinSecretLen {
		c.add(path, "the secret is %d bytes, at least %d are required", len(s), jwtauth.MinSecretLen)
	}
}

func (c *checker) issuers(f *config.File) {
	for i, is := range f.Issuers {
		p := named("issuers", i, is.Name)
		switch {
		case is.SecretEnv != "":
			c.secret(p+".secret_env", c.env(p+".secret_env", is.SecretEnv))
		case is.SecretFile != "":
			if s, err := secrets.Load(c.getenv, "", is.SecretFile); err != nil {
				c.add(p+".secret_file", "%v", unwrapPath(err))
			} else {
				c.secret(p+".secret_file", s)
			}
		case is.Secret != "":
			c.secret(p+".secret", is.Secret)
		case is.JWKSFile != "":
			if err := jwtauth.CheckKeySource(context.Background(), nil, jwtauth.IssuerSpec{JWKSFile: is.JWKSFile}); err != nil {
				c.add(p+".jwks_file", "%v", unwrapPath(err))
			}
		case is.APIKeys != nil:
			if _, err := apikey.Open(is.APIKeys.File, apikey.Options{Name: is.Name}); err != nil {
				c.add(p+".api_keys.file", "%v", err)
			}
		case is.Introspection != nil:
			ca := is.Introspection.ClientAuth
			if _, err := secrets.Load(c.getenv, ca.ClientSecretEnv, ca.ClientSecretFile); err != nil {
				c.add(p+".introspection.client_auth", "%v", unwrapPath(err))
			}
		}
	}
}

func (c *checker) exchanges(f *config.File) {
	for i, x := range f.Exchanges {
		p := named("exchanges", i, x.Name)
		a := x.ClientAuth
		if a.ClientSecretEnv != "" {
			c.env(p+".client_auth.client_secret_env", a.ClientSecretEnv)
		}
		if a.ClientSecretFile != "" {
			if b, ok := c.file(p+".client_auth.client_secret_file", a.ClientSecretFile); ok && strings.TrimSpace(string(b)) == "" {
				c.add(p+".client_auth.client_secret_file", "%s is empty", a.ClientSecretFile)
			}
		}
		if a.PrivateKeyFile != "" {
			if b, ok := c.file(p+".client_auth.private_key_file", a.PrivateKeyFile); ok {
				if _, err := pemkey.Parse(b); err != nil {
					c.add(p+".client_auth.private_key_file", "%s: %v", a.PrivateKeyFile, err)
				}
			}
		}
		if x.ActorTokenFile != "" {
			if b, ok := c.file(p+".actor_token_file", x.ActorTokenFile); ok && strings.TrimSpace(string(b)) == "" {
				c.add(p+".actor_token_file", "%s is empty", x.ActorTokenFile)
			}
		}
	}
}

func (c *checker) lineage(f *config.File) {
	s := f.Lineage.Signing
	if s.KeyFile != "" {
		if _, ok := c.file("lineage.signing.key_file", s.KeyFile); ok {
			if _, err := lineage.NewSigner(lineage.SignerOptions{KeyFile: s.KeyFile, Issuer: s.Issuer, TTL: s.TTL.D()}); err != nil {
				c.add("lineage.signing.key_file", "%v", err)
			}
		}
	}
	for i, peer := range f.Lineage.Peers {
		if peer.JWKSFile != "" {
			if err := jwtauth.CheckKeySource(context.Background(), nil, jwtauth.IssuerSpec{JWKSFile: peer.JWKSFile}); err != nil {
				c.add(fmt.Sprintf("lineage.peers[%d].jwks_file", i), "%v", unwrapPath(err))
			}
		}
	}
}

func (c *checker) redis(f *config.File) {
	r := f.Redis
	if len(r.Addrs) == 0 {
		return
	}
	if r.PasswordEnv != "" {
		c.env("redis.password_env", r.PasswordEnv)
	}
	if r.EncryptionKeyEnv != "" {
		if v := c.env("redis.encryption_key_env", r.EncryptionKeyEnv); v != "" {
			if key, err := base64.StdEncoding.DecodeString(v); err != nil || len(key) != 32 {
				c.add("redis.encryption_key_env", "%s must hold a base64-encoded 32-byte key", r.EncryptionKeyEnv)
			}
		}
	}
	if r.TLSCAFile != "" {
		if b, ok := c.file("redis.tls_ca_file", r.TLSCAFile); ok && !x509.NewCertPool().AppendCertsFromPEM(b) {
			c.add("redis.tls_ca_file", "%s holds no PEM certificate", r.TLSCAFile)
		}
	}
}

// online loads every remote key set once, as serve would at start.
func (c *checker) online(ctx context.Context, f *config.File, client *http.Client) {
	for i, is := range f.Issuers {
		if is.JWKSURL == "" && !is.Discovery {
			continue
		}
		p := named("issuers", i, is.Name)
		key := p + ".jwks_url"
		if is.Discovery {
			key = p + ".discovery"
		}
		if err := jwtauth.CheckKeySource(ctx, client, jwtauth.IssuerSpec{JWKSURL: is.JWKSURL, Discovery: is.Discovery, Issuer: is.Issuer}); err != nil {
			c.add(key, "%v", err)
		}
	}
	for i, peer := range f.Lineage.Peers {
		if peer.JWKSURL != "" {
			if err := jwtauth.CheckKeySource(ctx, client, jwtauth.IssuerSpec{JWKSURL: peer.JWKSURL}); err != nil {
				c.add(fmt.Sprintf("lineage.peers[%d].jwks_url", i), "%v", err)
			}
		}
	}
}
