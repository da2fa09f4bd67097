// Package helm holds the test of the extauthz Helm chart: it is rendered
// with the helm binary for the default values and every documented value set
// under extauthz/examples, and every rendered object is decoded strictly into
// its Kubernetes API type (an unknown or misspelled field fails), then the
// objects are checked against each other and against what the service needs.
package helm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/extauthz/extauthz/internal/config"
)

const (
	chart = "extauthz"
	// helmVersion is the helm the deps step builds (scripts/install-helm.sh).
	helmVersion = "v3.22.0"
	kubeVersion = "1.31.0"
)

// helmBinary finds helm: $HELM, the deps step's cache, then PATH. Under CI
// a missing helm fails the test: the deps step should have built it.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home := os.Getenv("HOME")
		if home == "" {
			home = "/tmp" // as scripts/install-helm.sh
		}
		cache = filepath.Join(home, ".cache")
	}
	if p := filepath.Join(cache, "extauthz-tools", "helm-"+helmVersion, "helm"); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("helm not found: make deps builds it (scripts/install-helm.sh)")
	}
	t.Skip("helm not found: run scripts/install-helm.sh")
	return ""
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// render runs helm template with the value files and returns the documents.
func render(t *testing.T, values ...string) ([]rendered, error) {
	t.Helper()
	args := []string{"template", "rel", chart, "--namespace", "extauthz", "--kube-version", kubeVersion}
	for _, v := range values {
		args = append(args, "-f", v)
	}
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template: %v: %s", err, stderr.String())
	}
	return split(t, out), nil
}

// rendered is one object of the rendered chart.
type rendered struct {
	kind, name string
	raw        []byte
}

func split(t *testing.T, out []byte) []rendered {
	t.Helper()
	var docs []rendered
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		var meta struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		if err := n.Decode(&meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "" {
			continue // an empty document
		}
		raw, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, rendered{meta.Kind, meta.Metadata.Name, raw})
	}
	return docs
}

// serviceMonitor is the part of the Prometheus Operator's CRD the chart
// uses; strict decoding refuses anything else.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// objects are the decoded objects of one rendering.
type objects struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
	configMap  *corev1.ConfigMap
	account    *corev1.ServiceAccount
	pdb        *policyv1.PodDisruptionBudget
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	netpol     *networkingv1.NetworkPolicy
	monitor    *serviceMonitor
}

// decode decodes every document strictly into its API type.
func decode(t *testing.T, docs []rendered) objects {
	t.Helper()
	var o objects
	for _, d := range docs {
		var into any
		switch d.kind {
		case "Deployment":
			o.deployment = new(appsv1.Deployment)
			into = o.deployment
		case "Service":
			o.service = new(corev1.Service)
			into = o.service
		case "ConfigMap":
			o.configMap = new(corev1.ConfigMap)
			into = o.configMap
		case "ServiceAccount":
			o.account = new(corev1.ServiceAccount)
			into = o.account
		case "PodDisruptionBudget":
			o.pdb = new(policyv1.PodDisruptionBudget)
			into = o.pdb
		case "HorizontalPodAutoscaler":
			o.hpa = new(autoscalingv2.HorizontalPodAutoscaler)
			into = o.hpa
		case "NetworkPolicy":
			o.netpol = new(networkingv1.NetworkPolicy)
			into = o.netpol
		case "ServiceMonitor":
			o.monitor = new(serviceMonitor)
			into = o.monitor
		default:
			t.Errorf("%s %s: a kind the chart should not render (a Secret? the chart takes secrets by reference)", d.kind, d.name)
			continue
		}
		if err := k8syaml.UnmarshalStrict(d.raw, into); err != nil {
			t.Errorf("%s %s does not decode strictly: %v\n%s", d.kind, d.name, err, d.raw)
		}
	}
	if o.deployment == nil || o.service == nil || o.configMap == nil {
		t.Fatal("the chart rendered no Deployment, Service or ConfigMap")
	}
	return o
}

// valueSets are the default values and each documented value set.
func valueSets(t *testing.T) map[string][]string {
	t.Helper()
	sets := map[string][]string{"default": nil}
	files, err := filepath.Glob(filepath.Join(chart, "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("%d documented value sets, want at least 3", len(files))
	}
	for _, f := range files {
		sets[strings.TrimSuffix(filepath.Base(f), ".yaml")] = []string{f}
	}
	return sets
}

func TestChart(t *testing.T) {
	for name, values := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			docs, err := render(t, values...)
			if err != nil {
				t.Fatal(err)
			}
			o := decode(t, docs)
			checkChart(t, o)
		})
	}
}

func args(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(a, "=")
		m[k] = v
	}
	return m
}

func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func addrPort(t *testing.T, addr string) (string, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, _ := strconv.Atoi(port)
	return host, int32(n)
}

