package adminapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/extauthz/extauthz/internal/secrets"
	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// DefaultAddr is the admin listener the CLI calls unless told otherwise; it
// is the serve command's default --admin-addr.
const DefaultAddr = "127.0.0.1:9092"

var (
	// ErrDenied is returned by `explain` after printing the explanation when
	// the request would be denied, so that the exit status says so.
	ErrDenied = errors.New("the request would be denied")
	// ErrUsage is matched (errors.Is) by errors in how the command was
	// called: unknown command or flag, missing or extra arguments.
	ErrUsage = errors.New("usage error")
)

// Usage is the help of `extauthz admin`, printed on -h and after a usage
// error.
const Usage = `Usage: extauthz admin [--addr HOST:PORT] [--timeout D] [--token-file F] [--tls-ca F] [--tls-cert F --tls-key F] COMMAND [ARGS]

Commands:
  invalidate-session SESSION   drop cached verdicts, exchanged tokens and
                               pending elicitations of a session
  revoke-subject --issuer NAME USER
                               revoke a user: refuse their tokens issued until
                               now and drop the same for every session of theirs
                               (NAME: the issuer's configured name or its iss)
  revoke-api-key --issuer NAME ID
                               revoke an API key by its id: refused from now on,
                               on every replica, until it expires (at most 90
                               days); NAME is the api_keys issuer's name
  explain [--json] REQUEST.json
                               decide a CheckRequest (protojson) without side
                               effects; exits non-zero when it would be denied
  stats [--json]               cache counters, configuration, uptime, version

Flags (before or after COMMAND):
  --addr HOST:PORT   the service's admin listener (default ` + DefaultAddr + `)
  --timeout D        give up after D (default 10s)
  --token-file F     send the bearer token in F (its first line)
  --tls-ca F         speak TLS, verifying the service against the CA in F
  --tls-cert F, --tls-key F
                     speak TLS and present this client certificate (mTLS)
  --tls-server-name N
                     the name the service's certificate must carry
  --json             (explain, stats) print the response as protojson

Example:
  extauthz admin --addr 127.0.0.1:9092 explain examples/requests/allowed.json
`

// RunCLI runs `extauthz admin` with args (what follows "admin"), printing
// results and help to stdout (stderr is unused: the caller prints Usage after
// a usage error). It returns nil on success, flag.ErrHelp after printing
// help, an error matching ErrUsage when called wrongly, an error matching ErrDenied when an explained request would be
// denied, and any other error when the call failed (status.Code tells the
// gRPC code).
func RunCLI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &cli{addr: DefaultAddr, timeout: 10 * time.Second, stdout: stdout}
	fs := c.flagSet("admin")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		return usageErrorf("admin: a command is required")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "invalidate-session", "revoke-subject":
		return c.invalidate(ctx, cmd, args)
	case "revoke-api-key":
		return c.revokeAPIKey(ctx, args)
	case "explain":
		return c.explain(ctx, args)
	case "stats":
		return c.stats(ctx, args)
	case "help":
		fmt.Fprint(stdout, Usage)
		return nil
	}
	return usageErrorf("admin: unknown command %q (valid commands: invalidate-session, revoke-subject, revoke-api-key, explain, stats)", cmd)
}

type cli struct {
	addr    string
	timeout time.Duration
	json    bool
	stdout  io.Writer

	tokenFile                             string
	tlsCA, tlsCert, tlsKey, tlsServerName string
}

// flagSet returns a flag set with the flags every command accepts.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.addr, "addr", c.addr, "the service's admin listener")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "give up after this long")
	fs.StringVar(&c.tokenFile, "token-file", c.tokenFile, "file holding the admin bearer token")
	fs.StringVar(&c.tlsCA, "tls-ca", c.tlsCA, "CA certificate(s) verifying the service (TLS)")
	fs.StringVar(&c.tlsCert, "tls-cert", c.tlsCert, "client certificate (mTLS)")
	fs.StringVar(&c.tlsKey, "tls-key", c.tlsKey, "client key (mTLS)")
	fs.StringVar(&c.tlsServerName, "tls-server-name", c.tlsServerName, "name the service's certificate must carry")
	return fs
}

