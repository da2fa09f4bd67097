package envoytest

import (
	"io/fs"
	"path"
	"slices"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
)

func TestCapturesDecode(t *testing.T) {
	captures, err := Captures()
	if err != nil {
		t.Fatalf("Captures: %v", err)
	}
	byName := map[string]*authv3.CheckRequest{}
	for _, c := range captures {
		byName[c.Name] = c.Request
	}
	tests := []struct {
		name  string
		check func(t *testing.T, req *authv3.CheckRequest)
	}{
		{"01-opa-envoy-plugin-istio-ingress-http11", func(t *testing.T, req *authv3.CheckRequest) {
			h := httpOf(req)
			if h.GetHeaders()["x-envoy-internal"] != "true" || h.GetHeaders()[":authority"] != "192.168.99.100:31380" || h.GetProtocol() != "HTTP/1.1" {
				t.Errorf("headers %v protocol %q", h.GetHeaders(), h.GetProtocol())
			}
		}},
		{"02-opa-envoy-plugin-context-extensions-metadata", func(t *testing.T, req *authv3.CheckRequest) {
			a := req.GetAttributes()
			if a.GetContextExtensions()["hello"] != "world" || a.GetSource().GetLabels()["foo"] != "bar" ||
				a.GetMetadataContext().GetFilterMetadata()["dummy"].GetFields()["count"].GetNumberValue() != 1 {
				t.Errorf("attributes %v", a)
			}
		}},
		{"03-opa-envoy-plugin-grpc-raw-body", func(t *testing.T, req *authv3.CheckRequest) {
			if got := string(httpOf(req).GetRawBody()); got != "\x00\x00\x00\x00\x06\n\x04John" {
				t.Errorf("raw_body %q", got)
			}
		}},
		{"04-opa-docs-envoy-primer-v3-input", func(t *testing.T, req *authv3.CheckRequest) {
			h := httpOf(req)
			if h.GetSize() != 41 || h.GetPath() != "/people?lang=en" || h.GetBody() != `{"firstname":"Charlie", "lastname":"Opa"}` {
				t.Errorf("size %d path %q body %q", h.GetSize(), h.GetPath(), h.GetBody())
			}
		}},
		{"05-authorino-observability-log-apikey.log", func(t *testing.T, req *authv3.CheckRequest) {
			a := req.GetAttributes()
			if got := a.GetSource().GetAddress().GetSocketAddress(); got.GetAddress() != "127.0.0.1" || got.GetPortValue() != 52702 {
				t.Errorf("source %v", got)
			}
			if got := a.GetDestination().GetAddress().GetSocketAddress().GetPortValue(); got != 8000 {
				t.Errorf("destination port %d", got)
			}
			if got, want := a.GetRequest().GetTime().AsTime(), time.Unix(1634830413, 240094000); !got.Equal(want) {
				t.Errorf("time %v, want %v", got, want)
			}
			if a.GetContextExtensions()["virtual_host"] != "local_service" || httpOf(req).GetScheme() != "http" || a.GetMetadataContext() == nil {
				t.Errorf("context_extensions %v scheme %q metadata %v", a.GetContextExtensions(), httpOf(req).GetScheme(), a.GetMetadataContext())
			}
		}},
		{"06-kyverno-envoy-plugin-istio-attributecontext", func(t *testing.T, req *authv3.CheckRequest) {
			a := req.GetAttributes()
			if a.GetRouteMetadataContext() == nil || httpOf(req).GetHeaders()[":scheme"] != "http" {
				t.Errorf("route_metadata_context %v headers %v", a.GetRouteMetadataContext(), httpOf(req).GetHeaders())
			}
		}},
		{"07-aperture-classifier-preview-k6-post", func(t *testing.T, req *authv3.CheckRequest) {
			h := httpOf(req)
			if h.GetMethod() != "POST" || h.GetHeaders()["user-id"] != "19" || h.GetId() != "14553976531353216255" {
				t.Errorf("method %q user-id %q id %q", h.GetMethod(), h.GetHeaders()["user-id"], h.GetId())
			}
		}},
	}
	if len(captures) != len(tests) {
		t.Errorf("%d captures, want %d", len(captures), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, ok := byName[tt.name]
			if !ok {
				t.Fatalf("capture %q missing", tt.name)
			}
			assertEnvoyShape(t, req)
			tt.check(t, req)
		})
	}
}

// Every embedded capture is listed in captureSources, so none is silently
// skipped.
func TestCapturesAllListed(t *testing.T) {
	files, err := fs.Glob(captureFS, path.Join(captureDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, src := range captureSources {
		listed = append(listed, path.Join(captureDir, src.file))
	}
	slices.Sort(files)
	slices.Sort(listed)
	if !slices.Equal(files, listed) {
		t.Errorf("embedded %v, listed %v", files, listed)
	}
}

func TestNormaliseGoJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{
			name: "oneof wrappers become members",
			in:   `{"address":{"Address":{"SocketAddress":{"address":"10.0.0.1","PortSpecifier":{"PortValue":80}}}}}`,
			want: `{"address":{"socketAddress":{"address":"10.0.0.1","portValue":80}}}`,
		},
		{
			name: "time seconds and nanos become RFC 3339",
			in:   `{"time":{"seconds":1634830413,"nanos":240094000}}`,
			want: `{"time":"2021-10-21T15:33:33.240094Z"}`,
		},
		{
			name: "an RFC 3339 time and ordinary fields are left alone",
			in:   `{"time":"2024-05-20T07:52:01Z","context_extensions":{"A":"b"},"n":[1,2.5]}`,
			want: `{"context_extensions":{"A":"b"},"n":[1,2.5],"time":"2024-05-20T07:52:01Z"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normaliseGoJSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s\nwant %s", got, tt.want)
			}
		})
	}
}
