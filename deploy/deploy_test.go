// Package deploy holds the offline checks of the Kubernetes, Istio and Envoy
// Gateway manifests under deploy/. No cluster and no CRD schemas are at hand,
// so the checks are structural: every document parses and has its kind's
// apiVersion, a name and a namespace; and the names that tie the manifests
// together resolve (probes to the ops port, the admin API on loopback only
// and in no Service, Service ports to container
// ports, the configuration to config.Parse and its secrets to the Secret, the
// Istio provider to the policies and the Service, the SecurityPolicies to the
// Service, their ReferenceGrant and their HTTPRoutes).
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/extauthz/extauthz/internal/config"
)

// doc is one YAML document of a manifest file.
type doc struct {
	file string
	node *yaml.Node
	meta struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name        string            `yaml:"name"`
			Namespace   string            `yaml:"namespace"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
	}
}

func (d doc) decode(t *testing.T, v any) {
	t.Helper()
	if err := d.node.Decode(v); err != nil {
		t.Fatalf("%s: %s %s: %v", d.file, d.meta.Kind, d.meta.Metadata.Name, err)
	}
}

// loadDocs reads every YAML document under deploy/.
func loadDocs(t *testing.T) []doc {
	t.Helper()
	var docs []doc
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && (path == "helm" || path == "observability") {
			return filepath.SkipDir // templates and rules, tested in their own directories
		}
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var n yaml.Node
			if err := dec.Decode(&n); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: document %d: %w", path, i, err)
			}
			d := doc{file: path, node: &n}
			if err := n.Decode(&d.meta); err != nil {
				return fmt.Errorf("%s: document %d: %w", path, i, err)
			}
			docs = append(docs, d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no manifests found")
	}
	return docs
}

// find returns the documents of kind, in file order.
func find(docs []doc, kind string) []doc {
	var out []doc
	for _, d := range docs {
		if d.meta.Kind == kind {
			out = append(out, d)
		}
	}
	return out
}

func one(t *testing.T, docs []doc, kind string) doc {
	t.Helper()
	found := find(docs, kind)
	if len(found) != 1 {
		t.Fatalf("%d documents of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// apiVersions are the group versions each kind is written in.
var apiVersions = map[string]string{
	"Kustomization":        "kustomize.config.k8s.io/v1beta1",
	"Namespace":            "v1",
	"ServiceAccount":       "v1",
	"ConfigMap":            "v1",
	"Secret":               "v1",
	"Service":              "v1",
	"Deployment":           "apps/v1",
	"PodDisruptionBudget":  "policy/v1",
	"IstioOperator":        "install.istio.io/v1alpha1",
	"AuthorizationPolicy":  "security.istio.io/v1",
	"Gateway":              "gateway.networking.k8s.io/v1",
	"HTTPRoute":            "gateway.networking.k8s.io/v1",
	"ReferenceGrant":       "gateway.networking.k8s.io/v1beta1",
	"SecurityPolicy":       "gateway.envoyproxy.io/v1alpha1",
	"EnvoyExtensionPolicy": "gateway.envoyproxy.io/v1alpha1",
	"EnvoyFilter":          "networking.istio.io/v1alpha3",
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestManifestsAreWellFormed(t *testing.T) {
	for _, d := range loadDocs(t) {
		m := d.meta
		where := fmt.Sprintf("%s: %s %q", d.file, m.Kind, m.Metadata.Name)
		want, known := apiVersions[m.Kind]
		switch {
		case !known:
			t.Errorf("%s: kind %q is not one these checks know", where, m.Kind)
			continue
		case m.APIVersion != want:
			t.Errorf("%s: apiVersion %q, want %q", where, m.APIVersion, want)
		}
		if m.Kind == "Kustomization" {
			continue
		}
		if !dnsLabel.MatchString(m.Metadata.Name) || len(m.Metadata.Name) > 63 {
			t.Errorf("%s: name is not a DNS label", where)
		}
		if m.Kind != "Namespace" && !dnsLabel.MatchString(m.Metadata.Namespace) {
			t.Errorf("%s: no namespace", where)
		}
	}
}

func TestKustomizationListsEveryManifest(t *testing.T) {
	docs := loadDocs(t)
	k := one(t, docs, "Kustomization")
	var kust struct {
		Namespace string   `yaml:"namespace"`
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name string `yaml:"name"`
		} `yaml:"images"`
	}
	k.decode(t, &kust)
	dir := filepath.Dir(k.file)
	var files []string
	for _, d := range docs {
		if filepath.Dir(d.file) == dir && d.file != k.file && !slices.Contains(files, filepath.Base(d.file)) {
			files = append(files, filepath.Base(d.file))
			if d.meta.Metadata.Namespace != kust.Namespace && d.meta.Kind != "Namespace" {
				t.Errorf("%s is in namespace %q, the kustomization sets %q", d.file, d.meta.Metadata.Namespace, kust.Namespace)
			}
		}
	}
	slices.Sort(files)
	if got := slices.Sorted(slices.Values(kust.Resources)); !slices.Equal(got, files) {
		t.Errorf("kustomization resources %v, files in %s %v", got, dir, files)
	}
	dep := deployment(t, docs)
	for _, img := range kust.Images {
		if img.Name != dep.container().Image {
			t.Errorf("kustomization sets image %q, the container runs %q", img.Name, dep.container().Image)
		}
	}
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string `yaml:"name"`
		ValueFrom struct {
			SecretKeyRef struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	StartupProbe    *probe `yaml:"startupProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type deploymentSpec struct {
	namespace string
	Spec      struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				ServiceAccountName string `yaml:"serviceAccountName"`
				SecurityContext    struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func (d deploymentSpec) container() container { return d.Spec.Template.Spec.Containers[0] }

func deployment(t *testing.T, docs []doc) deploymentSpec {
	t.Helper()
	d := one(t, docs, "Deployment")
	var dep deploymentSpec
	d.decode(t, &dep)
	dep.namespace = d.meta.Metadata.Namespace
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(dep.Spec.Template.Spec.Containers))
	}
	return dep
}

