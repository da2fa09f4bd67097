package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is what a subcommand's help says about it besides its flags.
type command struct {
	name     string // as typed after "extauthz"
	args     string // operands after the flags, e.g. "REQUEST.json"
	summary  string // one line: what it does
	examples []string
}

// flagSet returns an empty flag set for c that prints nothing itself:
// parseFlags prints help and usage errors in one format for every command.
func (c command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// usage writes the command's help: synopsis, every flag with its default,
// and examples.
func (c command) usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: extauthz %s [flags]", c.name)
	if c.args != "" {
		fmt.Fprintf(w, " %s", c.args)
	}
	fmt.Fprintf(w, "\n\n%s\n", c.summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		fs.VisitAll(func(f *flag.Flag) {
			kind, text := flag.UnquoteUsage(f)
			fmt.Fprintf(w, "  --%s", f.Name)
			if kind != "" {
				fmt.Fprintf(w, " %s", kind)
			}
			fmt.Fprintf(w, "\n      %s", text)
			if !zeroDefault(f.DefValue) {
				fmt.Fprintf(w, " (default %s)", f.DefValue)
			}
			fmt.Fprintln(w)
		})
	}
	if len(c.examples) > 0 {
		fmt.Fprint(w, "\nExample:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

func zeroDefault(v string) bool {
	return slices.Contains([]string{"", "0", "false", "0s", "[]"}, v)
}

// usageError marks errors in how the command was called (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// withHelp is a usage error followed by the command's help.
type withHelp struct {
	error
	help string
}

func (e withHelp) Unwrap() error { return e.error }

// usageErr wraps err as a usage error of c that shows c's help.
func (c command) usageErr(fs *flag.FlagSet, err error) error {
	var b strings.Builder
	c.usage(&b, fs)
	return withHelp{error: usageError{err}, help: b.String()}
}

// parseFlags parses args for c. -h and --help print the help on stdout and
// return flag.ErrHelp (exit 0); a mistake returns a usage error naming the
// valid flags. maxArgs bounds the operands (-1: any number).
func (c command) parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer, maxArgs int) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(stdout, fs)
			return err
		}
		if strings.HasPrefix(err.Error(), "flag provided but not defined: ") {
			name := strings.TrimLeft(strings.TrimPrefix(err.Error(), "flag provided but not defined: "), "-")
			var valid []string
			fs.VisitAll(func(f *flag.Flag) { valid = append(valid, "--"+f.Name) })
			err = fmt.Errorf("%s: unknown flag --%s (valid flags: %s)", c.name, name, strings.Join(valid, ", "))
		} else {
			err = fmt.Errorf("%s: %w", c.name, err)
		}
		return c.usageErr(fs, err)
	}
	if maxArgs >= 0 && fs.NArg() > maxArgs {
		return c.usageErr(fs, fmt.Errorf("%s: unexpected arguments: %s", c.name, strings.Join(fs.Args()[maxArgs:], " ")))
	}
	return nil
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help"
}

var serveCmd = command{
	name: "serve",
	summary: "Serve ext_authz v3 over gRPC, the optional HTTP forward-auth front end, and the operational\n" +
		"endpoints (/healthz, /readyz, /metrics) and admin API. Without --config the built-in default is\n" +
		"used: HS256 tokens signed with JWT_SECRET (at least 32 bytes), one catch-all route.\n" +
		"SIGTERM drains in-flight checks and exits 0; SIGHUP reloads the configuration.",
	examples: []string{"extauthz serve --config /etc/extauthz/config.yaml --grpc-addr 0.0.0.0:9191"},
}

// logLevels are the values --log-level accepts.
var logLevels = []string{"debug", "info", "warn", "error"}
