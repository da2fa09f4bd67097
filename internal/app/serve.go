package app

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/extauthz/extauthz/internal/adminapi"
	"github.com/extauthz/extauthz/internal/apikey"
	auditlog "github.com/extauthz/extauthz/internal/audit"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/httpauthz"
	"github.com/extauthz/extauthz/internal/metrics"
	"github.com/extauthz/extauthz/internal/ratelimit"
	"github.com/extauthz/extauthz/internal/recovery"
	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/tracing"
	adminv1 "github.com/extauthz/extauthz/proto/extauthz/admin/v1"
)

// Addrs are the addresses the service listens on ("" for a front end
// that is off).
type Addrs struct{ GRPC, Admin, Ops, HTTP string }

// ServeOptions are the serve command's settings.
type ServeOptions struct {
	ConfigFile      string
	GRPCAddr        string
	AdminAddr       string
	LogLevel        string
	LogFormat       string
	ShutdownTimeout time.Duration
	// DrainPeriod is how long checks keep being answered after SIGTERM
	// while /readyz and gRPC health already say NOT_SERVING, so that the
	// proxy and Kubernetes stop sending before the listeners close.
	DrainPeriod time.Duration
	// HTTPAddr serves the HTTP forward-auth front end (nginx auth_request,
	// Traefik ForwardAuth, Caddy forward_auth, Envoy http_service); "" is off.
	HTTPAddr       string
	HTTPConvention string
	HTTPTrusted    string
	HTTPPathPrefix string
	// HTTPReadTimeout bounds reading one forward-auth request, body
	// included; HTTPMaxConns and HTTPMaxBodies cap open connections and
	// requests with a body in progress (0: no cap).
	HTTPReadTimeout time.Duration
	HTTPMaxConns    int
	HTTPMaxBodies   int
	// WatchInterval is how often the configuration file is checked for
	// changes (0: not watched; SIGHUP still reloads).
	WatchInterval time.Duration
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin listener.
	Pprof bool
	// OpsAddr serves the read-only endpoints (probes, metrics, lineage
	// JWKS); "" is off. AdminAddr ("" off) serves the authenticated admin
	// API; see listeners.go.
	OpsAddr string
	// The admin listener's authentication: a bearer token file, and/or
	// TLS with client certificates whose identity is allowed.
	AdminTokenFile, AdminTLSCert, AdminTLSKey, AdminClientCA, AdminAllowedClients string
	// MemoryLimit is the runtime's soft memory limit: a size, "off", or
	// "auto"/"" (GOMEMLIMIT, else 90% of the cgroup limit); see memlimit.go.
	MemoryLimit string
	// Started, when set, is called with the bound addresses once the
	// listeners accept connections (tests listen on port 0).
	Started func(Addrs)
}