// containerPort returns the container port called name.
func (c container) port(name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("args %v have no %s", args, name)
	}
	return args[i+1]
}

func flagPort(t *testing.T, args []string, name string) int {
	t.Helper()
	host, p, err := net.SplitHostPort(flagValue(t, args, name))
	if err != nil {
		t.Fatal(err)
	}
	if host != "0.0.0.0" {
		t.Errorf("%s binds %q: unreachable from outside the pod", name, host)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestDeployment(t *testing.T) {
	docs := loadDocs(t)
	dep := deployment(t, docs)
	c := dep.container()
	if c.Args[0] != "serve" {
		t.Errorf("args %v do not start with serve", c.Args)
	}
	if got, want := c.port("grpc"), flagPort(t, c.Args, "--grpc-addr"); got != want || got == 0 {
		t.Errorf("container port grpc %d, --grpc-addr port %d", got, want)
	}
	if got, want := c.port("ops"), flagPort(t, c.Args, "--ops-addr"); got != want || got == 0 {
		t.Errorf("container port ops %d, --ops-addr port %d", got, want)
	}
	// The admin API has no authentication configured here: it must stay on
	// the pod's loopback, with no container port (the service would refuse
	// to start otherwise, and a port would invite a Service to publish it).
	host, adminPort, err := net.SplitHostPort(flagValue(t, c.Args, "--admin-addr"))
	if err != nil || !slices.Contains(c.Args, "--admin-addr") {
		t.Fatalf("--admin-addr: %v", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		if !slices.Contains(c.Args, "--admin-token-file") && !slices.Contains(c.Args, "--admin-client-ca") {
			t.Errorf("--admin-addr %s is not loopback and the admin API has no authentication", host)
		}
	}
	for _, p := range c.Ports {
		if strconv.Itoa(p.ContainerPort) == adminPort || p.Name == "admin" {
			t.Errorf("container port %s (%d) exposes the admin listener", p.Name, p.ContainerPort)
		}
	}
	for name, tc := range map[string]struct {
		p    *probe
		path string
	}{"readiness": {c.ReadinessProbe, "/readyz"}, "liveness": {c.LivenessProbe, "/healthz"}, "startup": {c.StartupProbe, "/healthz"}} {
		if tc.p == nil {
			t.Errorf("no %s probe", name)
			continue
		}
		if tc.p.HTTPGet.Path != tc.path || tc.p.HTTPGet.Port != "ops" {
			t.Errorf("%s probe GET %s on %s, want %s on the ops port", name, tc.p.HTTPGet.Path, tc.p.HTTPGet.Port, tc.path)
		}
	}
	for k, v := range dep.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not select the pod template", k, v)
		}
	}
	if dep.Spec.Replicas < 2 {
		t.Errorf("%d replicas: with fail-closed checks one replica is a single point of failure", dep.Spec.Replicas)
	}
	if !dep.Spec.Template.Spec.SecurityContext.RunAsNonRoot || c.SecurityContext.AllowPrivilegeEscalation == nil ||
		*c.SecurityContext.AllowPrivilegeEscalation || !c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the container must run as non-root, read-only, without privilege escalation")
	}
	if sa := dep.Spec.Template.Spec.ServiceAccountName; !slices.ContainsFunc(find(docs, "ServiceAccount"), func(d doc) bool { return d.meta.Metadata.Name == sa }) {
		t.Errorf("service account %q is not defined", sa)
	}
}

