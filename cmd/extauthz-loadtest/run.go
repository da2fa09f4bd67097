package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/loadtest"
)

// errTargetMissed ends a run with -enforce whose report failed; the report
// already says why.
var errTargetMissed = errors.New("a scenario missed its target")

// allScenarios are the scenario names, in the order they run.
var allScenarios = []string{loadtest.ScenarioHS256, loadtest.ScenarioRS256, loadtest.ScenarioES256}

type runOptions struct {
	extauthz     string
	target       string
	dir          string
	duration     time.Duration
	warmup       time.Duration
	callers      int
	connections  int
	maxRequests  uint64
	scenarios    []string
	poolSize     int
	freshMax     int
	jsonOut      string
	enforce      bool
	readyTimeout time.Duration
	rounds       int
}

func parseRunFlags(args []string, e env) (runOptions, error) {
	var o runOptions
	var scenarios string
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.StringVar(&o.extauthz, "extauthz", filepath.Join("bin", "extauthz"), "extauthz binary to start (not built by this tool)")
	fs.StringVar(&o.target, "target", "", "gRPC address of an already running extauthz to measure instead of starting one (see the setup command)")
	fs.StringVar(&o.dir, "dir", "", "directory for keys, JWKS, config and server logs (default: a temporary one, removed afterwards); with -target, the directory the setup command wrote")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per server and scenario")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured warm-up before each measurement")
	fs.IntVar(&o.rounds, "rounds", 3, "alternate the two servers this many times per scenario (each slice -duration/rounds), so drift in the machine's speed hits both alike")
	fs.IntVar(&o.callers, "callers", loadtest.DefaultCallers, "concurrent callers, each with one request in flight")
	fs.IntVar(&o.connections, "connections", loadtest.DefaultConnections, "gRPC connections the callers share")
	fs.Uint64Var(&o.maxRequests, "max-requests", 0, "end a measurement after this many requests (0: only -duration bounds it)")
	fs.StringVar(&scenarios, "scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios to run: "+strings.Join(allScenarios, ", "))
	fs.IntVar(&o.poolSize, "pool-size", 10_000, "distinct RS256 tokens cycled in "+loadtest.ScenarioRS256)
	fs.IntVar(&o.freshMax, "fresh-max", 400_000, "most ES256 tokens signed for "+loadtest.ScenarioES256+" (bounds memory and set-up time)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the report as JSON to this file (- for standard output)")
	fs.BoolVar(&o.enforce, "enforce", false, "exit with status 1 when a scenario misses its target")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 30*time.Second, "how long to wait for the servers to become ready")
	if err := parseFlags(fs, args, e.stderr); err != nil {
		return o, err
	}

	var errs []error
	for name := range strings.SplitSeq(scenarios, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case !slices.Contains(allScenarios, name):
			errs = append(errs, fmt.Errorf("-scenarios: unknown scenario %q (known: %s)", name, strings.Join(allScenarios, ", ")))
		case !slices.Contains(o.scenarios, name):
			o.scenarios = append(o.scenarios, name)
		}
	}
	if len(o.scenarios) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("-scenarios: none given"))
	}
	if o.rounds < 1 {
		errs = append(errs, errors.New("-rounds must be at least 1"))
	}
	if o.duration <= 0 {
		errs = append(errs, errors.New("-duration must be positive"))
	}
	if o.warmup < 0 {
		errs = append(errs, errors.New("-warmup must not be negative"))
	}
	if o.readyTimeout <= 0 {
		errs = append(errs, errors.New("-ready-timeout must be positive"))
	}
	if o.callers < 1 || o.connections < 1 || o.connections > o.callers {
		errs = append(errs, fmt.Errorf("-callers %d and -connections %d: both must be positive, with no more connections than callers", o.callers, o.connections))
	}
	if o.poolSize < 1 || o.freshMax < 1 {
		errs = append(errs, errors.New("-pool-size and -fresh-max must be positive"))
	}
	if o.target == "" && o.extauthz == "" {
		errs = append(errs, errors.New("-extauthz or -target is required"))
	}
	if o.target != "" && o.dir == "" && o.needsKeys() {
		errs = append(errs, errors.New("-target needs -dir: the directory the setup command wrote and the service was started with (or run only -scenarios "+loadtest.ScenarioHS256+")"))
	}
	if o.target != "" && e.getenv(loadtest.SecretEnv) == "" && slices.Contains(o.scenarios, loadtest.ScenarioHS256) {
		errs = append(errs, fmt.Errorf("-target needs %s: the HS256 secret the service was started with", loadtest.SecretEnv))
	}
	if err := errors.Join(errs...); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// needsKeys reports whether a scenario signs with the RSA or EC key.
func (o runOptions) needsKeys() bool {
	return slices.Contains(o.scenarios, loadtest.ScenarioRS256) || slices.Contains(o.scenarios, loadtest.ScenarioES256)
}