func serveFlags(o *ServeOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&o.ConfigFile, "config", "", "configuration file (YAML); without it the built-in default (JWT_SECRET, HS256) is used")
	fs.StringVar(&o.GRPCAddr, "grpc-addr", "127.0.0.1:9191", "address of the gRPC listener: ext_authz and the response path (ext_proc)")
	fs.StringVar(&o.AdminAddr, "admin-addr", "127.0.0.1:9092", "address of the admin listener: the admin gRPC API and elicitation completion (authenticated; loopback only without authentication)")
	fs.StringVar(&o.OpsAddr, "ops-addr", "127.0.0.1:9090", "address of the read-only ops listener: /healthz, /readyz, /metrics, lineage JWKS")
	fs.StringVar(&o.AdminTokenFile, "admin-token-file", "", "file of admin bearer tokens, one a line, at least 32 bytes each; re-read when it changes")
	fs.StringVar(&o.AdminTLSCert, "admin-tls-cert", "", "certificate of the admin listener (TLS)")
	fs.StringVar(&o.AdminTLSKey, "admin-tls-key", "", "key of the admin listener (TLS)")
	fs.StringVar(&o.AdminClientCA, "admin-client-ca", "", "CA that admin client certificates must chain to (mTLS)")
	fs.StringVar(&o.AdminAllowedClients, "admin-allowed-clients", "", "comma-separated client identities allowed to call the admin API: URI SAN (SPIFFE ID), DNS SAN or CN")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", "json", "log format: json or text")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", 15*time.Second, "after the drain period, how long in-flight checks may take to finish")
	fs.DurationVar(&o.DrainPeriod, "drain-period", 5*time.Second, "on SIGTERM, how long checks keep being answered while readiness already says not serving")
	fs.StringVar(&o.HTTPAddr, "http-addr", "", "address of the HTTP forward-auth front end (nginx auth_request, Traefik, Caddy, Envoy http_service); off when empty")
	fs.StringVar(&o.HTTPConvention, "http-convention", "auto", "how the HTTP front end learns the original request: auto, nginx, forwarded (Traefik, Caddy), envoy")
	fs.StringVar(&o.HTTPTrusted, "http-trusted-proxies", "127.0.0.0/8,::1/128", "comma-separated addresses or CIDRs whose forwarding headers the HTTP front end believes")
	fs.StringVar(&o.HTTPPathPrefix, "http-path-prefix", "", "path prefix Envoy's http_service puts before the original path (stripped)")
	fs.DurationVar(&o.HTTPReadTimeout, "http-read-timeout", 10*time.Second, "HTTP front end: the most one request, body included, may take to arrive")
	fs.IntVar(&o.HTTPMaxConns, "http-max-conns", 4096, "HTTP front end: most open connections (0: no cap)")
	fs.IntVar(&o.HTTPMaxBodies, "http-max-bodies", 256, "HTTP front end: most requests with a body in progress; more get 503 at once (0: no cap)")
	fs.DurationVar(&o.WatchInterval, "watch-interval", time.Second, "how often to check the configuration file for changes (0 disables; SIGHUP always reloads)")
	fs.StringVar(&o.MemoryLimit, "memory-limit", "auto", "soft memory limit of the Go runtime (e.g. 900MiB), \"off\", or \"auto\": GOMEMLIMIT, else 90% of the container's cgroup memory limit")
	fs.BoolVar(&o.Pprof, "pprof", false, "serve Go profiling endpoints under /debug/pprof/ on the admin listener")
	return fs
}

func serveCommand(ctx context.Context, args []string, env Env) error {
	var o ServeOptions
	var showVersion bool
	fs := serveFlags(&o)
	fs.BoolVar(&showVersion, "version", false, "print the version and exit")
	if err := serveCmd.parseFlags(fs, args, env.Stdout, 0); err != nil {
		return err
	}
	if _, err := newLogger(io.Discard, o.LogLevel, o.LogFormat); err != nil {
		return serveCmd.usageErr(fs, err) // with the help, like any usage error
	}
	if showVersion {
		fmt.Fprintln(env.Stdout, version())
		return nil
	}
	return Serve(ctx, o, env)
}

// loadConfig reads the file, or builds the built-in default; raw is the
// file's content (nil for the default).
func loadConfig(path string, env Env, log *slog.Logger) (f *config.File, raw []byte, err error) {
	if path != "" {
		raw, err = os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		f, err = config.Parse(raw)
		if err != nil {
			return nil, nil, fmt.Errorf("%s:\n%w", path, err)
		}
		return f, raw, nil
	}
	f, warnings, err := config.Default(env.Getenv)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range warnings {
		log.Warn("INSECURE DEFAULT: " + w)
	}
	return f, nil, nil
}

// sharedStore connects the optional Redis tier; nil when not configured.
func sharedStore(ctx context.Context, r config.Redis, env Env, log *slog.Logger, m *metrics.Metrics) (*shared.Store, error) {
	if len(r.Addrs) == 0 {
		return nil, nil
	}
	c := shared.Config{
		Addrs: r.Addrs, MasterName: r.MasterName, Cluster: r.Cluster, Username: r.Username, DB: r.DB,
		TLS: r.TLS, TLSServerName: r.TLSServerName, TLSCAFile: r.TLSCAFile, InsecureSkipVerify: r.InsecureSkipVerify,
		KeyPrefix: r.KeyPrefix, OpTimeout: r.OpTimeout.D(), FailOpen: r.FailOpen,
	}
	if r.PasswordEnv != "" {
		c.Password = env.Getenv(r.PasswordEnv)
	}
	if r.EncryptionKeyEnv != "" {
		key, err := base64.StdEncoding.DecodeString(env.Getenv(r.EncryptionKeyEnv))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("redis: %s must hold a base64-encoded 32-byte key", r.EncryptionKeyEnv)
		}
		c.EncryptionKey = key
	}
	shared.RouteClientLogs(log)
	s, err := shared.New(ctx, c, shared.Options{Logger: log, Observe: m.RedisOp})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return s, nil
}

