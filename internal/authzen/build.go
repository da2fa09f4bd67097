package authzen

import (
	"strings"

	"github.com/extauthz/extauthz/internal/policy"
)

// Resource types Build sends.
const (
	TypeUser        = "user"
	TypeMCPTool     = "mcp_tool"
	TypeMCPPrompt   = "mcp_prompt"
	TypeMCPResource = "mcp_resource"
	TypeMCPMethod   = "mcp_method"
	TypeA2ATask     = "a2a_task"
	TypeA2AAgent    = "a2a_agent"
	TypeRoute       = "route"
)

// Build makes the evaluation request for a call: the subject is the user
// (with the issuer, client, scopes and acting agents as properties), the
// action the JSON-RPC method (else the HTTP method), the resource the tool,
// prompt or resource URI the call names (else the A2A task or agent, else
// the route), and the context the lineage and the arguments named in
// arguments, as the call carried them. Nothing else of the call is sent:
// the request is also the cache key, so what varies per call but does not
// matter to the PDP must stay out of it.
func Build(in *policy.Input, arguments []string) Request {
	id := &in.Identity
	subject := Subject{Type: TypeUser, ID: id.Subject, Properties: map[string]any{"issuer": id.Issuer}}
	if id.ClientID != "" {
		subject.Properties["client_id"] = id.ClientID
	}
	if len(id.Scopes) > 0 {
		subject.Properties["scopes"] = id.Scopes
	}
	if len(id.Actors) > 0 {
		subject.Properties["actors"] = id.Actors
	}
	r := Request{Subject: subject, Action: Action{Name: action(in)}, Resource: resource(in)}
	if in.Lineage.Root != "" || len(in.Lineage.Actors) > 0 {
		r.Context = map[string]any{"lineage": map[string]any{
			"root": in.Lineage.Root, "parent": in.Lineage.Parent, "depth": in.Lineage.Depth,
			"actors": in.Lineage.Actors, "trusted": in.Lineage.Trusted,
		}}
	}
	if len(arguments) > 0 {
		args := make(map[string]any, len(arguments))
		for _, name := range arguments {
			if v, ok := in.Argument(name); ok {
				args[name] = v
			}
		}
		if r.Context == nil {
			r.Context = map[string]any{}
		}
		r.Context["arguments"] = args
	}
	return r
}

func action(in *policy.Input) string {
	switch {
	case in.MCP.Method != "":
		return in.MCP.Method
	case in.A2A.Method != "":
		return in.A2A.Method
	}
	return in.Request.Method
}

func resource(in *policy.Input) Resource {
	m := &in.MCP
	switch {
	case m.URI != "":
		return Resource{Type: TypeMCPResource, ID: m.URI}
	case m.Name != "" && strings.HasPrefix(m.Method, "tools/"):
		return Resource{Type: TypeMCPTool, ID: m.Name}
	case m.Name != "" && strings.HasPrefix(m.Method, "prompts/"):
		return Resource{Type: TypeMCPPrompt, ID: m.Name}
	case m.Method != "":
		return Resource{Type: TypeMCPMethod, ID: m.Method}
	case in.A2A.TaskID != "":
		return a2aTenant(Resource{Type: TypeA2ATask, ID: in.A2A.TaskID}, in.A2A.Tenant)
	case in.A2A.Method != "":
		return a2aTenant(Resource{Type: TypeA2AAgent, ID: in.Request.Host + in.Request.Path}, in.A2A.Tenant)
	}
	return Resource{Type: TypeRoute, ID: in.Request.Host + in.Request.Path}
}

// a2aTenant adds the tenant an A2A call names to its resource: an agent
// serving several picks the task or context by it, so it is part of what
// the call acts on.
func a2aTenant(r Resource, tenant string) Resource {
	if tenant != "" {
		r.Properties = map[string]any{"tenant": tenant}
	}
	return r
}
