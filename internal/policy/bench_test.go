package policy

import "testing"

func benchEval(b *testing.B, expr string, in *Input, want bool) {
	env := newEnv(b, Options{})
	p := compile(b, env, expr)
	b.ReportAllocs()
	for b.Loop() {
		got, err := p.Eval(in)
		if err != nil || got != want {
			b.Fatalf("Eval = %v, %v", got, err)
		}
	}
}

// BenchmarkEvalArgumentsPath is the call-dependent rule of the issue: one
// member of the arguments, read from their raw JSON.
func BenchmarkEvalArgumentsPath(b *testing.B) {
	benchEval(b, `mcp.arguments.path.startsWith("/workspace/")`, alice(), true)
}

// BenchmarkEvalWorkspace is the cookbook's workspace rule (cleanPath and a
// concatenation more).
func BenchmarkEvalWorkspace(b *testing.B) {
	in := alice()
	benchEval(b, workspace, in, true)
}

func BenchmarkEvalIdentity(b *testing.B) {
	benchEval(b, `"finance" in jwt.groups && identity.actors == ["billing-agent"]`, alice(), true)
}

func BenchmarkCanCall(b *testing.B) {
	env := newEnv(b, Options{})
	p := compile(b, env, `"files:read" in identity.scopes && mcp.arguments.path.startsWith("/workspace/")`)
	in := alice()
	in.MCP.Arguments, in.MCP.BodyComplete = "", false
	b.ReportAllocs()
	for b.Loop() {
		if d, err := p.CanCall(in); d != DependsOnArguments || err != nil {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	env := newEnv(b, Options{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := env.Compile(workspace); err != nil {
			b.Fatal(err)
		}
	}
}
