package attack

import (
	"strings"
	"testing"
)

// The MCP skills extension (SEP-2640, served by the TypeScript SDK v2's
// SkillsExtension) reads resources by other methods than resources/read:
// skills/get of a skill's SKILL.md URI answers the file's frontmatter and
// the URI, size and digest of every file of the skill, and
// resources/directory/read of a directory URI lists the resources in it.
// A rule keeping a user from reading skill://internal/* must hold for them
// too, or the denied skill's text and file list are one call away.
const skillRoutes = `routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [hs]
    audiences: [` + audience + `]
    rules:
      - {methods: ["resources/read"], names: ["skill://internal/*"], action: deny}
      - {methods: ["resources/*"], names: ["skill://private/*"], scopes: [private]}
      - {methods: ["skills/get"], names: ["skill://retired/*"], action: deny}
`

// TestSkillsReadWhatResourcesReadWould: skills/get and
// resources/directory/read must pass what resources/read of every file
// they describe needs; their URI is matched canonically, as resources/read's.
func TestSkillsReadWhatResourcesReadWould(t *testing.T) {
	s := start(t, skillRoutes, options{})
	for _, tc := range []struct {
		name, method, params string
		scopes               []string
		status               int // 0: allowed
	}{
		{"get a denied skill", "skills/get", `{"uri":"skill://internal/deploy/SKILL.md"}`, nil, 403},
		{"get it in another spelling", "skills/get", `{"uri":"SKILL://internal/%64eploy/SKILL.md"}`, nil, 403},
		{"get a skill whose files need a scope, not held", "skills/get", `{"uri":"skill://private/notes/SKILL.md"}`, nil, 403},
		{"the scope held", "skills/get", `{"uri":"skill://private/notes/SKILL.md"}`, []string{"private"}, 0},
		{"get an allowed skill", "skills/get", `{"uri":"skill://public/hello/SKILL.md"}`, nil, 0},
		{"a rule on skills/get by its URI", "skills/get", `{"uri":"skill://retired/old/SKILL.md"}`, nil, 403},
		{"get a skill whose directory holds denied files", "skills/get", `{"uri":"skill://internal/SKILL.md"}`, nil, 403},
		{"a query cannot narrow the directory", "skills/get", `{"uri":"skill://internal/SKILL.md?x=/y/"}`, nil, 403},
		{"list a denied directory", "resources/directory/read", `{"uri":"skill://internal/deploy"}`, nil, 403},
		{"list the directory above it", "resources/directory/read", `{"uri":"skill://"}`, nil, 403},
		{"list a directory that only starts like it", "resources/directory/read", `{"uri":"skill://intern"}`, nil, 403},
		{"list an allowed directory", "resources/directory/read", `{"uri":"skill://public/hello"}`, nil, 0},
		{"a URI without a canonical form", "skills/get", `{"uri":"skill://public/../../internal/x/SKILL.md"}`, nil, 400},
		{"no URI", "skills/get", `{}`, nil, 400},
		{"a URI that is no string", "resources/directory/read", `{"uri":["skill://public/hello"]}`, nil, 400},
		{"the URI key in another case", "skills/get", `{"uri":"skill://public/hello/SKILL.md","URI":"skill://internal/deploy/SKILL.md"}`, nil, 400},
		{"params by position", "skills/get", `["skill://internal/deploy/SKILL.md"]`, nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, "mallory", tc.scopes...),
				"content-type": "application/json"}, Body: rpcBody(5, tc.method, tc.params)})
			if !v.wantStatus(t, tc.status) || tc.status == 0 {
				return
			}
			if e := v.rpc(t); string(e.ID) != "5" {
				t.Fatalf("the refusal answers id %s, not the request's", e.ID)
			}
		})
	}
}

// TestSkillsForwardAuth: the forward-auth front end, given the body as
// Traefik's forwardBody sends it, refuses what ext_authz does.
func TestSkillsForwardAuth(t *testing.T) {
	s := start(t, skillRoutes, options{})
	user := token(t, issuerHS, "mallory")
	for _, tc := range []struct {
		name, method, uri string
		status            int
	}{
		{"a denied skill", "skills/get", "skill://internal/deploy/SKILL.md", 403},
		{"a denied directory", "resources/directory/read", "skill://internal/deploy", 403},
		{"an allowed skill", "skills/get", "skill://public/hello/SKILL.md", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := s.forwardAuth(t, fwd{Header: bearer(user), Body: rpcBody(3, tc.method, `{"uri":"`+tc.uri+`"}`)})
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
		})
	}
}

// TestSkillsNamedByHeadersAlone: behind a proxy that sends no body, a
// skills/get or resources/directory/read may be of any URI (MCP mirrors
// none of theirs in Mcp-Name), so it must pass what resources/read of
// every URI needs.
func TestSkillsNamedByHeadersAlone(t *testing.T) {
	s := start(t, headerOnlyRoutes, options{})
	for _, tc := range []struct {
		name, path, method string
		status             int // 0: allowed
	}{
		{"a skill, on a route denying resources", "/files/mcp", "skills/get", 403},
		{"a directory, on a route denying resources", "/files/mcp", "resources/directory/read", 403},
		{"a skill, on a route without resource rules", "/open/mcp", "skills/get", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := s.checkByHeaders(t, tc.path, tc.method, "")
			if v.wantStatus(t, tc.status) && tc.status != 0 && !strings.Contains(v.Body, "headers alone") {
				t.Fatalf("the refusal does not say why: %s", v.Body)
			}
		})
	}
}
