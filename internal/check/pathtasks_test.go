package check

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestPathTaskIDs(t *testing.T) {
	tests := []struct {
		name, path string
		want       []string
	}{
		{"v0.3 GetTask", "/v1/tasks/t-1", []string{"t-1"}},
		{"a query", "/v1/tasks/t-1?historyLength=3", []string{"t-1"}},
		{"a custom method", "/v1/tasks/t-1:cancel", []string{"t-1:cancel", "t-1"}},
		{"below the task", "/v1/tasks/t-1/pushNotificationConfigs/c-1", []string{"t-1"}},
		{"v1.0 under a tenant", "/acme/tasks/t-1:subscribe", []string{"t-1:subscribe", "t-1"}},
		{"escaped", "/tasks/t%201", []string{"t 1"}},
		{"an escaped custom method", "/tasks/t-1%3Acancel", []string{"t-1:cancel", "t-1"}},
		{"the list", "/v1/tasks", nil},
		{"the list, with a slash", "/v1/tasks/", nil},
		{"no tasks segment", "/v1/taskset/t-1", nil},
		{"twice", "/v1/tasks/a/tasks/b", []string{"a", "b"}},
		{"in capitals, as Express routes it", "/v1/TASKS/t-1", []string{"t-1"}},
		{"capitalised", "/Tasks/t-1:cancel", []string{"t-1:cancel", "t-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pathTaskIDs(tt.path); !slices.Equal(got, tt.want) {
				t.Fatalf("pathTaskIDs(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestPathListContexts(t *testing.T) {
	tests := []struct {
		name, target string
		want         []string
	}{
		{"the JSON name", "/v1/tasks?contextId=c-1&pageSize=5", []string{"c-1"}},
		{"the proto name", "/tasks?context_id=c-1", []string{"c-1"}},
		{"twice", "/v1/tasks?contextId=a&contextId=b", []string{"a", "b"}},
		{"escaped", "/v1/tasks?contextId=c%2D1", []string{"c%2D1", "c-1"}},
		{"a semicolon", "/v1/tasks?x=1;contextId=c-1", []string{"c-1"}},
		{"another case", "/v1/tasks?CONTEXTID=c-1", []string{"c-1"}},
		{"not a task list", "/v1/tasks/t-1?contextId=c-1", nil},
		{"a trailing slash", "/v1/tasks/?contextId=c-1", []string{"c-1"}},
		{"the path in capitals", "/V1/TASKS?contextId=c-1", []string{"c-1"}},
		{"no query", "/v1/tasks", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pathListContexts(tt.target); !slices.Equal(got, tt.want) {
				t.Fatalf("pathListContexts(%q) = %q, want %q", tt.target, got, tt.want)
			}
		})
	}
}

func TestPathTaskList(t *testing.T) {
	tests := []struct {
		name, method, target string
		list, filtered       bool
	}{
		{"v0.3", "GET", "/v1/tasks?contextId=c-1", true, true},
		{"v1.0 under a tenant", "GET", "/acme/tasks?pageSize=2&contextId=c-1", true, true},
		{"HEAD", "HEAD", "/tasks", true, false},
		{"a trailing slash", "GET", "/v1/tasks/?contextId=c-1", true, true},
		{"in capitals", "GET", "/V1/TASKS?contextId=c-1", true, true},
		{"the filter escaped", "GET", "/tasks?context%49d=c%2D1", true, true},
		{"both spellings", "GET", "/tasks?context_id=c-1&contextId=c-1", true, true},
		{"unfiltered", "GET", "/v1/tasks?pageSize=100", true, false},
		{"an empty filter", "GET", "/v1/tasks?contextId=", true, false},
		{"an empty filter beside one", "GET", "/v1/tasks?contextId=c-1&contextId=", true, false},
		{"an empty filter in another spelling", "GET", "/v1/tasks?contextId=c-1&CONTEXT_ID=", true, false},
		{"the proto spelling alone", "GET", "/v1/tasks?context_id=c-1", true, false},
		{"another case alone", "GET", "/v1/tasks?ContextId=c-1", true, false},
		{"a semicolon", "GET", "/v1/tasks?contextId=c-1;x=1", true, false},
		{"a bad escape", "GET", "/v1/tasks?contextId=%zz", true, false},
		{"a task", "GET", "/v1/tasks/t-1", false, false},
		{"posted", "POST", "/v1/tasks", false, false},
		{"a longer segment", "GET", "/v1/subtasks", false, false},
		{"two slashes", "GET", "/v1/tasks//", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &Request{Method: tt.method, Path: tt.target}
			if got := isPathTaskList(req); got != tt.list {
				t.Errorf("isPathTaskList(%s %q) = %v, want %v", tt.method, tt.target, got, tt.list)
			}
			if got := pathListFiltered(tt.target); tt.list && got != tt.filtered {
				t.Errorf("pathListFiltered(%q) = %v, want %v", tt.target, got, tt.filtered)
			}
		})
	}
}

// FuzzPathListFiltered checks pathListFiltered against net/url's reading
// of the query, which Go agents use: a list the service takes for
// filtered must be filtered there too, by a contextId every value of
// which is a context, whatever else the query holds.
func FuzzPathListFiltered(f *testing.F) {
	for _, q := range []string{"contextId=c-1", "contextId=c-1&context_id=", "x=1;contextId=c", "context%49d=%2D", "contextId=%zz&contextId=a"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		if !pathListFiltered("/v1/tasks?" + query) {
			return
		}
		// Request.URL.Query reads what it can and drops the error, as
		// agents do.
		vals, _ := url.ParseQuery(query)
		if len(vals["contextId"]) == 0 {
			t.Fatalf("%q is filtered, but net/url reads no contextId: %v", query, vals)
		}
		for k, vs := range vals {
			for _, v := range vs {
				if isContextParam(k) && v == "" {
					t.Fatalf("%q is filtered, but net/url reads %s empty", query, k)
				}
			}
		}
	})
}

func TestA2AServicePath(t *testing.T) {
	for path, want := range map[string]bool{
		"/a2a.v1.A2AService/GetTask":         true,
		"/lf.a2a.v1.A2AService/CancelTask":   true,
		"/agent/a2a.v1.A2AService/GetTask":   true,
		"/A2AService/GetTask?x=1":            true,
		"/a2a.v1.A2AService":                 false,
		"/a2a.v1.A2AService/":                false,
		"/grpc.health.v1.Health/Check":       false,
		"/a2a.v1.MyA2AServiceX/GetTask":      false,
		"/v1/tasks/t-1":                      false,
		"/docs/a2a.v1.A2AServiceGuide/intro": false,
	} {
		if got := a2aServicePath(path); got != want {
			t.Errorf("a2aServicePath(%q) = %v, want %v", path, got, want)
		}
	}
}

// FuzzPathTaskIDs checks pathTaskIDs against the same reading written by
// splitting the path into segments.
func FuzzPathTaskIDs(f *testing.F) {
	for _, p := range []string{"/v1/tasks/t-1:cancel", "/tasks/tasks/x", "/a/tasks//tasks/b", "/tasks/%zz", "/tasks/:x?y"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, target string) {
		path, _, _ := strings.Cut(target, "?")
		var want []string
		add := func(id string) {
			if id != "" && !slices.Contains(want, id) {
				want = append(want, id)
			}
		}
		segs := strings.Split(path, "/")
		for i := 1; i+1 < len(segs); i++ {
			id, err := url.PathUnescape(segs[i+1])
			if !strings.EqualFold(segs[i], "tasks") || err != nil {
				continue
			}
			add(id)
			if j := strings.LastIndexByte(id, ':'); j > 0 {
				add(id[:j])
			}
		}
		if got := pathTaskIDs(target); !slices.Equal(got, want) {
			t.Fatalf("pathTaskIDs(%q) = %q, the segments say %q", target, got, want)
		}
	})
}