func runCommand(ctx context.Context, args []string, e env) error {
	o, err := parseRunFlags(args, e)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr)
	if o.target == "" {
		if _, err := os.Stat(o.extauthz); err != nil {
			return usageError{fmt.Errorf("-extauthz: %w (build it first: go build -o bin/extauthz ./cmd/extauthz)", err)}
		}
	}

	dir := o.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "extauthz-loadtest-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	secret := []byte(e.getenv(loadtest.SecretEnv))
	if len(secret) == 0 {
		secret = loadtest.RandomSecret()
	}
	keys, setup, err := prepareKeys(o, dir, secret, log)
	if err != nil {
		return err
	}

	log.Info("starting the do-nothing server", slog.String("logs", filepath.Join(dir, "noop.log")))
	noop, noopAddr, err := startNoop(ctx, e.self, filepath.Join(dir, "noop.log"), o.readyTimeout)
	if err != nil {
		return err
	}
	defer noop.stop(5 * time.Second)

	serviceAddr := o.target
	if serviceAddr == "" {
		svc, addr, err := startService(ctx, o, e, setup, secret, log)
		if err != nil {
			return err
		}
		defer svc.stop(15 * time.Second)
		serviceAddr = addr
	}

	log.Info("load", slog.Int("callers", o.callers), slog.Int("connections", o.connections),
		slog.Duration("warmup", o.warmup), slog.Duration("duration", o.duration),
		slog.Int("gomaxprocs", runtime.GOMAXPROCS(0)), slog.Int("cpus", runtime.NumCPU()))
	minter := loadtest.NewMinter(keys, e.now)
	var scenarios []loadtest.Scenario
	for _, sc := range loadtest.StandardScenarios(minter, loadtest.ScenarioOptions{PoolSize: o.poolSize, FreshMax: o.freshMax, Log: log}) {
		if slices.Contains(o.scenarios, sc.Name) {
			scenarios = append(scenarios, sc)
		}
	}
	runner := &loadtest.Runner{
		NoopAddr:    noopAddr,
		ServiceAddr: serviceAddr,
		Load: loadtest.Config{
			Callers:     o.callers,
			Connections: o.connections,
			Warmup:      o.warmup,
			Duration:    o.duration,
			MaxRequests: o.maxRequests,
			Now:         e.now,
		},
		Log:    log,
		Rounds: o.rounds,
	}
	rep, err := runner.Run(ctx, scenarios)
	if err != nil {
		// A server that died mid-run explains the failure better.
		if exit := noop.exitError(); exit != nil {
			return fmt.Errorf("%w (%v)", err, exit)
		}
		return err
	}
	fmt.Fprintln(e.stdout)
	if err := rep.WriteTable(e.stdout); err != nil {
		return err
	}
	if err := writeJSON(o.jsonOut, rep, e); err != nil {
		return err
	}
	if o.enforce && !rep.Passed() {
		return errTargetMissed
	}
	return nil
}

// prepareKeys returns the signing keys and, when the service is started
// here, the setup directory's files. With -target the keys must be the ones
// the setup command wrote; otherwise keys found in -dir are reused and fresh
// ones made when there are none.
func prepareKeys(o runOptions, dir string, secret []byte, log *slog.Logger) (*loadtest.Keys, loadtest.Setup, error) {
	if o.target != "" {
		if !o.needsKeys() {
			return &loadtest.Keys{HMAC: secret}, loadtest.Setup{}, nil
		}
		keys, err := loadtest.LoadKeys(dir, secret)
		if err != nil {
			return nil, loadtest.Setup{}, fmt.Errorf("-dir: %w (write it with the setup command and start the service with its config)", err)
		}
		return keys, loadtest.Setup{}, nil
	}
	keys, err := loadtest.LoadKeys(dir, secret)
	if err != nil {
		log.Info("generating keys", slog.String("dir", dir))
		if keys, err = loadtest.GenerateKeys(secret); err != nil {
			return nil, loadtest.Setup{}, err
		}
	}
	setup, err := loadtest.WriteSetup(dir, keys)
	if err != nil {
		return nil, loadtest.Setup{}, err
	}
	return keys, setup, nil
}

// startService starts extauthz on free loopback ports with the generated
// config and waits until its readiness endpoint says yes.
func startService(ctx context.Context, o runOptions, e env, setup loadtest.Setup, secret []byte, log *slog.Logger) (*child, string, error) {
	grpcAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	adminAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	opsAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	logPath := filepath.Join(setup.Dir, "extauthz.log")
	args := []string{"serve", "--config", setup.ConfigFile, "--grpc-addr", grpcAddr, "--admin-addr", adminAddr, "--ops-addr", opsAddr}
	environ := append(os.Environ(), loadtest.SecretEnv+"="+string(secret))
	log.Info("starting the service", slog.String("binary", o.extauthz), slog.String("grpc", grpcAddr), slog.String("ops", opsAddr), slog.String("logs", logPath))
	svc, err := startChild("extauthz", o.extauthz, args, environ, logPath, nil)
	if err != nil {
		return nil, "", err
	}
	if err := waitReady(ctx, e.http, "http://"+opsAddr+"/readyz", svc, o.readyTimeout); err != nil {
		svc.stop(5 * time.Second)
		return nil, "", err
	}
	return svc, grpcAddr, nil
}

func writeJSON(path string, rep *loadtest.Report, e env) error {
	switch path {
	case "":
		return nil
	case "-":
		return rep.WriteJSON(e.stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
