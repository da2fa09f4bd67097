package authzen

import (
	"encoding/json"
	"testing"

	"github.com/extauthz/extauthz/internal/policy"
)

func TestBuild(t *testing.T) {
	base := func() *policy.Input {
		return &policy.Input{
			Identity: policy.Identity{Issuer: "corp", Subject: "corp:alice", ClientID: "agent", Scopes: []string{"files:read"}, Actors: []string{"billing-agent"}},
			Request:  policy.Request{Method: "POST", Host: "mcp.example.com", Path: "/mcp"},
			Lineage:  policy.Lineage{Root: "r1", Depth: 1, Actors: []string{"billing-agent"}},
		}
	}
	tests := []struct {
		name string
		in   func(*policy.Input)
		args []string
		want string
	}{
		{"tool call with selected arguments", func(in *policy.Input) {
			in.MCP = policy.MCP{Method: "tools/call", Name: "refund", Arguments: `{"amount": 12.5, "order": "o-1", "note": "not sent"}`, BodyComplete: true}
		}, []string{"amount", "order", "absent"},
			`{"subject":{"type":"user","id":"corp:alice","properties":{"actors":["billing-agent"],"client_id":"agent","issuer":"corp","scopes":["files:read"]}},"action":{"name":"tools/call"},"resource":{"type":"mcp_tool","id":"refund"},"context":{"arguments":{"amount":12.5,"order":"o-1"},"lineage":{"actors":["billing-agent"],"depth":1,"parent":"","root":"r1","trusted":false}}}`},
		{"arguments of a partial body are not sent", func(in *policy.Input) {
			in.MCP = policy.MCP{Method: "tools/call", Name: "refund", Arguments: `{"amount": 12.5}`}
			in.Lineage = policy.Lineage{}
		}, []string{"amount"},
			`{"subject":{"type":"user","id":"corp:alice","properties":{"actors":["billing-agent"],"client_id":"agent","issuer":"corp","scopes":["files:read"]}},"action":{"name":"tools/call"},"resource":{"type":"mcp_tool","id":"refund"},"context":{"arguments":{}}}`},
		{"resource read", func(in *policy.Input) {
			in.MCP = policy.MCP{Method: "resources/read", URI: "file:///etc/hosts"}
			in.Identity = policy.Identity{Issuer: "corp", Subject: "corp:alice"}
			in.Lineage = policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"corp:alice","properties":{"issuer":"corp"}},"action":{"name":"resources/read"},"resource":{"type":"mcp_resource","id":"file:///etc/hosts"}}`},
		{"prompt", func(in *policy.Input) {
			in.MCP = policy.MCP{Method: "prompts/get", Name: "summarise"}
			in.Identity, in.Lineage = policy.Identity{Subject: "u"}, policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"u","properties":{"issuer":""}},"action":{"name":"prompts/get"},"resource":{"type":"mcp_prompt","id":"summarise"}}`},
		{"list", func(in *policy.Input) {
			in.MCP = policy.MCP{Method: "tools/list"}
			in.Identity, in.Lineage = policy.Identity{Subject: "u"}, policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"u","properties":{"issuer":""}},"action":{"name":"tools/list"},"resource":{"type":"mcp_method","id":"tools/list"}}`},
		{"a2a task", func(in *policy.Input) {
			in.A2A = policy.A2A{Method: "GetTask", TaskID: "t1"}
			in.Identity, in.Lineage = policy.Identity{Subject: "u"}, policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"u","properties":{"issuer":""}},"action":{"name":"GetTask"},"resource":{"type":"a2a_task","id":"t1"}}`},
		{"a2a task of a tenant", func(in *policy.Input) {
			in.A2A = policy.A2A{Method: "GetTask", TaskID: "t1", Tenant: "acme"}
			in.Identity, in.Lineage = policy.Identity{Subject: "u"}, policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"u","properties":{"issuer":""}},"action":{"name":"GetTask"},"resource":{"type":"a2a_task","id":"t1","properties":{"tenant":"acme"}}}`},
		{"a2a message to a tenant", func(in *policy.Input) {
			in.A2A = policy.A2A{Method: "SendMessage", Tenant: "acme"}
			in.Identity, in.Lineage = policy.Identity{Subject: "u"}, policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"u","properties":{"issuer":""}},"action":{"name":"SendMessage"},"resource":{"type":"a2a_agent","id":"mcp.example.com/mcp","properties":{"tenant":"acme"}}}`},
		{"a2a message", func(in *policy.Input) {
			in.A2A = policy.A2A{Method: "SendMessage"}
			in.Identity, in.Lineage = policy.Identity{Subject: "u"}, policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"u","properties":{"issuer":""}},"action":{"name":"SendMessage"},"resource":{"type":"a2a_agent","id":"mcp.example.com/mcp"}}`},
		{"plain HTTP", func(in *policy.Input) {
			in.Identity, in.Lineage = policy.Identity{Subject: "u"}, policy.Lineage{}
		}, nil, `{"subject":{"type":"user","id":"u","properties":{"issuer":""}},"action":{"name":"POST"},"resource":{"type":"route","id":"mcp.example.com/mcp"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.in(in)
			b, err := json.Marshal(Build(in, tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("Build =\n%s\nwant\n%s", b, tt.want)
			}
		})
	}
}
