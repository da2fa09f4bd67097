package policy

import (
	"errors"
	"strings"
	"testing"
)

// workspace is the cookbook's rule: a user reads files only under their
// own workspace.
const workspace = `cleanPath(mcp.arguments.path).startsWith("/workspace/" + identity.subject + "/")`

// TestWorkspaceAttacks: what a user with a valid token would send to read
// someone else's files. None passes; the ones that cannot be read as a path
// fail with an error (denied as policy_error).
func TestWorkspaceAttacks(t *testing.T) {
	env := newEnv(t, Options{})
	p := compile(t, env, workspace)
	tests := []struct {
		name, args string
		want       bool
		wantErr    bool
	}{
		{"own file", `{"path": "/workspace/alice/notes.txt"}`, true, false},
		{"own nested file", `{"path": "/workspace/alice/a/../b/c.txt"}`, true, false},
		{"dot-dot out", `{"path": "/workspace/alice/../bob/secret"}`, false, false},
		{"backslash dot-dot out", `{"path": "/workspace/alice\\..\\bob\\secret"}`, false, false},
		{"escaped dot-dot out", `{"path": "/workspace/alice/\u002e\u002e/bob/secret"}`, false, false},
		{"sibling with the same prefix", `{"path": "/workspace/alice-evil/x"}`, false, false},
		{"the workspace itself", `{"path": "/workspace/alice"}`, false, false},
		{"relative", `{"path": "workspace/alice/x"}`, false, false},
		{"root", `{"path": "/"}`, false, false},
		{"empty", `{"path": ""}`, false, false},
		{"a number", `{"path": 7}`, false, true},
		{"a list", `{"path": ["/workspace/alice/x"]}`, false, true},
		{"an object", `{"path": {"path": "/workspace/alice/x"}}`, false, true},
		{"null", `{"path": null}`, false, true},
		{"missing", `{"file": "/workspace/alice/x"}`, false, true},
		{"no arguments", ``, false, true},
		{"key differs in case", `{"Path": "/workspace/alice/x"}`, false, true},
		{"key escaped", `{"p\u0061th": "/workspace/bob/x"}`, false, false},
		// Go's encoding/json (mcp-go's BindArguments) and .NET's web
		// defaults bind a struct field to a key in any case, the last one
		// winning: a key equal to the one read under case folding is
		// ambiguous, whichever comes first.
		{"key in another case after it", `{"path": "/workspace/alice/x", "PATH": "/etc/passwd"}`, false, true},
		{"key in another case before it", `{"Path": "/etc/passwd", "path": "/workspace/alice/x"}`, false, true},
		{"nested path not read", `{"opts": {"path": "/workspace/alice/x"}, "path": "/etc/passwd"}`, false, false},
		{"path after a string holding braces and quotes", `{"note": "}\"{\\\"path\\\": \"/workspace/alice/x\"", "path": "/etc/passwd"}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Input{Identity: Identity{Subject: "alice"}, MCP: MCP{Arguments: tt.args, BodyComplete: true}}
			got, err := p.Eval(in)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("Eval = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestKeysInAnotherCase: a member an expression reads, or tests with has,
// is ambiguous when the object holds a key equal to it only under Unicode
// case folding (Go's encoding/json binds "Force" and "ſkip" to fields
// force and skip): the expression fails, so that the rule denies, instead
// of deciding on a reading the tool does not share.
func TestKeysInAnotherCase(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct{ name, expr, args string }{
		{"has on a key in another case", `has(mcp.arguments.force)`, `{"Force": true}`},
		{"has next to the exact key", `has(mcp.arguments.force)`, `{"force": false, "FORCE": true}`},
		{"a long s", `mcp.arguments.skip == false`, `{"skip": false, "\u017fkip": true}`},
		{"nested", `mcp.arguments.opts.path == "/tmp"`, `{"opts": {"path": "/tmp", "pAth": "/etc"}}`},
		{"a big object", `mcp.arguments.path == "/tmp"`, `{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"path":"/tmp","PATH":"/etc"}`},
		{"a big object, only the other case", `has(mcp.arguments.path)`, `{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"PATH":"/etc"}`},
		// Objects inside lists: a Go tool decoding []struct{Path string}
		// binds PATH (the last) as well.
		{"in a list, all", `mcp.arguments.files.all(f, f.path.startsWith("/tmp/"))`, `{"files": [{"path": "/tmp/a", "PATH": "/etc/passwd"}]}`},
		{"in a list, exists", `mcp.arguments.files.exists(f, f.path == "/tmp/a")`, `{"files": [{"path": "/tmp/a", "pAth": "/etc/shadow"}]}`},
		{"in a list, indexed", `mcp.arguments.files[0].path.startsWith("/tmp/")`, `{"files": [{"path": "/tmp/a", "PATH": "/etc/passwd"}]}`},
		{"in a list, Kelvin sign", `mcp.arguments.l.all(x, x.k == 1)`, `{"l": [{"k": 1, "\u212a": 2}]}`},
		{"in a list, only the other case", `mcp.arguments.l.all(x, !has(x.force))`, `{"l": [{"Force": true}]}`},
		{"in a list, read whole", `size(mcp.arguments.files) == 1`, `{"files": [{"path": "/tmp/a", "PATH": "/etc/passwd"}]}`},
		{"in a list in a list", `mcp.arguments.l[0][0].path == "/tmp"`, `{"l": [[{"path": "/tmp", "PATH": "/etc"}]]}`},
		{"in a list, a big object", `mcp.arguments.l[0].path == "/tmp"`, `{"l": [{"a0":0,"a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6,"a7":7,"a8":8,"a9":9,"b0":0,"b1":1,"b2":2,"b3":3,"b4":4,"b5":5,"b6":6,"path":"/tmp","PATH":"/etc"}]}`},
		{"deeper in a list than read", `size(mcp.arguments.l) == 1`, `{"l": [{"o": {"x": 1, "X": 2}}]}`},
		// Objects read whole: compared, or converted.
		{"nested object compared whole", `mcp.arguments.opts == {"path": "/tmp"}`, `{"opts": {"path": "/tmp", "PATH": "/etc"}}`},
		{"nested object deeper compared whole", `mcp.arguments.opts == {"o": {"path": "/tmp"}}`, `{"opts": {"o": {"path": "/tmp", "PATH": "/etc"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Input{MCP: MCP{Arguments: tt.args, BodyComplete: true}}
			if got, err := compile(t, env, tt.expr).Eval(in); err == nil {
				t.Errorf("Eval = %v, nil; want an error", got)
			}
		})
	}
	// Controls: keys that merely share letters are not ambiguous, nor are
	// keys in another case in different objects of a list, nor one deeper
	// than what an expression reads of an object.
	for _, tt := range []struct{ expr, args string }{
		{`mcp.arguments.path == "/tmp"`, `{"path": "/tmp", "paths": ["/etc"], "pat": 1}`},
		{`mcp.arguments.files.all(f, f.path.startsWith("/tmp/"))`, `{"files": [{"path": "/tmp/a", "mode": 1}, {"path": "/tmp/b", "Mode": 2}]}`},
		{`mcp.arguments.files.map(f, f.path) == ["/tmp/a", "/tmp/b"]`, `{"files": [{"path": "/tmp/a"}, {"path": "/tmp/b"}]}`},
		{`mcp.arguments.opts.path == "/tmp"`, `{"opts": {"path": "/tmp", "o": {"x": 1, "X": 2}}}`},
		{`mcp.arguments.l == [1.0, "a", [true], {"k": null}]`, `{"l": [1, "a", [true], {"k": null}]}`},
	} {
		in := &Input{MCP: MCP{Arguments: tt.args, BodyComplete: true}}
		if got, err := compile(t, env, tt.expr).Eval(in); !got || err != nil {
			t.Errorf("%s on %s: Eval = %v, %v; want true", tt.expr, tt.args, got, err)
		}
	}
}

// TestDecisionPointArguments: the arguments an AuthZEN rule sends are left
// out, and reported ambiguous, when the member's value holds keys equal
// but for case at any depth (in an object, in a list), not only when the
// member itself is in another case.
func TestDecisionPointArguments(t *testing.T) {
	tests := []struct {
		name, args string
		ambiguous  bool
	}{
		{"plain", `{"opts": {"path": "/tmp/a"}, "files": [{"path": "/tmp/a"}]}`, false},
		{"member in another case", `{"opts": {"path": "/tmp/a"}, "OPTS": {}, "files": [], "Files": 1}`, true},
		{"in a nested object", `{"opts": {"path": "/tmp/a", "PATH": "/etc/passwd"}, "files": [{"path": "/tmp/a", "PATH": "/etc/shadow"}]}`, true},
		{"deeper in a nested object", `{"opts": {"o": {"path": "/tmp/a", "PATH": "/etc/passwd"}}, "files": [[{"o": {"k": 1, "\u212a": 2}}]]}`, true},
		{"in different objects of a list", `{"opts": {"a": {"path": 1}, "b": {"PATH": 2}}, "files": [{"path": "/tmp/a"}, {"PATH": "/etc"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Input{MCP: MCP{BodyComplete: true, Arguments: tt.args}}
			for _, name := range []string{"opts", "files"} {
				amb := in.ArgumentsAmbiguous([]string{name})
				v, ok := in.Argument(name)
				if amb != tt.ambiguous || ok == tt.ambiguous {
					t.Errorf("%s: ambiguous %v, Argument = %#v, %v; want ambiguous %v", name, amb, v, ok, tt.ambiguous)
				}
			}
		})
	}
}

// TestPartialBody: a rule reading the arguments never passes without the
// whole body, even when the partial body would satisfy it.
func TestPartialBody(t *testing.T) {
	env := newEnv(t, Options{})
	for _, expr := range []string{workspace, `!has(mcp.arguments.force)`, `size(mcp.arguments) == 0`, `true || mcp.arguments.x == 1`} {
		in := &Input{Identity: Identity{Subject: "alice"}, MCP: MCP{Arguments: `{"path": "/workspace/alice/x"}`}}
		got, err := compile(t, env, expr).Eval(in)
		if got || !errors.Is(err, ErrNoArguments) {
			t.Errorf("%s: Eval = %v, %v; want ErrNoArguments", expr, got, err)
		}
	}
}

// TestCrossTypes: comparisons across types are false or errors, never a
// coercion an attacker could steer.
func TestCrossTypes(t *testing.T) {
	env := newEnv(t, Options{})
	args := `{"n": 5, "s": "5", "b": "true", "big": 1e308, "neg": -0, "list": [1, "1"]}`
	tests := []struct {
		name, expr string
		want       bool
		wantErr    bool
	}{
		{"number equals int", `mcp.arguments.n == 5`, true, false},
		{"number is not its string", `mcp.arguments.n == "5"`, false, false},
		{"string is not its number", `mcp.arguments.s == 5`, false, false},
		{"string is not a bool", `mcp.arguments.b == true`, false, false},
		{"ordering across types errors", `mcp.arguments.s > 4`, false, true},
		{"string as a bool errors", `mcp.arguments.b`, false, true},
		{"number as a bool errors", `!mcp.arguments.n`, false, true},
		{"large number", `mcp.arguments.big > 1000000`, true, false},
		{"negative zero", `mcp.arguments.neg == 0`, true, false},
		{"list membership keeps types", `"1" in mcp.arguments.list && 1 in mcp.arguments.list && !(2 in mcp.arguments.list)`, true, false},
		{"claim number against string", `jwt.level == "3"`, false, false},
		{"claim string list against scopes", `jwt.groups == identity.scopes`, false, false},
		{"int overflow errors", `lineage.depth + 9223372036854775807 > 0`, false, true},
		{"constructing an object errors", `extauthz.Identity{subject: "x"}.subject == "x"`, false, true},
		{"a whole object cannot be used", `mcp == mcp`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := alice()
			in.MCP.Arguments = args
			got, err := compile(t, env, tt.expr).Eval(in)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("Eval = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestHas: has() on a missing member is false, on a present one true; a
// missing member read without has() is an error (denied), never a default.
func TestHas(t *testing.T) {
	env := newEnv(t, Options{})
	tests := []struct {
		name, expr string
		want       bool
		wantErr    bool
	}{
		{"missing claim", `has(jwt.email)`, false, false},
		{"present claim", `has(jwt.groups)`, true, false},
		{"missing nested claim", `has(jwt.tenant.name)`, false, false},
		{"nested under a missing claim", `has(jwt.org.name)`, false, true},
		{"missing argument", `has(mcp.arguments.nope)`, false, false},
		{"nested argument", `has(mcp.arguments.opts.mode)`, true, false},
		{"under a scalar argument", `has(mcp.arguments.path.x)`, false, false},
		{"missing header", `has(request.headers.authorization)`, false, false},
		{"missing annotation", `has(mcp.annotations.openWorldHint)`, false, false},
		{"read without has", `mcp.arguments.nope == "x"`, false, true},
		{"negated read without has", `mcp.arguments.nope != "x"`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := compile(t, env, tt.expr).Eval(alice())
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("Eval = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestRunaway: expressions that try to run forever are refused at load
// when their cost can be seen there, and stopped at run time otherwise.
func TestRunaway(t *testing.T) {
	env := newEnv(t, Options{})
	for _, expr := range []string{
		`mcp.arguments.a.all(x, mcp.arguments.a.all(y, mcp.arguments.a.all(z, x == y)))`,
		`jwt.groups.all(x, jwt.groups.all(y, jwt.groups.all(z, x != y)))`,
		`request.headers.all(k, request.headers.all(j, request.headers[k].matches(request.headers[j])))`,
	} {
		if _, err := env.Compile(expr); err == nil || !strings.Contains(err.Error(), "more than the bound") {
			t.Errorf("Compile(%s) = %v, want refused for its cost", expr, err)
		}
	}

	// Within the load bound for lists of the assumed size, over the runtime
	// limit for the list actually sent.
	small := newEnv(t, Options{CostLimit: 10_000})
	p := compile(t, small, `mcp.arguments.items.all(x, x == mcp.arguments.one)`)
	if !p.tracked {
		t.Fatal("the runtime limit is not tracked")
	}
	items := strings.Repeat("1,", 2000) + "1"
	in := &Input{MCP: MCP{Arguments: `{"one": 1, "items": [` + items + `]}`, BodyComplete: true}}
	got, err := p.Eval(in)
	if got || !errors.Is(err, ErrCostLimit) {
		t.Errorf("Eval = %v, %v; want ErrCostLimit", got, err)
	}
	if d, err := p.CanCall(in); d != DependsOnArguments || err != nil {
		t.Errorf("CanCall = %v, %v", d, err)
	}
}

// TestUntracked: an expression whose worst case over the largest inputs is
// within the runtime limit runs without a cost tracker.
func TestUntracked(t *testing.T) {
	env := newEnv(t, Options{})
	for expr, tracked := range map[string]bool{
		workspace:                            false,
		`identity.subject == "alice"`:        false,
		`mcp.arguments.tags.all(t, t != "")`: true,
	} {
		if p := compile(t, env, expr); p.tracked != tracked {
			t.Errorf("%s: tracked = %v, want %v", expr, p.tracked, tracked)
		}
	}
}

// TestHugeArguments: a 1 MiB argument object and one nested 10,000 deep are
// read without recursion or a whole decode.
func TestHugeArguments(t *testing.T) {
	env := newEnv(t, Options{})
	p := compile(t, env, workspace)
	huge := `{"pad": "` + strings.Repeat("x", 1<<20) + `", "path": "/workspace/alice/x"}`
	deep := `{"nest": ` + strings.Repeat(`{"a": `, 10000) + `1` + strings.Repeat(`}`, 10000) + `, "path": "/workspace/bob/x"}`
	deepList := `{"nest": ` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `, "path": "/workspace/alice/x"}`
	for name, tt := range map[string]struct {
		args string
		want bool
	}{"huge": {huge, true}, "deep": {deep, false}, "deep list": {deepList, true}} {
		in := &Input{Identity: Identity{Subject: "alice"}, MCP: MCP{Arguments: tt.args, BodyComplete: true}}
		if got, err := p.Eval(in); got != tt.want || err != nil {
			t.Errorf("%s: Eval = %v, %v; want %v", name, got, err, tt.want)
		}
	}
	// Reading into the deep value decodes only what is read.
	in := &Input{MCP: MCP{Arguments: deep, BodyComplete: true}}
	if got, err := compile(t, env, `has(mcp.arguments.nest.a.a.a)`).Eval(in); !got || err != nil {
		t.Errorf("has(nest.a.a.a) = %v, %v", got, err)
	}
	// A list nested deeper than encoding/json decodes is an error, not
	// an empty list.
	in = &Input{MCP: MCP{Arguments: deepList, BodyComplete: true}}
	if got, err := compile(t, env, `size(mcp.arguments.nest) == 1`).Eval(in); got || err == nil {
		t.Errorf("size(nest) = %v, %v; want an error", got, err)
	}
}

// TestMalformedArguments: arguments that are not a JSON object (a caller
// bug; the front end refuses such bodies) read as errors, never panic.
func TestMalformedArguments(t *testing.T) {
	env := newEnv(t, Options{})
	p := compile(t, env, `mcp.arguments.path == "/x"`)
	for _, args := range []string{`[1]`, `"x"`, `{`, `{"path"`, `{"path":`, `{"path": "/x"`, `{"path" "/x"}`, `{path: "/x"}`, `{"a": 1 "path": "/x"}`, `{"a": tru, "path": "/x"}`, `{"a": NaN, "path": "/x"}`, `{"a": 0x10, "path": "/x"}`, `{"path": "/x\`, `{"path": "/x"} x`} {
		in := &Input{MCP: MCP{Arguments: args, BodyComplete: true}}
		if got, err := p.Eval(in); got || err == nil {
			t.Errorf("%s: Eval = %v, %v; want an error", args, got, err)
		}
	}
}

// TestFoldKey: two keys have one fold key exactly when strings.EqualFold
// says they are equal, over every pair of a set of runes whose orbits hold
// ASCII and other letters alike (K, k and the Kelvin sign; S, s and the long
// s; Greek sigma's three forms).
func TestFoldKey(t *testing.T) {
	runes := []rune{'a', 'A', 'k', 'K', '\u212a', 's', 'S', '\u017f', '\u03c3', '\u03a3', '\u03c2', '\u00e9', '\u00c9', '1', '_', '-', 'z', 'Z', '\u00df', '\u1e9e'}
	for _, a := range runes {
		for _, b := range runes {
			x, y := "id_"+string(a), "id_"+string(b)
			if got, want := foldKey(x) == foldKey(y), strings.EqualFold(x, y); got != want {
				t.Errorf("%q, %q: same fold key %v, EqualFold %v", x, y, got, want)
			}
		}
	}
	if s := "path_2"; foldKey(s) != s {
		t.Errorf("foldKey(%q) = %q, want it unchanged", s, foldKey(s))
	}
}
