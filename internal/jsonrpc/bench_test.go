package jsonrpc

import (
	"strings"
	"testing"
)

// benchBodies are typical client POSTs.
var benchBodies = []struct {
	name string
	body string
}{
	{"tools/call typical", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`},
	{"tools/call small", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_issues",` +
		`"arguments":{"repo":"extauthz/extauthz","query":"is:open label:bug","limit":20,"include_closed":false},` +
		`"_meta":{"progressToken":"tok-42","io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`},
	{"tools/call 10KB argument", `{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"name":"write_file",` +
		`"arguments":{"path":"notes/report.md","content":"` + strings.Repeat(`Lorem ipsum dolor sit amet, \"consectetur\" adipiscing elit.\n`, 160) + `"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
	{"initialize", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}},` +
		`"clientInfo":{"name":"ExampleClient","title":"Example Client Display Name","version":"1.0.0"}}}`},
	{"A2A message/send", `{"jsonrpc":"2.0","id":"req-001","method":"message/send","params":{"message":{"role":"user",` +
		`"parts":[{"kind":"text","text":"Summarize the open incidents for the payments team"}],"messageId":"9229e770-767c-417b-a0b0-f0741243c589",` +
		`"contextId":"ctx-2f1c8a9e","taskId":"task-7d3b"},"configuration":{"blocking":true,"acceptedOutputModes":["text/plain"]}}}`},
}

func BenchmarkParse(b *testing.B) {
	for _, bb := range benchBodies {
		body := []byte(bb.body)
		if _, err := Parse(body); err != nil {
			b.Fatalf("%s: %v", bb.name, err)
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := Parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchDocuments are the JOSE header and payload of a typical access token,
// which token verification walks on every cache miss.
var benchDocuments = []struct {
	name string
	doc  string
}{
	{"JWT header", `{"alg":"RS256","typ":"JWT","kid":"key-2026-01"}`},
	{"JWT payload", `{"sub":"user-0000001","session_id":"3f6c1a9e-5d2b-4c8f-a1e7-000000000001",` +
		`"iss":"https://login.example.com","aud":"https://mcp.example.com","exp":1790000000,"iat":1789996400,` +
		`"scope":"openid profile mcp:tools","department":"eng","email":"user-0000001@example.com"}`},
}

func BenchmarkWalkStrict(b *testing.B) {
	n := 0
	visit := func(int, []byte, int, int) { n++ }
	for _, bd := range benchDocuments {
		doc := []byte(bd.doc)
		b.Run(bd.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if err := WalkStrict(doc, MaxDepth, visit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDecodeMcpName(b *testing.B) {
	for _, v := range []string{"search_issues", encodeMcpName("Hello, 世界")} {
		b.Run(v, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeMcpName(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestParseAllocations guards the hot path's allocation count: the id, and
// one string shared by the members read.
func TestParseAllocations(t *testing.T) {
	want := map[string]float64{"tools/call typical": 2, "tools/call small": 2, "tools/call 10KB argument": 2, "initialize": 1, "A2A message/send": 2}
	for _, bb := range benchBodies {
		body := []byte(bb.body)
		got := testing.AllocsPerRun(100, func() {
			if _, err := Parse(body); err != nil {
				t.Fatal(err)
			}
		})
		if got > want[bb.name] {
			t.Errorf("%s: %v allocations, want at most %v", bb.name, got, want[bb.name])
		}
	}
}

// TestWalkStrictAllocations: walking a token's header or payload allocates
// nothing.
func TestWalkStrictAllocations(t *testing.T) {
	visit := func(int, []byte, int, int) {}
	for _, bd := range benchDocuments {
		doc := []byte(bd.doc)
		got := testing.AllocsPerRun(100, func() {
			if err := WalkStrict(doc, MaxDepth, visit); err != nil {
				t.Fatal(err)
			}
		})
		if got != 0 {
			t.Errorf("%s: %v allocations, want none", bd.name, got)
		}
	}
}
