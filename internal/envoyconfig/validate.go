package envoyconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// clusterRefFields lists, per message, the string fields that name a
// cluster. Envoy resolves these names only when it starts.
var clusterRefFields = map[protoreflect.FullName]string{
	"envoy.config.route.v3.RouteAction":                                                    "cluster",
	"envoy.config.route.v3.WeightedCluster.ClusterWeight":                                  "name",
	"envoy.config.route.v3.RouteAction.RequestMirrorPolicy":                                "cluster",
	"envoy.config.core.v3.GrpcService.EnvoyGrpc":                                           "cluster_name",
	"envoy.config.core.v3.HttpUri":                                                         "cluster",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy":                               "cluster",
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster.ClusterWeight": "name",
	"envoy.config.trace.v3.ZipkinConfig":                                                   "collector_cluster",
	"envoy.config.metrics.v3.StatsdSink":                                                   "tcp_cluster_name",
	"envoy.config.bootstrap.v3.ClusterManager":                                             "local_cluster_name",
}

const (
	grpcClusterMessage   protoreflect.FullName = "envoy.config.core.v3.GrpcService.EnvoyGrpc"
	httpProtocolOptions                        = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	routerMessage        protoreflect.FullName = "envoy.extensions.filters.http.router.v3.Router"
	filterConfigMessage  protoreflect.FullName = "envoy.config.route.v3.FilterConfig"
	extAuthzMessage      protoreflect.FullName = "envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"
	extAuthzRouteMessage protoreflect.FullName = "envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute"
)

type clusterRef struct {
	path, name string
	grpc       bool
}

// validator runs the checks that need the decoded configuration.
type validator struct {
	problems []*Problem
	refs     []clusterRef
}

func (v *validator) report(path, format string, args ...any) {
	v.problems = append(v.problems, &Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) bootstrap(b *bootstrapv3.Bootstrap) {
	if err := b.ValidateAll(); err != nil {
		v.report("", "%v", err)
	}
	v.walk(b.ProtoReflect(), "")

	clusters := make(map[string]*clusterv3.Cluster)
	for i, c := range b.GetStaticResources().GetClusters() {
		path := fmt.Sprintf("static_resources.clusters[%s]", nameOr(c.GetName(), i))
		if _, dup := clusters[c.GetName()]; dup {
			v.report(path, "cluster %q is defined twice", c.GetName())
		}
		clusters[c.GetName()] = c
	}
	v.listeners(b)

	// Clusters may also come from CDS; then a name missing here is not an
	// error.
	dynamic := b.GetDynamicResources().GetCdsConfig() != nil || b.GetDynamicResources().GetCdsResourcesLocator() != ""
	names := slices.Sorted(maps.Keys(clusters))
	for _, ref := range v.refs {
		c, ok := clusters[ref.name]
		if !ok {
			if !dynamic {
				v.report(ref.path, "names cluster %q, which is not defined (clusters: %s)", ref.name, strings.Join(names, ", "))
			}
			continue
		}
		if ref.grpc && !speaksHTTP2(c) {
			v.report(ref.path, "gRPC cluster %q does not speak HTTP/2: set typed_extension_protocol_options[%s].explicit_http_config.http2_protocol_options", ref.name, httpProtocolOptions)
		}
	}
}

func (v *validator) listeners(b *bootstrapv3.Bootstrap) {
	names := make(map[string]bool)
	addrs := make(map[string]string)
	for i, l := range b.GetStaticResources().GetListeners() {
		path := fmt.Sprintf("static_resources.listeners[%s]", nameOr(l.GetName(), i))
		if l.GetName() != "" {
			if names[l.GetName()] {
				v.report(path, "listener %q is defined twice", l.GetName())
			}
			names[l.GetName()] = true
		}
		if sa := l.GetAddress().GetSocketAddress(); sa != nil {
			addr := sa.GetAddress() + ":" + strconv.FormatUint(uint64(sa.GetPortValue()), 10)
			if other, dup := addrs[addr]; dup {
				v.report(path, "listens on %s, as listener %s does", addr, other)
			}
			addrs[addr] = nameOr(l.GetName(), i)
		}
	}
}

// walk visits every populated message below m, unpacking each Any, running
// its validation rules and collecting cluster references.
func (v *validator) walk(m protoreflect.Message, path string) {
	md := m.Descriptor()
	if field, ok := clusterRefFields[md.FullName()]; ok {
		if name := m.Get(md.Fields().ByName(protoreflect.Name(field))).String(); name != "" {
			v.refs = append(v.refs, clusterRef{path: path, name: name, grpc: md.FullName() == grpcClusterMessage})
		}
	}
	if hcm, ok := m.Interface().(*hcmv3.HttpConnectionManager); ok {
		v.connectionManager(hcm, path)
	}
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		fpath := join2(path, string(fd.Name()))
		switch {
		case fd.IsList():
			list := val.List()
			for i := range list.Len() {
				item := list.Get(i).Message()
				v.child(item, fpath+"["+messageName(item, i)+"]")
			}
		case fd.IsMap():
			if fd.MapValue().Kind() != protoreflect.MessageKind {
				return true
			}
			val.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				v.child(mv.Message(), fpath+"["+k.String()+"]")
				return true
			})
		default:
			v.child(val.Message(), fpath)
		}
		return true
	})
}