func TestServicePortsReachContainer(t *testing.T) {
	docs := loadDocs(t)
	dep := deployment(t, docs)
	var svc struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name        string `yaml:"name"`
				Port        int    `yaml:"port"`
				TargetPort  string `yaml:"targetPort"`
				AppProtocol string `yaml:"appProtocol"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	s := one(t, docs, "Service")
	s.decode(t, &svc)
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the pods", k, v)
		}
	}
	c := dep.container()
	for _, p := range svc.Spec.Ports {
		target := c.port(p.TargetPort)
		if n, err := strconv.Atoi(p.TargetPort); err == nil {
			target = n
		}
		if target == 0 || !slices.ContainsFunc(c.Ports, func(cp struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		}) bool {
			return cp.ContainerPort == target
		}) {
			t.Errorf("Service port %s targets %q, which is no container port", p.Name, p.TargetPort)
		}
	}
	_, adminPort, _ := net.SplitHostPort(flagValue(t, c.Args, "--admin-addr"))
	for _, p := range svc.Spec.Ports {
		if strconv.Itoa(p.Port) == adminPort || p.TargetPort == "admin" || p.TargetPort == adminPort {
			t.Errorf("Service port %s publishes the admin API", p.Name)
		}
	}
	grpc := servicePort(t, docs, "grpc")
	if grpc.TargetPort != "grpc" || grpc.AppProtocol != "grpc" {
		t.Errorf("Service port grpc = %+v, want targetPort grpc and appProtocol grpc (HTTP/2 to the service)", grpc)
	}
}

type svcPort struct {
	Name        string `yaml:"name"`
	Port        int    `yaml:"port"`
	TargetPort  string `yaml:"targetPort"`
	AppProtocol string `yaml:"appProtocol"`
}

// servicePort returns the extauthz Service's port called name.
func servicePort(t *testing.T, docs []doc, name string) svcPort {
	t.Helper()
	var svc struct {
		Spec struct {
			Ports []svcPort `yaml:"ports"`
		} `yaml:"spec"`
	}
	one(t, docs, "Service").decode(t, &svc)
	for _, p := range svc.Spec.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("the Service has no port %q", name)
	return svcPort{}
}

// loadConfig returns the extauthz configuration in the ConfigMap the
// Deployment mounts, parsed, after checking that --config names it.
func loadConfig(t *testing.T, docs []doc) *config.File {
	t.Helper()
	dep := deployment(t, docs)
	c := dep.container()
	path := flagValue(t, c.Args, "--config")
	var mapName string
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(path, m.MountPath+"/") {
			for _, v := range dep.Spec.Template.Spec.Volumes {
				if v.Name == m.Name {
					mapName = v.ConfigMap.Name
				}
			}
		}
	}
	if mapName == "" {
		t.Fatalf("--config %s is not in a mounted ConfigMap", path)
	}
	for _, d := range find(docs, "ConfigMap") {
		if d.meta.Metadata.Name != mapName {
			continue
		}
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		d.decode(t, &cm)
		body, ok := cm.Data[filepath.Base(path)]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s", mapName, filepath.Base(path))
		}
		cfg, err := config.Parse([]byte(body))
		if err != nil {
			t.Fatalf("ConfigMap %s: %s:\n%v", mapName, filepath.Base(path), err)
		}
		return cfg
	}
	t.Fatalf("ConfigMap %s is not defined", mapName)
	return nil
}

func TestConfigMapAndSecrets(t *testing.T) {
	docs := loadDocs(t)
	cfg := loadConfig(t, docs)
	c := deployment(t, docs).container()

	secrets := map[string]map[string]string{}
	for _, d := range find(docs, "Secret") {
		var s struct {
			Data       map[string]string `yaml:"data"`
			StringData map[string]string `yaml:"stringData"`
		}
		d.decode(t, &s)
		keys := map[string]string{}
		for k, v := range s.Data {
			keys[k] = v
		}
		for k, v := range s.StringData {
			keys[k] = v
		}
		secrets[d.meta.Metadata.Name] = keys
	}
	for _, is := range cfg.Issuers {
		if is.SecretEnv == "" {
			continue
		}
		i := slices.IndexFunc(c.Env, func(e struct {
			Name      string `yaml:"name"`
			ValueFrom struct {
				SecretKeyRef struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		}) bool {
			return e.Name == is.SecretEnv
		})
		if i < 0 {
			t.Errorf("issuer %s reads %s, which the container does not set", is.Name, is.SecretEnv)
			continue
		}
		ref := c.Env[i].ValueFrom.SecretKeyRef
		if _, ok := secrets[ref.Name][ref.Key]; !ok {
			t.Errorf("%s comes from Secret %s key %s, which is not defined", is.SecretEnv, ref.Name, ref.Key)
		}
	}
}

func TestIstio(t *testing.T) {
	docs := loadDocs(t)
	var op struct {
		Spec struct {
			MeshConfig struct {
				ExtensionProviders []struct {
					Name              string `yaml:"name"`
					EnvoyExtAuthzGrpc *struct {
						Service                   string `yaml:"service"`
						Port                      int    `yaml:"port"`
						Timeout                   string `yaml:"timeout"`
						FailOpen                  bool   `yaml:"failOpen"`
						StatusOnError             string `yaml:"statusOnError"`
						IncludeRequestBodyInCheck struct {
							MaxRequestBytes     int  `yaml:"maxRequestBytes"`
							AllowPartialMessage bool `yaml:"allowPartialMessage"`
							PackAsBytes         bool `yaml:"packAsBytes"`
						} `yaml:"includeRequestBodyInCheck"`
					} `yaml:"envoyExtAuthzGrpc"`
				} `yaml:"extensionProviders"`
			} `yaml:"meshConfig"`
		} `yaml:"spec"`
	}
	one(t, docs, "IstioOperator").decode(t, &op)
	providers := map[string]bool{}
	svc := one(t, docs, "Service").meta.Metadata
	for _, p := range op.Spec.MeshConfig.ExtensionProviders {
		g := p.EnvoyExtAuthzGrpc
		if g == nil {
			t.Errorf("provider %s is not envoyExtAuthzGrpc", p.Name)
			continue
		}
		providers[p.Name] = true
		if want := svc.Name + "." + svc.Namespace + ".svc.cluster.local"; g.Service != want {
			t.Errorf("provider %s calls %s, the Service is %s", p.Name, g.Service, want)
		}
		if want := servicePort(t, docs, "grpc").Port; g.Port != want {
			t.Errorf("provider %s calls port %d, the Service's grpc port is %d", p.Name, g.Port, want)
		}
		if g.FailOpen || g.StatusOnError != "503" || g.Timeout == "" {
			t.Errorf("provider %s must fail closed with 503 and a timeout", p.Name)
		}
		body := g.IncludeRequestBodyInCheck
		if body.MaxRequestBytes <= 0 || body.AllowPartialMessage || !body.PackAsBytes {
			t.Errorf("provider %s body settings %+v: want a limit, no partial bodies, raw bytes", p.Name, body)
		}
	}

	cfg := loadConfig(t, docs)
	var meshWide, perWorkload int
	for _, d := range find(docs, "AuthorizationPolicy") {
		var ap struct {
			Spec struct {
				Selector *struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
				Action   string `yaml:"action"`
				Provider struct {
					Name string `yaml:"name"`
				} `yaml:"provider"`
				Rules []struct {
					To []struct {
						Operation struct {
							Paths []string `yaml:"paths"`
						} `yaml:"operation"`
					} `yaml:"to"`
				} `yaml:"rules"`
			} `yaml:"spec"`
		}
		d.decode(t, &ap)
		name := d.meta.Metadata.Name
		if ap.Spec.Action != "CUSTOM" || !providers[ap.Spec.Provider.Name] {
			t.Errorf("policy %s: action %s provider %q, want CUSTOM with a provider of the mesh config", name, ap.Spec.Action, ap.Spec.Provider.Name)
		}
		// A rule with no HTTP field would also match TCP traffic, which
		// extauthz cannot judge.
		if len(ap.Spec.Rules) == 0 {
			t.Errorf("policy %s has no rules: a CUSTOM policy without rules matches nothing", name)
		}
		for _, r := range ap.Spec.Rules {
			if len(r.To) == 0 || slices.ContainsFunc(r.To, func(to struct {
				Operation struct {
					Paths []string `yaml:"paths"`
				} `yaml:"operation"`
			}) bool {
				return len(to.Operation.Paths) == 0
			}) {
				t.Errorf("policy %s has a rule without paths", name)
			}
		}
		switch {
		case ap.Spec.Selector == nil:
			meshWide++
			if d.meta.Metadata.Namespace != "istio-system" {
				t.Errorf("policy %s has no selector but is in %s, not the root namespace", name, d.meta.Metadata.Namespace)
			}
			var paths []string
			for _, r := range ap.Spec.Rules {
				for _, to := range r.To {
					paths = append(paths, to.Operation.Paths...)
				}
			}
			for _, p := range []string{"/mcp*", "/a2a*", "/.well-known/agent-card.json", "/.well-known/oauth-protected-resource"} {
				if !slices.Contains(paths, p) {
					t.Errorf("mesh-wide policy %s does not cover %s", name, p)
				}
			}
			// Hosts nobody listed reach the default route.
			if !slices.ContainsFunc(cfg.Routes, func(r config.Route) bool { return r.Default }) {
				t.Error("mesh-wide enforcement without a default route refuses every unlisted MCP server")
			}
		default:
			perWorkload++
			app := ap.Spec.Selector.MatchLabels["app"]
			host := app + "." + d.meta.Metadata.Namespace + ".svc.cluster.local"
			if !slices.ContainsFunc(cfg.Routes, func(r config.Route) bool { return slices.Contains(r.Hosts, host) }) {
				t.Errorf("policy %s covers %s, which no extauthz route names (Istio sends no route name)", name, host)
			}
		}
	}
	if meshWide != 1 || perWorkload != 1 {
		t.Errorf("%d mesh-wide and %d per-workload policies, want one of each", meshWide, perWorkload)
	}

	// extauthz is never behind its own policy.
	dep := deployment(t, docs)
	if dep.Spec.Template.Metadata.Annotations["sidecar.istio.io/inject"] != "false" {
		t.Error("the extauthz pods are not opted out of sidecar injection")
	}
	for _, d := range find(docs, "Namespace") {
		if d.meta.Metadata.Name == dep.namespace && d.meta.Metadata.Labels["istio-injection"] != "disabled" {
			t.Errorf("namespace %s does not disable injection", dep.namespace)
		}
	}
}

func TestEnvoyGateway(t *testing.T) {
	docs := loadDocs(t)
	cfg := loadConfig(t, docs)
	svc := one(t, docs, "Service").meta.Metadata
	grpcPort := servicePort(t, docs, "grpc").Port

	type ref struct{ Group, Kind, Name, Namespace string }
	var grants []struct {
		ns   string
		from []ref
		to   []ref
	}
	for _, d := range find(docs, "ReferenceGrant") {
		var rg struct {
			Spec struct {
				From []struct{ Group, Kind, Namespace string } `yaml:"from"`
				To   []struct{ Group, Kind, Name string }      `yaml:"to"`
			} `yaml:"spec"`
		}
		d.decode(t, &rg)
		g := struct {
			ns   string
			from []ref
			to   []ref
		}{ns: d.meta.Metadata.Namespace}
		for _, f := range rg.Spec.From {
			g.from = append(g.from, ref{Group: f.Group, Kind: f.Kind, Namespace: f.Namespace})
		}
		for _, to := range rg.Spec.To {
			g.to = append(g.to, ref{Group: to.Group, Kind: to.Kind, Name: to.Name})
		}
		grants = append(grants, g)
	}
	granted := func(fromNS, svcNS, svcName string) bool {
		for _, g := range grants {
			if g.ns == svcNS &&
				slices.Contains(g.from, ref{Group: "gateway.envoyproxy.io", Kind: "SecurityPolicy", Namespace: fromNS}) &&
				slices.Contains(g.to, ref{Group: "", Kind: "Service", Name: svcName}) {
				return true
			}
		}
		return false
	}

	type route struct {
		ns, gateway string
		hostnames   []string
	}
	routes := map[string]route{}
	for _, d := range find(docs, "HTTPRoute") {
		var hr struct {
			Spec struct {
				ParentRefs []struct {
					Name string `yaml:"name"`
				} `yaml:"parentRefs"`
				Hostnames []string `yaml:"hostnames"`
			} `yaml:"spec"`
		}
		d.decode(t, &hr)
		if len(hr.Spec.ParentRefs) != 1 {
			t.Fatalf("HTTPRoute %s: %d parents, want 1", d.meta.Metadata.Name, len(hr.Spec.ParentRefs))
		}
		routes[d.meta.Metadata.Namespace+"/"+d.meta.Metadata.Name] = route{d.meta.Metadata.Namespace, hr.Spec.ParentRefs[0].Name, hr.Spec.Hostnames}
	}
	for key, r := range routes {
		if !slices.ContainsFunc(find(docs, "Gateway"), func(d doc) bool {
			return d.meta.Metadata.Namespace == r.ns && d.meta.Metadata.Name == r.gateway
		}) {
			t.Errorf("HTTPRoute %s attaches to Gateway %s, which is not defined in %s", key, r.gateway, r.ns)
		}
	}

	policies := find(docs, "SecurityPolicy")
	if len(policies) == 0 {
		t.Fatal("no SecurityPolicy")
	}
	covered := map[string]bool{}
	for _, d := range policies {
		var sp struct {
			Spec struct {
				TargetRefs []struct{ Group, Kind, Name string } `yaml:"targetRefs"`
				ExtAuth    struct {
					GRPC struct {
						BackendRefs []struct {
							Name      string `yaml:"name"`
							Namespace string `yaml:"namespace"`
							Port      int    `yaml:"port"`
						} `yaml:"backendRefs"`
					} `yaml:"grpc"`
					BodyToExtAuth struct {
						MaxRequestBytes int `yaml:"maxRequestBytes"`
					} `yaml:"bodyToExtAuth"`
					Timeout           string `yaml:"timeout"`
					FailOpen          *bool  `yaml:"failOpen"`
					StatusOnError     int    `yaml:"statusOnError"`
					ContextExtensions []struct {
						Name  string `yaml:"name"`
						Type  string `yaml:"type"`
						Value string `yaml:"value"`
					} `yaml:"contextExtensions"`
				} `yaml:"extAuth"`
			} `yaml:"spec"`
		}
		d.decode(t, &sp)
		name, ns := d.meta.Metadata.Name, d.meta.Metadata.Namespace
		ea := sp.Spec.ExtAuth
		if len(ea.GRPC.BackendRefs) != 1 {
			t.Fatalf("SecurityPolicy %s: %d backends, want the extauthz Service", name, len(ea.GRPC.BackendRefs))
		}
		b := ea.GRPC.BackendRefs[0]
		if b.Name != svc.Name || b.Namespace != svc.Namespace || b.Port != grpcPort {
			t.Errorf("SecurityPolicy %s calls %s/%s:%d, the Service is %s/%s:%d", name, b.Namespace, b.Name, b.Port, svc.Namespace, svc.Name, grpcPort)
		}
		if b.Namespace != ns && !granted(ns, b.Namespace, b.Name) {
			t.Errorf("SecurityPolicy %s in %s references Service %s/%s without a ReferenceGrant", name, ns, b.Namespace, b.Name)
		}
		if ea.FailOpen == nil || *ea.FailOpen || ea.StatusOnError != 503 || ea.Timeout == "" || ea.BodyToExtAuth.MaxRequestBytes <= 0 {
			t.Errorf("SecurityPolicy %s must fail closed with 503, a timeout and the body", name)
		}
		var routeName string
		for _, ce := range ea.ContextExtensions {
			if ce.Name == "route" && ce.Type == "Value" {
				routeName = ce.Value
			}
		}
		i := slices.IndexFunc(cfg.Routes, func(r config.Route) bool { return r.Name == routeName })
		if i < 0 {
			t.Errorf("SecurityPolicy %s names extauthz route %q, which the configuration does not define", name, routeName)
			continue
		}
		for _, tr := range sp.Spec.TargetRefs {
			r, ok := routes[ns+"/"+tr.Name]
			if tr.Group != "gateway.networking.k8s.io" || tr.Kind != "HTTPRoute" || !ok {
				t.Errorf("SecurityPolicy %s targets %s %s/%s, which is not an HTTPRoute here", name, tr.Kind, ns, tr.Name)
				continue
			}
			covered[ns+"/"+tr.Name] = true
			// The same route would be chosen without the route name.
			for _, h := range r.hostnames {
				if !slices.Contains(cfg.Routes[i].Hosts, h) {
					t.Errorf("HTTPRoute %s serves %s, which extauthz route %s does not list", tr.Name, h, routeName)
				}
			}
		}
	}
	for key := range routes {
		if !covered[key] {
			t.Errorf("HTTPRoute %s has no SecurityPolicy: it is not checked", key)
		}
	}
}
