# The policy OPA decides the "decided by OPA" rule with. Its input is the
# AuthZEN Access Evaluation request extauthz sends: subject (the user, with
# the issuer, client, scopes and acting agents as properties), action (the
# MCP method), resource (the tool) and context (the arguments the rule
# names, the lineage).
package extauthz.mcp

# Who belongs to which group. In a deployment this is data OPA loads from a
# bundle or a directory; extauthz does not send the token's claims.
# Users are named as extauthz names them: with the issuer's subject prefix
# ("corp:") when the route accepts several issuers, so the same sub from
# another issuer is someone else.
groups := {
	"finance": {"corp:alice"},
	"engineering": {"corp:bob"},
}

user := input.subject.id

default allow := false

actors := object.get(input.subject, ["properties", "actors"], [])

scopes := object.get(input.subject, ["properties", "scopes"], [])

calls(tool) if {
	input.action.name == "tools/call"
	input.resource.type == "mcp_tool"
	input.resource.id == tool
}

# Only the billing agent, acting directly for a member of finance, may
# refund.
allow if {
	calls("refund")
	user in groups.finance
	actors == ["billing-agent"]
}

# Everyone reads files under their own workspace, and writes there with
# the files:write scope. A path that names . or .. anywhere is refused
# rather than cleaned.
allow if {
	calls("read_file")
	in_own_workspace
}

allow if {
	calls("write_file")
	"files:write" in scopes
	in_own_workspace
}

in_own_workspace if {
	path := input.context.arguments.path
	is_string(path)
	startswith(path, concat("", ["/workspace/", user, "/"]))
	not dot_segment(path)
}

dot_segment(path) if {
	some segment in split(path, "/")
	segment in {".", ".."}
}