// exchangedStats adds up the exchanged-token caches of the policy in force.
func exchangedStats(pl *check.Pipeline) cache.Stats {
	var sum cache.Stats
	for _, ex := range pl.Policy().Exchangers() {
		s := ex.Stats().Cache
		sum.Hits += s.Hits
		sum.Misses += s.Misses
		sum.Evictions += s.Evictions
		sum.Size += s.Size
	}
	return sum
}

// checkTracer is the pipeline's tracer: nil when tracing is off, so that
// an untraced check costs nothing (a nil *tracing.Tracing in the interface
// would not be nil).
func checkTracer(t *tracing.Tracing) check.Tracer {
	if t == nil {
		return nil
	}
	return t
}

// auditWriter starts the decision log; nil when the configuration names no
// sink. The otlp sink sends to the tracing collector.
func auditWriter(ctx context.Context, cfg *config.File, log *slog.Logger, m *metrics.Metrics) (*auditlog.Writer, error) {
	a := cfg.Audit
	if a.Sink == "" {
		return nil, nil
	}
	sample := 1.0
	if a.SampleAllowed != nil {
		sample = *a.SampleAllowed
	}
	t := tracingConfig(cfg.Tracing)
	w, err := auditlog.New(ctx, auditlog.Config{
		Sink: a.Sink, Decisions: a.Decisions, SampleAllowed: sample, LogArguments: a.LogArguments, QueueSize: a.QueueSize,
		File: auditlog.FileConfig{Path: a.File.Path, MaxSizeMB: a.File.MaxSize, MaxBackups: a.File.MaxBackups},
		OTLP: auditlog.OTLPConfig{Endpoint: t.Endpoint, Insecure: t.Insecure, ServiceName: t.ServiceName, Version: t.Version},
	}, auditlog.Options{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	m.Audit(w.Written, w.Dropped, w.Failed)
	return w, nil
}

// rateLimiter counts requests against the configured limits: shared
// through Redis when the tier is configured, else in this process. It
// exists even without limits, so that a reload can add some.
func rateLimiter(store *shared.Store, log *slog.Logger, m *metrics.Metrics) *ratelimit.Limiter {
	o := ratelimit.Options{Logger: log}
	if store != nil {
		o.Redis, o.Prefix, o.Timeout = store.Client(), store.KeyPrefix(), store.OpTimeout()
	}
	l := ratelimit.New(o)
	m.RateLimiter(l.Fallbacks, l.RedisErrors)
	return l
}

func tracingConfig(t config.Tracing) tracing.Config {
	ratio := 1.0
	if t.SampleRatio != nil {
		ratio = *t.SampleRatio
	}
	return tracing.Config{Endpoint: t.OTLPEndpoint, Insecure: t.Insecure, SampleRatio: ratio, ServiceName: t.ServiceName, Version: version()}
}

// defaultGCPercent trades a few megabytes of heap for fewer collections: the
// service's live heap is small and its allocations short-lived, so Go's
// default (100) collects many times a second under load. GOGC overrides it.
const defaultGCPercent = 400

// Serve runs the service until ctx is done, then drains and returns nil.
// Every flag is checked (build) before anything is read, dialled or
// listened on (run).
func Serve(ctx context.Context, o ServeOptions, env Env) error {
	s, err := build(o, env)
	if err != nil {
		return err
	}
	return s.run(ctx, env)
}

// run starts the service from checked settings and serves until ctx is
// done; what it opened is closed on the way out, newest first.
func (s settings) run(ctx context.Context, env Env) error {
	if env.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	s.memory.apply()
	s.log.Info("memory limit", slog.String("source", s.memory.Source), slog.Int64("bytes", s.memory.Bytes))
	var c closers
	defer c.closeAll(s.log)
	k, err := s.openCore(ctx, env, &c)
	if err != nil {
		return err
	}
	f, err := s.openFronts(k, &c)
	if err != nil {
		return err
	}
	return s.serve(ctx, k, f)
}

// core is what the front ends share: the configuration, metrics, the
// optional shared store and the pipeline with its reloader.
type core struct {
	cfg      *config.File
	m        *metrics.Metrics
	store    *shared.Store
	pipeline *check.Pipeline
	proc     *extprocauthz.Server // the response path (Envoy ext_proc)
	reload   *reloader            // nil on the built-in default: no file to reload
	draining atomic.Bool          // set on SIGTERM: not ready, still answering
}

// ready is what /readyz and gRPC health say: not before the key sets have
// loaded and, with a shared store, the revocations have been read from it
// once (whatever redis.required_for_ready says: a replica that has not
// read them refuses every identified caller).
func (k *core) ready() bool {
	return !k.draining.Load() && k.pipeline.Ready() &&
		(k.store == nil || !k.cfg.Redis.RequiredForReady || k.store.Ready())
}

// openCore reads the configuration and sets up the tracer, the shared
// store, the policy and the pipeline, with reloads.
func (s settings) openCore(ctx context.Context, env Env, c *closers) (*core, error) {
	cfg, raw, err := loadConfig(s.ConfigFile, env, s.log)
	if err != nil {
		return nil, err
	}
	elicitKey, err := elicitationKey(cfg.Elicitations, env)
	if err != nil {
		return nil, err
	}
	k := &core{cfg: cfg, m: metrics.New()}
	tr, err := tracing.New(ctx, tracingConfig(cfg.Tracing))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	c.add("tracer", func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return tr.Shutdown(sctx)
	})
	// One HTTP client for JWKS, discovery and token exchange, traced when
	// tracing is on.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: tr.Transport(http.DefaultTransport)}
	// Key refreshes live as long as the service, not as long as a signal
	// context: they stop when the policy is closed.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	c.add("background tasks", func() error { stopBackground(); return nil })
	if k.store, err = sharedStore(bg, cfg.Redis, env, s.log, k.m); err != nil {
		return nil, err
	}
	if k.store != nil {
		c.add("shared store", k.store.Close)
	}
	var current atomic.Pointer[check.Pipeline] // for key removals, set once the pipeline exists
	deps := check.Deps{Logger: s.log, Getenv: env.Getenv, OnJWKSFetch: k.m.JWKSFetch, OnSTSCall: k.m.STSCall, OnCredential: k.m.CredentialVerified, HTTPClient: httpClient, Shared: k.store,
		KeySources: newKeySources(bg, cfg, httpClient, s.log, k.m, &current),
		// Revoked API keys stay revoked across reloads.
		APIKeyRevocations: apikey.NewRevocations(nil)}
	policy, err := check.Compile(bg, cfg, deps)
	if err != nil {
		return nil, err
	}
	c.add("policy", func() error {
		if pl := current.Load(); pl != nil {
			policy = pl.Policy() // the one in force after reloads
		}
		policy.Close()
		return nil
	})
	decisions, err := auditWriter(bg, cfg, s.log, k.m)
	if err != nil {
		return nil, err
	}
	if decisions != nil {
		c.add("audit log", func() error {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return decisions.Close(sctx)
		})
	}
	k.pipeline, err = check.New(policy, check.Options{Logger: s.log, Observer: k.m, Shared: k.store, ElicitationKey: elicitKey, Tracer: checkTracer(tr),
		Audit: decisions, RateLimiter: rateLimiter(k.store, s.log, k.m)})
	if err != nil {
		return nil, err
	}
	current.Store(k.pipeline)
	k.proc = extprocauthz.NewServer(k.pipeline, extprocauthz.Options{Logger: s.log, Observer: k.m})
	k.observe()
	if s.ConfigFile != "" {
		k.reload = &reloader{path: s.ConfigFile, pipeline: k.pipeline, deps: deps, metrics: k.m, log: s.log, lifetime: bg, grace: 10 * time.Second}
		k.reload.remember(raw)
		if s.WatchInterval > 0 {
			go k.reload.watch(bg, s.WatchInterval)
		}
	}
	if k.store != nil {
		k.follow(bg)
	}
	return k, nil
}

// elicitationCompleted announces a completed elicitation to the client's
// open stream: here, and through the bus on the replica that holds it.
func (k *core) elicitationCompleted(ctx context.Context, p elicit.Pending) {
	k.proc.ElicitationCompleted(p)
	if k.store != nil {
		_ = k.store.Publish(ctx, extprocauthz.CompletionEvent(p))
	}
}

// observe registers the pipeline's caches with the metrics.
func (k *core) observe() {
	pl := k.pipeline
	k.m.Cache("verdicts", pl.CacheStats)
	k.m.Cache("sessions", func() cache.Stats { return cache.Stats{Size: pl.SessionCount()} })
	k.m.Cache("elicitations", func() cache.Stats { return cache.Stats{Size: pl.ElicitationCount()} })
	k.m.Cache("exchanged_tokens", func() cache.Stats { return exchangedStats(pl) })
	k.m.Reloaded(nil)
}

// follow keeps this replica in step with the others through the shared
// store: their revocations and invalidations, and their reloads. It first
// reads the revocations the others made: briefly before serving, so that
// a replica starting beside a healthy Redis admits its first callers, then
// in the background until Redis answers, since the bus may never connect.
func (k *core) follow(bg context.Context) {
	// Long enough for both reads from a Redis that answers.
	first, cancel := context.WithTimeout(bg, 2*k.store.OpTimeout())
	loaded := k.pipeline.LoadRevocations(first)
	cancel()
	if !loaded {
		go k.pipeline.LoadRevocations(bg)
	}
	if k.reload != nil {
		k.reload.publish = func() { _ = k.store.Publish(bg, shared.Event{Kind: shared.EventConfig, At: time.Now()}) }
	}
	go k.store.Subscribe(bg, func(ev shared.Event) {
		k.pipeline.HandleEvent(bg, ev)
		k.proc.HandleEvent(ev) // another replica's completed elicitation
		if ev.Kind == shared.EventConfig && k.reload != nil {
			_ = k.reload.reload(false) // another replica saw a new file: look now
		}
	})
}

// fronts are the servers, listening.
type fronts struct {
	grpc      *grpc.Server
	health    *health.Server
	adminGRPC *grpc.Server
	admin     *http.Server
	ops       *http.Server
	http      *http.Server // nil when the forward-auth front end is off
	errc      chan error   // a server that stopped serving
	addrs     Addrs
}

// setHealth tells gRPC health checkers whether to send checks here.
func (f *fronts) setHealth(ready bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if ready {
		st = healthpb.HealthCheckResponse_SERVING
	}
	f.health.SetServingStatus("", st)
	f.health.SetServingStatus(authv3.Authorization_ServiceDesc.ServiceName, st)
	f.health.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, st)
}

