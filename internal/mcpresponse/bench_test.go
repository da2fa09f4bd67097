package mcpresponse

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// toolsList builds a tools/list response with n tools shaped like an MCP
// SDK server's (name, description, input schema, annotations).
func toolsList(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool_%d","description":"Does thing number %d with the given path and options.",`+
			`"inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"where"},"recursive":{"type":"boolean"}},"required":["path"]},`+
			`"annotations":{"readOnlyHint":%t,"openWorldHint":false}}`, i, i, i%2 == 0)
	}
	b.WriteString(`],"nextCursor":"eyJvZmZzZXQiOjEwMH0="}}`)
	return []byte(b.String())
}

// BenchmarkFilterList100Tools filters a 100-tool list, hiding half of it;
// ns/tool is the cost per listed tool. The reference sub-benchmark runs
// the first implementation (reference_test.go) on the same input, a
// yardstick measured in the same run.
func BenchmarkFilterList100Tools(b *testing.B) {
	body := toolsList(100)
	keep := func(kind, name string, _ json.RawMessage) bool { return name[len(name)-1]%2 == 0 }
	for _, bc := range []struct {
		name   string
		filter func(string, []byte, Predicate) ([]byte, int, error)
	}{
		{"filter", FilterList},
		{"reference", referenceFilterList},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, removed, err := bc.filter("tools/list", body, keep); err != nil || removed != 50 {
					b.Fatal(removed, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/tool")
		})
	}
}

// BenchmarkFilterListUnchanged: a 100-tool list of which nothing is
// hidden comes back as it was, without a copy.
func BenchmarkFilterListUnchanged(b *testing.B) {
	body := toolsList(100)
	keep := func(string, string, json.RawMessage) bool { return true }
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, removed, err := FilterList("tools/list", body, keep); err != nil || removed != 0 {
			b.Fatal(removed, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/tool")
}

// BenchmarkReassembler1000Events: 1,000 small events in 4 KiB chunks (so
// events straddle chunks); ns/event is the cost per event.
func BenchmarkReassembler1000Events(b *testing.B) {
	var s strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&s, "event: message\nid: %d\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":%d}}\n\n", i, i)
	}
	stream := []byte(s.String())
	const chunk = 4096
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	r := NewReassembler(0)
	events := 0
	emit := func([]byte) error { events++; return nil }
	for b.Loop() {
		events = 0
		for off := 0; off < len(stream); off += chunk {
			if err := r.Write(stream[off:min(off+chunk, len(stream))], emit); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := r.Flush(emit); err != nil || events != 1000 {
			b.Fatal(events, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/event")
}

// BenchmarkStdlibValid100Tools is a yardstick for the machine the
// benchmarks run on: encoding/json only validating the same response that
// BenchmarkFilterList100Tools validates strictly, walks and rebuilds.
func BenchmarkStdlibValid100Tools(b *testing.B) {
	body := toolsList(100)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkSSEListFilter1000Events: a list answered on an event stream of
// 1,000 small events (progress notifications, then the result), each in
// its own chunk, through SSEListFilter; ns/event is the cost per event.
// by_shape: the same stream through NewSSEShapeFilter (a resumed stream).
func BenchmarkSSEListFilter1000Events(b *testing.B) {
	const n = 1000
	chunks := make([][]byte, 0, n)
	for i := range n - 1 {
		chunks = append(chunks, fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":%d}}\n\n", i))
	}
	chunks = append(chunks, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"read_1\"},{\"name\":\"delete_1\"}]}}\n\n"))
	keep := func(_, name string, _ json.RawMessage) bool { return name[0] == 'r' }
	for _, bc := range []struct {
		name   string
		filter func() *SSEListFilter
	}{
		{"by_method", func() *SSEListFilter { return NewSSEListFilter("tools/list", keep, 0) }},
		{"by_shape", func() *SSEListFilter { return NewSSEShapeFilter(keep, 0) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				f := bc.filter()
				for i, c := range chunks {
					if _, err := f.Chunk(c, i == n-1); err != nil {
						b.Fatal(err)
					}
				}
				if f.Removed != 1 {
					b.Fatal(f.Removed)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
		})
	}
}

// BenchmarkSSERequestFilter: a call's event stream read for the server's
// requests the rules refuse, 1,000 progress notifications and one refused
// elicitation, each event its own chunk; reported per event.
func BenchmarkSSERequestFilter(b *testing.B) {
	const n = 1000
	chunks := make([][]byte, 0, n)
	for i := range n - 1 {
		chunks = append(chunks, fmt.Appendf(nil, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":%d}}\n\n", i))
	}
	chunks = append(chunks, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"elicitation/create\",\"params\":{\"message\":\"?\"}}\n\n"))
	b.ReportAllocs()
	for b.Loop() {
		f := NewSSEEventFilter(0)
		f.DropRequests(jsonrpc.AnswersElicitation)
		for i, c := range chunks {
			if _, err := f.Chunk(c, i == n-1); err != nil {
				b.Fatal(err)
			}
		}
		if f.Dropped != 1 {
			b.Fatalf("%d dropped", f.Dropped)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
}