// child walks a nested message; an Any is unpacked and its content
// validated, since the parent's validation does not look inside it.
func (v *validator) child(m protoreflect.Message, path string) {
	a, ok := m.Interface().(*anypb.Any)
	if !ok {
		v.walk(m, path)
		return
	}
	inner, err := a.UnmarshalNew()
	if err != nil {
		v.report(path, "cannot unpack %s: %v", a.GetTypeUrl(), err)
		return
	}
	ipath := path + "<" + string(inner.ProtoReflect().Descriptor().Name()) + ">"
	if val, ok := inner.(interface{ ValidateAll() error }); ok {
		if err := val.ValidateAll(); err != nil {
			v.report(ipath, "%v", err)
		}
	}
	v.walk(inner.ProtoReflect(), ipath)
}

// connectionManager checks an HTTP connection manager's filter chain and the
// per-route filter configs of its inline route configuration.
func (v *validator) connectionManager(hcm *hcmv3.HttpConnectionManager, path string) {
	filters := hcm.GetHttpFilters()
	if len(filters) == 0 {
		v.report(path, "no http_filters: the router must be the last HTTP filter")
		return
	}
	types := make(map[string]protoreflect.FullName, len(filters))
	for i, f := range filters {
		fpath := fmt.Sprintf("%s.http_filters[%s]", path, nameOr(f.GetName(), i))
		if _, dup := types[f.GetName()]; dup {
			v.report(fpath, "HTTP filter %q appears twice", f.GetName())
		}
		var typ protoreflect.FullName
		switch {
		case f.GetTypedConfig() != nil:
			typ = f.GetTypedConfig().MessageName()
		case f.GetConfigDiscovery() != nil:
		default:
			v.report(fpath, "HTTP filter %q has no typed_config", f.GetName())
		}
		types[f.GetName()] = typ
		last := i == len(filters)-1
		switch {
		case typ == routerMessage && !last:
			v.report(fpath, "the router is not the last HTTP filter: the filters after it never run")
		case typ != routerMessage && last:
			v.report(fpath, "the last HTTP filter is %q, not the router (%s)", f.GetName(), routerMessage)
		}
	}

	rc := hcm.GetRouteConfig()
	if rc == nil {
		return // RDS: routes arrive later
	}
	rpath := path + ".route_config"
	v.perFilter(rc.GetTypedPerFilterConfig(), types, rpath)
	for i, vh := range rc.GetVirtualHosts() {
		vpath := fmt.Sprintf("%s.virtual_hosts[%s]", rpath, nameOr(vh.GetName(), i))
		v.perFilter(vh.GetTypedPerFilterConfig(), types, vpath)
		for j, r := range vh.GetRoutes() {
			routePath := fmt.Sprintf("%s.routes[%s]", vpath, nameOr(r.GetName(), j))
			v.perFilter(r.GetTypedPerFilterConfig(), types, routePath)
			for k, cw := range r.GetRoute().GetWeightedClusters().GetClusters() {
				v.perFilter(cw.GetTypedPerFilterConfig(), types, fmt.Sprintf("%s.route.weighted_clusters.clusters[%s]", routePath, nameOr(cw.GetName(), k)))
			}
		}
	}
}

// perFilter checks that each per-route config names an HTTP filter of the
// connection manager and, for ext_authz, has the per-route type: Envoy
// silently ignores a config under a name no filter has.
func (v *validator) perFilter(configs map[string]*anypb.Any, filters map[string]protoreflect.FullName, path string) {
	for _, name := range slices.Sorted(maps.Keys(configs)) {
		cpath := path + ".typed_per_filter_config[" + name + "]"
		filterType, ok := filters[name]
		if !ok {
			v.report(cpath, "no HTTP filter is named %q (filters: %s)", name, strings.Join(slices.Sorted(maps.Keys(filters)), ", "))
			continue
		}
		got := configs[name].MessageName()
		if got == filterConfigMessage {
			var fc routev3.FilterConfig
			if err := configs[name].UnmarshalTo(&fc); err == nil && fc.GetConfig() != nil {
				got = fc.GetConfig().MessageName()
			}
		}
		if filterType == extAuthzMessage && got != extAuthzRouteMessage {
			v.report(cpath, "per-route config of ext_authz filter %q is %s, not %s", name, got, extAuthzRouteMessage)
		}
	}
}

// speaksHTTP2 reports whether Envoy talks HTTP/2 to the cluster, as gRPC
// needs: explicitly, or by ALPN over TLS.
func speaksHTTP2(c *clusterv3.Cluster) bool {
	a := c.GetTypedExtensionProtocolOptions()[httpProtocolOptions]
	if a == nil {
		return false
	}
	var o upstreamhttpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&o); err != nil {
		return false
	}
	if e := o.GetExplicitHttpConfig(); e != nil {
		return e.GetHttp2ProtocolOptions() != nil
	}
	if auto := o.GetAutoConfig(); auto != nil {
		return c.GetTransportSocket() != nil
	}
	return false
}

// messageName names a list item by its name field, else by its index.
func messageName(m protoreflect.Message, i int) string {
	if fd := m.Descriptor().Fields().ByName("name"); fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsList() {
		if s := m.Get(fd).String(); s != "" {
			return s
		}
	}
	return strconv.Itoa(i)
}

func nameOr(name string, i int) string {
	if name != "" {
		return name
	}
	return strconv.Itoa(i)
}