// openFronts opens every listener, then serves the ext_authz gRPC API, the
// admin and ops listeners and the forward-auth front end on them.
func (s settings) openFronts(k *core, c *closers) (*fronts, error) {
	audit, adminTLS, err := adminSecurity(s, k.m)
	if err != nil {
		return nil, err
	}
	grpcLis, err := net.Listen("tcp", s.GRPCAddr)
	if err != nil {
		return nil, err
	}
	c.add("gRPC listener", grpcLis.Close)
	adminLis, err := listen(c, "admin", s.AdminAddr)
	if err != nil {
		return nil, err
	}
	opsLis, err := listen(c, "ops", s.OpsAddr)
	if err != nil {
		return nil, err
	}
	httpLis, err := listen(c, "HTTP", s.HTTPAddr)
	if err != nil {
		return nil, err
	}

	f := &fronts{errc: make(chan error, 4), health: health.NewServer()}
	f.grpc = grpc.NewServer(append(append(envoyauthz.ServerOptions(),
		// A handler's panic answers its call alone with an internal error
		// (Envoy's failure mode then decides), never the whole service.
		recovery.ServerOptions(s.log, k.m.HandlerPanicked)...),
		// Envoy keeps long-lived HTTP/2 connections and pings them.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		// A CheckRequest carries headers and at most the buffered body.
		grpc.MaxRecvMsgSize(8<<20),
		// A fixed pool of workers serves the streams instead of a new
		// goroutine (and stack growth) per check.
		grpc.NumStreamWorkers(uint32(4*runtime.GOMAXPROCS(0))),
	)...)
	envoyauthz.Register(f.grpc, envoyauthz.NewServer(k.pipeline))
	// The response path (Envoy ext_proc) shares the ext_authz listener:
	// Envoy reaches both through one cluster, and both decide with the
	// same pipeline (docs/extproc.md).
	extprocauthz.Register(f.grpc, k.proc)
	healthpb.RegisterHealthServer(f.grpc, f.health)
	f.setHealth(k.ready())

	// The admin gRPC API shares the admin listener, never the ext_authz one.
	f.adminGRPC = grpc.NewServer(append(audit.GRPCOptions(), grpc.MaxRecvMsgSize(8<<20))...)
	adminv1.RegisterAdminServiceServer(f.adminGRPC, adminapi.NewServer(&adminBackend{pipeline: k.pipeline, started: time.Now()}, adminapi.Options{Logger: s.log}))
	admin, limitAdmin := limitedServer(adminapi.Handler(f.adminGRPC, adminHTTPHandler(k.pipeline, audit, s.Pprof, k.elicitationCompleted)), adminLimits("admin"), k.m.SlowClient, k.m.Refused)
	admin.Protocols = adminapi.Protocols()
	admin.TLSConfig = adminTLS
	admin.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	ops, limitOps := limitedServer(opsHandler(k.pipeline, k.m, k.ready), adminLimits("ops"), k.m.SlowClient, k.m.Refused)
	f.admin, f.ops = admin, ops

	go func() { f.errc <- f.grpc.Serve(grpcLis) }()
	serveAdminOps(admin, limitListener(adminLis, limitAdmin), ops, limitListener(opsLis, limitOps), f.errc)
	if httpLis != nil {
		handler := httpauthz.NewHandler(k.pipeline, httpauthz.Options{Convention: s.httpConvention, TrustedProxies: s.httpTrusted, PathPrefix: s.HTTPPathPrefix, Logger: s.log})
		// As on gRPC: a handler's panic answers its request alone with 500,
		// logged and counted, instead of a dropped connection.
		handler = recovery.HTTP(handler, "forward-auth", s.log, k.m.HandlerPanicked)
		var limitFront func(net.Listener) net.Listener
		f.http, limitFront = limitedServer(handler, frontLimits(s.ServeOptions), k.m.SlowClient, k.m.Refused)
		go func() { f.errc <- f.http.Serve(limitFront(httpLis)) }()
	}
	f.addrs = Addrs{GRPC: grpcLis.Addr().String(), Admin: addrOf(adminLis), Ops: addrOf(opsLis), HTTP: addrOf(httpLis)}
	return f, nil
}