// parse parses args and checks the common flags' values.
func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, Usage)
			return err
		}
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
			var valid []string
			fs.VisitAll(func(f *flag.Flag) { valid = append(valid, "--"+f.Name) })
			return usageErrorf("%s: unknown flag --%s (valid flags: %s)", fs.Name(), strings.TrimLeft(name, "-"), strings.Join(valid, ", "))
		}
		return usageErrorf("%s: %v", fs.Name(), err)
	}
	if _, _, err := net.SplitHostPort(c.addr); err != nil {
		return usageErrorf("%s: --addr: %v", fs.Name(), err)
	}
	if c.timeout <= 0 {
		return usageErrorf("%s: --timeout must be positive", fs.Name())
	}
	if (c.tlsCert == "") != (c.tlsKey == "") {
		return usageErrorf("%s: --tls-cert and --tls-key go together", fs.Name())
	}
	return nil
}

// operand parses a command's flags and returns its one operand.
func (c *cli) operand(fs *flag.FlagSet, args []string, what string) (string, error) {
	if err := c.parse(fs, args); err != nil {
		return "", err
	}
	switch fs.NArg() {
	case 0:
		return "", usageErrorf("%s: %s is required", fs.Name(), what)
	case 1:
		if fs.Arg(0) == "" {
			return "", usageErrorf("%s: %s is empty", fs.Name(), what)
		}
		return fs.Arg(0), nil
	}
	return "", usageErrorf("%s: unexpected arguments: %s", fs.Name(), strings.Join(fs.Args()[1:], " "))
}

func (c *cli) invalidate(ctx context.Context, cmd string, args []string) error {
	subject := cmd == "revoke-subject"
	what := "SESSION"
	fs := c.flagSet("admin " + cmd)
	var issuer string
	if subject {
		what = "USER"
		fs.StringVar(&issuer, "issuer", "", "the user's issuer: its configured name or its iss")
	}
	id, err := c.operand(fs, args, what)
	if err != nil {
		return err
	}
	if subject && issuer == "" {
		return usageErrorf("%s: --issuer is required: a user is (issuer, subject)", cmd)
	}
	var d *adminv1.Dropped
	err = c.call(ctx, cmd, func(ctx context.Context, ac adminv1.AdminServiceClient) error {
		if subject {
			resp, err := ac.RevokeSubject(ctx, &adminv1.RevokeSubjectRequest{Issuer: issuer, Subject: id})
			d = resp.GetDropped()
			return err
		}
		resp, err := ac.InvalidateSession(ctx, &adminv1.InvalidateSessionRequest{SessionId: id})
		d = resp.GetDropped()
		return err
	})
	if err != nil {
		return err
	}
	if subject {
		return printDropped(c.stdout, "user", issuer+" "+id, "revoked", d)
	}
	return printDropped(c.stdout, "session", id, "invalidated", d)
}

func (c *cli) revokeAPIKey(ctx context.Context, args []string) error {
	const cmd = "revoke-api-key"
	fs := c.flagSet("admin " + cmd)
	var issuer string
	fs.StringVar(&issuer, "issuer", "", "the api_keys issuer's configured name")
	id, err := c.operand(fs, args, "ID")
	if err != nil {
		return err
	}
	if issuer == "" {
		return usageErrorf("%s: --issuer is required: a key is (issuer, id)", cmd)
	}
	var resp *adminv1.RevokeAPIKeyResponse
	err = c.call(ctx, cmd, func(ctx context.Context, ac adminv1.AdminServiceClient) error {
		var err error
		resp, err = ac.RevokeAPIKey(ctx, &adminv1.RevokeAPIKeyRequest{Issuer: issuer, KeyId: id})
		return err
	})
	if err != nil {
		return err
	}
	return printKeyRevocation(c.stdout, issuer, id, resp)
}