func checkChart(t *testing.T, o objects) {
	pod := o.deployment.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	a := args(c)
	if c.Args[0] != "serve" {
		t.Errorf("args %v do not start with serve", c.Args)
	}

	// Listener layout: gRPC, optional HTTP and ops on the pod network,
	// admin on loopback unless exposed.
	for _, l := range []struct{ flag, port string }{{"--grpc-addr", "grpc"}, {"--ops-addr", "ops"}, {"--http-addr", "http"}} {
		addr, ok := a[l.flag]
		if !ok {
			if l.port != "http" {
				t.Errorf("no %s", l.flag)
			}
			continue
		}
		host, port := addrPort(t, addr)
		if host != "0.0.0.0" || containerPort(c, l.port) != port {
			t.Errorf("%s=%s, container port %s %d: want 0.0.0.0 and the same port", l.flag, addr, l.port, containerPort(c, l.port))
		}
	}
	// The service refuses auto with proxies beyond loopback trusted.
	if tp := a["--http-trusted-proxies"]; tp != "" && !strings.HasPrefix(tp, "127.") {
		if conv := a["--http-convention"]; conv == "" || conv == "auto" {
			t.Errorf("--http-trusted-proxies=%s without a proxy's --http-convention: the service would refuse to start", tp)
		}
	}
	adminHost, adminPort := addrPort(t, a["--admin-addr"])
	exposed := containerPort(c, "admin") != 0
	switch {
	case !exposed && adminHost != "127.0.0.1":
		t.Errorf("--admin-addr=%s without an admin port: the admin listener must stay on loopback", a["--admin-addr"])
	case exposed && (adminHost != "0.0.0.0" || containerPort(c, "admin") != adminPort):
		t.Errorf("--admin-addr=%s does not match the admin container port", a["--admin-addr"])
	case exposed && a["--admin-token-file"] == "":
		t.Error("the admin listener is exposed without --admin-token-file")
	case exposed && o.netpol == nil:
		t.Error("the admin listener is exposed without a NetworkPolicy")
	}
	if o.netpol != nil {
		checkNetworkPolicy(t, o, exposed)
	}

	// Probes on the ops port.
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		want := "/healthz"
		if name == "readiness" {
			want = "/readyz"
		}
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Port.String() != "ops" {
			t.Errorf("%s probe %+v: want GET %s on the ops port", name, p, want)
		}
	}

	// Shutdown: preStop sleep = --drain-period, and the grace period
	// covers drain and shutdown.
	drain, err1 := strconv.Atoi(strings.TrimSuffix(a["--drain-period"], "s"))
	shutdown, err2 := strconv.Atoi(strings.TrimSuffix(a["--shutdown-timeout"], "s"))
	if err1 != nil || err2 != nil {
		t.Fatalf("--drain-period %q, --shutdown-timeout %q: want whole seconds", a["--drain-period"], a["--shutdown-timeout"])
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != int64(drain) {
		t.Errorf("preStop %+v: want a sleep of --drain-period (%ds)", c.Lifecycle, drain)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < int64(drain+shutdown) {
		t.Errorf("terminationGracePeriodSeconds %v < drain %d + shutdown %d", g, drain, shutdown)
	}

	// Security context.
	psc, sc := pod.Spec.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("the container must run as non-root, read-only, without privilege escalation and with every capability dropped")
	}

	// Configuration: mounted, parsed, and rolled on change.
	body, ok := o.configMap.Data["config.yaml"]
	if !ok || a["--config"] != "/etc/extauthz/config.yaml" {
		t.Fatalf("--config=%s, ConfigMap keys %v", a["--config"], o.configMap.Data)
	}
	cfg, err := config.Parse([]byte(body))
	if err != nil {
		t.Fatalf("the rendered configuration does not parse:\n%v\n%s", err, body)
	}
	sum := sha256.Sum256([]byte(strings.TrimSuffix(body, "\n")))
	if got := pod.Annotations["checksum/config"]; got != hex.EncodeToString(sum[:]) {
		t.Errorf("checksum/config %q is not the configuration's sha256: a change would not roll the pods", got)
	}
	mounted := func(path string) bool {
		for _, m := range c.VolumeMounts {
			if strings.HasPrefix(path, m.MountPath+"/") && slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }) {
				return true
			}
		}
		return false
	}
	if !mounted(a["--config"]) {
		t.Error("the configuration file is not mounted")
	}
	// Secrets by reference: every variable the configuration reads comes
	// from a secretKeyRef; every file it names is mounted.
	for _, env := range configEnv(cfg) {
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == env })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil {
			t.Errorf("the configuration reads %s, which the container does not take from a Secret", env)
		}
	}
	for _, f := range configFiles(cfg) {
		if !mounted(f) {
			t.Errorf("the configuration names %s, which is on no mounted volume", f)
		}
	}
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("volume %s is mounted writable", m.Name)
		}
	}

	// Service, PDB, HPA and ServiceMonitor select and reach the pods.
	labels := pod.Labels
	selects := func(sel map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !selects(o.service.Spec.Selector) {
		t.Error("the Service does not select the pods")
	}
	for _, p := range o.service.Spec.Ports {
		if containerPort(c, p.TargetPort.String()) == 0 {
			t.Errorf("Service port %s targets %s, which is no container port", p.Name, p.TargetPort.String())
		}
		if p.Name == "admin" && !exposed {
			t.Error("the Service exposes the admin port")
		}
	}
	if o.pdb == nil || o.pdb.Spec.Selector == nil || !selects(o.pdb.Spec.Selector.MatchLabels) {
		t.Error("no PodDisruptionBudget selecting the pods")
	}
	if o.hpa != nil {
		if o.hpa.Spec.ScaleTargetRef.Name != o.deployment.Name || o.hpa.Spec.MinReplicas == nil || *o.hpa.Spec.MinReplicas < 2 {
			t.Errorf("the HPA targets %s with at least %v replicas, want the Deployment and at least 2", o.hpa.Spec.ScaleTargetRef.Name, o.hpa.Spec.MinReplicas)
		}
		if o.deployment.Spec.Replicas != nil {
			t.Error("replicas set alongside an HPA: every rollout would reset the scale")
		}
	} else if r := o.deployment.Spec.Replicas; r == nil || *r < 2 {
		t.Error("fewer than 2 replicas: with fail-closed checks one replica is a single point of failure")
	}
	if m := o.monitor; m != nil {
		if !selects(m.Spec.Selector.MatchLabels) || len(m.Spec.Endpoints) != 1 || m.Spec.Endpoints[0].Port != "ops" || m.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor %+v: want /metrics on the Service's ops port", m.Spec)
		}
	}
	if o.account != nil && (o.account.AutomountServiceAccountToken == nil || *o.account.AutomountServiceAccountToken) {
		t.Error("the service account mounts an API token the service never uses")
	}
}

// checkNetworkPolicy: the admin port is open only to the listed peers.
func checkNetworkPolicy(t *testing.T, o objects, exposed bool) {
	t.Helper()
	adminRules := 0
	for _, rule := range o.netpol.Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port != nil && p.Port.String() == "admin" {
				adminRules++
				if len(rule.From) == 0 {
					t.Error("the NetworkPolicy admits anyone to the admin port")
				}
				if len(rule.Ports) != 1 {
					t.Error("the admin rule opens other ports to the admin peers only")
				}
			}
		}
	}
	if exposed != (adminRules == 1) {
		t.Errorf("exposed %v, %d NetworkPolicy rules for the admin port", exposed, adminRules)
	}
}

// configEnv lists the environment variables a configuration reads.
func configEnv(f *config.File) []string {
	var out []string
	for _, is := range f.Issuers {
		out = append(out, is.SecretEnv)
	}
	for _, x := range f.Exchanges {
		out = append(out, x.ClientAuth.ClientSecretEnv)
	}
	out = append(out, f.Redis.PasswordEnv, f.Redis.EncryptionKeyEnv)
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// configFiles lists the files a configuration names.
func configFiles(f *config.File) []string {
	var out []string
	for _, is := range f.Issuers {
		out = append(out, is.SecretFile, is.JWKSFile)
	}
	for _, x := range f.Exchanges {
		out = append(out, x.ClientAuth.ClientSecretFile, x.ClientAuth.PrivateKeyFile, x.ActorTokenFile)
	}
	for _, p := range f.Lineage.Peers {
		out = append(out, p.JWKSFile)
	}
	out = append(out, f.Lineage.Signing.KeyFile, f.Redis.TLSCAFile)
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// TestChartRefuses: values that would open the admin API or cut the drain
// short do not render.
func TestChartRefuses(t *testing.T) {
	tests := []struct {
		name, values, want string
	}{
		{"admin exposed without a token", "listeners: {admin: {expose: true, allowedFrom: [{podSelector: {}}]}}", "listeners.admin.expose needs listeners.admin.tokenSecret"},
		{"admin exposed to everyone", "listeners: {admin: {expose: true, tokenSecret: {name: a, key: b}}}", "listeners.admin.expose needs listeners.admin.allowedFrom"},
		{"grace shorter than the drain", "terminationGracePeriodSeconds: 10", "terminationGracePeriodSeconds must be at least"},
		{"redis without addresses", "redis: {enabled: true}", "redis.enabled needs redis.addrs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			os.WriteFile(f, []byte(tt.values), 0o600)
			_, err := render(t, f)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestChartChecksumFollowsConfig: a configuration change changes the pod
// template, so the Deployment rolls.
func TestChartChecksumFollowsConfig(t *testing.T) {
	sum := func(values string) string {
		f := filepath.Join(t.TempDir(), "values.yaml")
		os.WriteFile(f, []byte(values), 0o600)
		docs, err := render(t, f)
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, docs).deployment.Spec.Template.Annotations["checksum/config"]
	}
	a := sum("logLevel: info")
	b := sum("config: {issuers: [{name: x, secret_env: S}], routes: [{name: r, default: true, issuers: [x]}]}\nsecretEnv: [{name: S, secretName: s, key: k}]")
	if a == "" || a == b {
		t.Fatalf("checksum %q before and %q after a configuration change", a, b)
	}
}