// serve answers until ctx is done or a server fails, reloading on SIGHUP
// and following readiness; then it drains and stops the servers.
func (s settings) serve(ctx context.Context, k *core, f *fronts) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	s.log.Info("serving", slog.String("grpc_addr", f.addrs.GRPC), slog.String("admin_addr", f.addrs.Admin),
		slog.String("ops_addr", f.addrs.Ops), slog.String("http_addr", f.addrs.HTTP), slog.String("version", version()))
	if s.Started != nil {
		s.Started(f.addrs)
	}

	// Readiness flips once every key set has loaded.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	// Health is set from the same reading the loop compares against: keys
	// that loaded since the first setHealth would otherwise never be told.
	isReady := k.ready()
	f.setHealth(isReady)
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-f.errc:
			serveErr = err
			break loop
		case <-hup:
			if k.reload == nil {
				s.log.Info("SIGHUP ignored: running on the built-in default, no file to reload")
				continue
			}
			_ = k.reload.reload(true)
		case <-tick.C:
			if r := k.ready(); r != isReady {
				isReady = r
				f.setHealth(r)
				s.log.Info("readiness changed", slog.Bool("ready", r))
			}
		}
	}

	if serveErr == nil {
		// SIGTERM: say not ready at once, keep answering while the proxy
		// and Kubernetes take this replica out, then finish what is in flight.
		k.draining.Store(true)
		f.setHealth(false)
		drain(s.log, s.DrainPeriod, f.errc, f.http)
	}
	stopServing(ctx, s.log, s.ShutdownTimeout, f.grpc, f.http, f.admin, f.ops)
	f.adminGRPC.Stop()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) && !errors.Is(serveErr, grpc.ErrServerStopped) {
		return serveErr
	}
	return nil
}