func (c *cli) explain(ctx context.Context, args []string) error {
	fs := c.flagSet("admin explain")
	fs.BoolVar(&c.json, "json", false, "print the whole ExplainResponse as protojson")
	file, err := c.operand(fs, args, "REQUEST.json")
	if err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("admin explain: %w", err)
	}
	req, err := parseCheckRequest(data)
	if err != nil {
		return fmt.Errorf("admin explain: %s: %w", file, err)
	}
	packed, err := anypb.New(req)
	if err != nil {
		return fmt.Errorf("admin explain: %w", err)
	}
	var resp *adminv1.ExplainResponse
	err = c.call(ctx, "explain", func(ctx context.Context, ac adminv1.AdminServiceClient) error {
		var err error
		resp, err = ac.Explain(ctx, &adminv1.ExplainRequest{CheckRequest: packed})
		return err
	})
	if err != nil {
		return err
	}
	if err := PrintExplanation(c.stdout, resp, c.json); err != nil {
		return fmt.Errorf("admin explain: %w", err)
	}
	if !resp.GetAllowed() {
		return fmt.Errorf("%w: %d %s", ErrDenied, resp.GetHttpStatus(), resp.GetOutcome())
	}
	return nil
}

func (c *cli) stats(ctx context.Context, args []string) error {
	fs := c.flagSet("admin stats")
	fs.BoolVar(&c.json, "json", false, "print the StatsResponse as protojson")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("admin stats: unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var resp *adminv1.StatsResponse
	err := c.call(ctx, "stats", func(ctx context.Context, ac adminv1.AdminServiceClient) error {
		var err error
		resp, err = ac.Stats(ctx, &adminv1.StatsRequest{})
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return writeJSON(c.stdout, resp)
	}
	return printStats(c.stdout, resp)
}

// call connects to the admin listener and runs one call with the timeout.
func (c *cli) call(ctx context.Context, cmd string, fn func(context.Context, adminv1.AdminServiceClient) error) error {
	creds, err := c.transport()
	if err != nil {
		return fmt.Errorf("admin %s: %w", cmd, err)
	}
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("admin %s: %w", cmd, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.tokenFile != "" {
		tok, err := readToken(c.tokenFile)
		if err != nil {
			return fmt.Errorf("admin %s: %w", cmd, err)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	if err := fn(ctx, adminv1.NewAdminServiceClient(conn)); err != nil {
		return &rpcError{cmd: cmd, addr: c.addr, st: status.Convert(err)}
	}
	return nil
}

// transport is TLS when any TLS flag is set, cleartext otherwise.
func (c *cli) transport() (credentials.TransportCredentials, error) {
	if c.tlsCA == "" && c.tlsCert == "" && c.tlsServerName == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.tlsServerName}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate", c.tlsCA)
		}
	}
	if c.tlsCert != "" {
		kp, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	return credentials.NewTLS(cfg), nil
}

// readToken reads the token: the file's first non-empty line.
func readToken(path string) (string, error) {
	data, err := secrets.Load(nil, "", path)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(data, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line, nil
		}
	}
	return "", fmt.Errorf("--token-file %s: no token", path)
}

// parseCheckRequest reads a CheckRequest in protojson, strictly: an unknown
// field is an error, not silently dropped.
func parseCheckRequest(data []byte) (*authv3.CheckRequest, error) {
	req := new(authv3.CheckRequest)
	if err := protojson.Unmarshal(data, req); err != nil {
		return nil, fmt.Errorf("not a protojson envoy.service.auth.v3.CheckRequest: %w", err)
	}
	return req, nil
}

// rpcError is a failed call; status.Code and status.FromError see its code.
type rpcError struct {
	cmd, addr string
	st        *status.Status
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("admin %s: %s: %s: %s", e.cmd, e.addr, e.st.Code(), e.st.Message())
}

// GRPCStatus lets the status package read the call's status.
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

// usageError is a mistake in how the command was called; it matches ErrUsage.
type usageError struct{ msg string }

func usageErrorf(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }
