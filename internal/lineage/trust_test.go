package lineage

import (
	"strings"
	"testing"
)

func TestNewTrustErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     TrustConfig
		wantErr string
	}{
		{"empty issuer", TrustConfig{Issuers: []string{""}}, "issuer name is empty"},
		{"empty client id", TrustConfig{ClientIDs: []string{""}}, "client id is empty"},
		{"empty principal", TrustConfig{Principals: []string{""}}, "principal is empty"},
		{"wildcard in the middle", TrustConfig{Principals: []string{"spiffe://td/*/sa/x"}}, "wildcard"},
		{"wildcard without slash", TrustConfig{Principals: []string{"spiffe://td/ns/agent*"}}, "wildcard"},
		{"two wildcards", TrustConfig{Principals: []string{"spiffe://*/ns/*"}}, "wildcard"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTrust(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewTrust() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestTrusted(t *testing.T) {
	mesh := TrustConfig{
		Issuers:    []string{"workloads"},
		ClientIDs:  []string{"planner-agent"},
		Principals: []string{"spiffe://cluster.local/ns/agents/*", "spiffe://cluster.local/ns/tools/sa/search"},
	}
	tests := []struct {
		name   string
		cfg    TrustConfig
		caller Caller
		want   bool
	}{
		{"default trusts every authenticated caller", TrustConfig{All: true}, Caller{IssuerName: "users"}, true},
		{"nobody configured", TrustConfig{}, Caller{IssuerName: "users", ClientID: "web"}, false},
		{"workload issuer", mesh, Caller{IssuerName: "workloads"}, true},
		{"user issuer", mesh, Caller{IssuerName: "users"}, false},
		{"client id", mesh, Caller{IssuerName: "users", ClientID: "planner-agent"}, true},
		{"other client id", mesh, Caller{IssuerName: "users", ClientID: "web-ui"}, false},
		{"client id in its issuer's namespace", TrustConfig{ClientIDs: []string{"users:planner-agent"}}, Caller{IssuerName: "users", ClientID: "planner-agent", Namespace: "users:"}, true},
		{"another issuer's client of the same id", TrustConfig{ClientIDs: []string{"users:planner-agent"}}, Caller{IssuerName: "tenant", ClientID: "planner-agent", Namespace: "tenant:"}, false},
		{"a bare entry is no namespaced issuer's client", mesh, Caller{IssuerName: "users", ClientID: "planner-agent", Namespace: "users:"}, false},
		{"act claim", mesh, Caller{IssuerName: "users", ClientID: "web-ui", HasAct: true}, true},
		{"act claim with nothing configured", TrustConfig{}, Caller{HasAct: true}, true},
		{"act claim ignored", TrustConfig{IgnoreAct: true}, Caller{IssuerName: "tenant", HasAct: true}, false},
		{"act claim ignored, issuer trusted", TrustConfig{IgnoreAct: true, Issuers: []string{"sts"}}, Caller{IssuerName: "sts", HasAct: true}, true},
		{"act claim ignored, everybody trusted", TrustConfig{IgnoreAct: true, All: true}, Caller{IssuerName: "tenant", HasAct: true}, true},
		{"SPIFFE glob", mesh, Caller{Principal: "spiffe://cluster.local/ns/agents/sa/planner"}, true},
		{"SPIFFE glob needs something after the slash", mesh, Caller{Principal: "spiffe://cluster.local/ns/agents/"}, false},
		{"SPIFFE glob is not a string prefix", mesh, Caller{Principal: "spiffe://cluster.local/ns/agents-evil/sa/x"}, false},
		{"SPIFFE glob other namespace", mesh, Caller{Principal: "spiffe://cluster.local/ns/default/sa/x"}, false},
		{"SPIFFE exact", mesh, Caller{Principal: "spiffe://cluster.local/ns/tools/sa/search"}, true},
		{"SPIFFE exact is exact", mesh, Caller{Principal: "spiffe://cluster.local/ns/tools/sa/search2"}, false},
		{"no mTLS peer", mesh, Caller{}, false},
		{"any peer", TrustConfig{Principals: []string{"*"}}, Caller{Principal: "spiffe://x/y"}, true},
		{"any peer needs a peer", TrustConfig{Principals: []string{"*"}}, Caller{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trust, err := NewTrust(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := trust.Trusted(tt.caller); got != tt.want {
				t.Errorf("Trusted(%+v) = %v, want %v", tt.caller, got, tt.want)
			}
		})
	}
}

func TestNilTrust(t *testing.T) {
	var trust *Trust
	if trust.Trusted(Caller{IssuerName: "workloads", Principal: "spiffe://x/y"}) {
		t.Error("a nil Trust trusts a caller without act claim")
	}
	if !trust.Trusted(Caller{HasAct: true}) {
		t.Error("a nil Trust distrusts a token with an act claim")
	}
}

func TestInNamespace(t *testing.T) {
	names := []string{"corp:planner", "helper"}
	tests := []struct {
		namespace, id string
		want          bool
	}{
		{"corp:", "planner", true},
		{"", "helper", true},
		{"", "corp:planner", true}, // the caller refuses such an id first: identity's namespace check
		{"tenant:", "planner", false},
		{"corp:", "helper", false},
		{"", "planner", false},
		{"corp:", "plan", false},
		{"corp:", "planner2", false},
		{"corp:", "", false},
	}
	for _, tt := range tests {
		if got := InNamespace(names, tt.namespace, tt.id); got != tt.want {
			t.Errorf("InNamespace(%q, %q) = %v, want %v", tt.namespace, tt.id, got, tt.want)
		}
	}
}
