package mcpresponse

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// refuse returns a predicate that refuses the named entries and records
// every call.
func refuse(calls *[]string, names ...string) Predicate {
	return func(kind, name string, annotations json.RawMessage) bool {
		*calls = append(*calls, kind+":"+name+":"+string(annotations))
		for _, n := range names {
			if n == name {
				return false
			}
		}
		return true
	}
}

func TestFilterListGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "tools_list.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "tools_list.readonly.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	readOnly := func(kind, name string, annotations json.RawMessage) bool {
		calls = append(calls, name)
		var a struct{ ReadOnlyHint bool }
		_ = json.Unmarshal(annotations, &a)
		return a.ReadOnlyHint
	}
	got, removed, err := FilterList("tools/list", in, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	if removed != 1 || !bytes.Equal(got, want) {
		t.Fatalf("removed %d, got\n%s\nwant\n%s", removed, got, want)
	}
	if strings.Join(calls, ",") != "read_file,write_file,list_dir" {
		t.Fatalf("predicate calls %v", calls)
	}
}

func TestFilterList(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		body    string
		refused []string
		want    string // "" = body unchanged
		// scopeOnly: want differs from body by its cache scope alone,
		// nothing removed.
		scopeOnly bool
		calls     string
		wantErr   error
	}{
		{
			name: "public scope made private, nothing removed", method: "tools/list", scopeOnly: true,
			body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":60000,"cacheScope":"public"}}`,
			want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}],"ttlMs":60000,"cacheScope":"private"}}`,
		},
		{
			name: "scope after the list, entries removed", method: "tools/list", refused: []string{"b"},
			body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}, {"name":"b"}, {"name":"c"}] , "cacheScope" : "public" ,"_meta":{}}}`,
			want: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}, {"name":"c"}] , "cacheScope" : "private" ,"_meta":{}}}`,
		},
		{
			name: "scope before the list, entries removed", method: "prompts/list", refused: []string{"a"},
			body: `{"jsonrpc":"2.0","id":1,"result":{"cacheScope":"public","prompts":[{"name":"a"},{"name":"b"}]}}`,
			want: `{"jsonrpc":"2.0","id":1,"result":{"cacheScope":"private","prompts":[{"name":"b"}]}}`,
		},
		{
			name: "empty list still made private", method: "resources/list", scopeOnly: true,
			body: `{"id":1,"result":{"resources":[],"cacheScope":"public"}}`,
			want: `{"id":1,"result":{"resources":[],"cacheScope":"private"}}`,
		},
		{
			name: "any other scope value made private", method: "tools/list", scopeOnly: true,
			body:  `{"id":1,"result":{"cacheScope":{"name":"x"},"tools":[{"name":"a"}]}}`,
			want:  `{"id":1,"result":{"cacheScope":"private","tools":[{"name":"a"}]}}`,
			calls: "tool:a:",
		},
		{name: "private scope unchanged", method: "tools/list", body: `{"id":1,"result":{"tools":[{"name":"a"}],"cacheScope":"private"}}`},
		{name: "no scope, none added", method: "tools/list", body: `{"id":1,"result":{"tools":[{"name":"a"}],"ttlMs":5}}`},
		{name: "scope outside result untouched", method: "tools/list", body: `{"id":1,"result":{"tools":[{"name":"a"}],"_meta":{"cacheScope":"public"}}}`},
		{name: "error response scope untouched", method: "tools/list", body: `{"id":1,"error":{"code":1,"message":"m","cacheScope":"public"}}`},
		{name: "case-folded scope key", method: "tools/list", body: `{"id":1,"result":{"tools":[],"CacheScope":"public"}}`, wantErr: ErrUnexpectedShape},
		{name: "both scope spellings", method: "tools/list", body: `{"id":1,"result":{"tools":[],"cacheScope":"private","cacheScopE":"public"}}`, wantErr: ErrUnexpectedShape},
		{
			name: "removes first", method: "tools/list", refused: []string{"a"},
			body:  `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}}`,
			want:  `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"b"},{"name":"c"}]}}`,
			calls: "tool:a:,tool:b:,tool:c:",
		},
		{
			name: "removes last and middle keeps spacing", method: "tools/list", refused: []string{"b", "c"},
			body: "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"tools\":[ {\"name\":\"a\"} ,\n {\"name\":\"b\"} ,\n {\"name\":\"c\"} ]}}",
			want: "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"tools\":[ {\"name\":\"a\"} ]}}",
		},
		{
			name: "removes all", method: "prompts/list", refused: []string{"p1", "p2"},
			body: `{"jsonrpc":"2.0","id":1,"result":{"prompts":[{"name":"p1"},{"name":"p2"}],"nextCursor":"n"}}`,
			want: `{"jsonrpc":"2.0","id":1,"result":{"prompts":[],"nextCursor":"n"}}`,
		},
		{
			name: "resources match uri", method: "resources/list", refused: []string{"file:///etc/passwd"},
			body:  `{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"file:///etc/passwd","name":"a"},{"uri":"file:///tmp/x","name":"b"}]}}`,
			want:  `{"jsonrpc":"2.0","id":1,"result":{"resources":[{"uri":"file:///tmp/x","name":"b"}]}}`,
			calls: "resource:file:///etc/passwd:,resource:file:///tmp/x:",
		},
		{
			name: "templates match uriTemplate", method: "resources/templates/list", refused: []string{"db://{t}"},
			body: `{"jsonrpc":"2.0","id":1,"result":{"resourceTemplates":[{"uriTemplate":"db://{t}","name":"a"}]}}`,
			want: `{"jsonrpc":"2.0","id":1,"result":{"resourceTemplates":[]}}`,
		},
		{
			name: "skills match the uri of their SKILL.md", method: "skills/list", refused: []string{"skill://internal/deploy/SKILL.md"},
			body:  `{"jsonrpc":"2.0","id":1,"result":{"skills":[{"uri":"skill://internal/deploy/SKILL.md","frontmatter":{"name":"deploy","description":"d"},"resources":"dynamic"},{"uri":"skill://public/hello/SKILL.md","frontmatter":{"name":"hello","description":"h"},"resources":[]}],"ttlMs":0,"cacheScope":"public"}}`,
			want:  `{"jsonrpc":"2.0","id":1,"result":{"skills":[{"uri":"skill://public/hello/SKILL.md","frontmatter":{"name":"hello","description":"h"},"resources":[]}],"ttlMs":0,"cacheScope":"private"}}`,
			calls: "skill:skill://internal/deploy/SKILL.md:,skill:skill://public/hello/SKILL.md:",
		},
		{
			name: "escaped name decoded", method: "tools/list", refused: []string{"admin/x"},
			body:  `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"n\u0061me":"admin\/x"}]}}`,
			want:  `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`,
			calls: "tool:admin/x:",
		},
		{
			name: "annotations passed raw", method: "tools/list",
			body:  `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","annotations":{"readOnlyHint":true}}]}}`,
			calls: `tool:a:{"readOnlyHint":true}`,
		},
		{name: "nothing refused unchanged", method: "tools/list", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"}]}}`},
		{name: "empty list", method: "tools/list", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`},
		{name: "error response passes", method: "tools/list", body: `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`},
		{name: "notification passes", method: "tools/list", body: `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`},

		{name: "not a list method", method: "tools/call", body: `{}`, wantErr: ErrNotList},
		{name: "invalid json", method: "tools/list", body: `{"jsonrpc":"2.0",`, wantErr: ErrUnreadable},
		{name: "duplicate key", method: "tools/list", body: `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","name":"b"}]}}`, wantErr: ErrUnreadable},
		{name: "duplicate result", method: "tools/list", body: `{"id":1,"result":{"tools":[]},"result":{"tools":[]}}`, wantErr: ErrUnreadable},
		{name: "invalid utf-8", method: "tools/list", body: "{\"id\":1,\"result\":{\"tools\":[{\"name\":\"\xff\"}]}}", wantErr: ErrUnreadable},
		{name: "case-folded tools key", method: "tools/list", body: `{"id":1,"result":{"Tools":[{"name":"a"}]}}`, wantErr: ErrUnexpectedShape},
		{name: "both tools spellings", method: "tools/list", body: `{"id":1,"result":{"tools":[],"TOOLS":[{"name":"a"}]}}`, wantErr: ErrUnexpectedShape},
		{name: "escaped long s folds onto tools", method: "tools/list", body: `{"id":1,"result":{"tool\u017f":[{"name":"a"}]}}`, wantErr: ErrUnexpectedShape},
		{name: "case-folded name key", method: "tools/list", body: `{"id":1,"result":{"tools":[{"name":"a","NAME":"b"}]}}`, wantErr: ErrUnexpectedShape},
		{name: "long s folded result", method: "tools/list", body: "{\"id\":1,\"re\u017fult\":{\"tools\":[]}}", wantErr: ErrUnexpectedShape},
		{name: "missing name", method: "tools/list", body: `{"id":1,"result":{"tools":[{"title":"a"}]}}`, wantErr: ErrUnexpectedShape},
		{name: "numeric name", method: "tools/list", body: `{"id":1,"result":{"tools":[{"name":1}]}}`, wantErr: ErrUnexpectedShape},
		{name: "entry not object", method: "tools/list", body: `{"id":1,"result":{"tools":["a"]}}`, wantErr: ErrUnexpectedShape},
		{name: "tools not array", method: "tools/list", body: `{"id":1,"result":{"tools":{}}}`, wantErr: ErrUnexpectedShape},
		{name: "missing tools", method: "tools/list", body: `{"id":1,"result":{}}`, wantErr: ErrUnexpectedShape},
		{name: "result not object", method: "tools/list", body: `{"id":1,"result":[]}`, wantErr: ErrUnexpectedShape},
		{name: "batch", method: "tools/list", body: `[{"id":1,"result":{"tools":[]}}]`, wantErr: ErrUnexpectedShape},
		{name: "neither result nor error", method: "tools/list", body: `{"id":1}`, wantErr: ErrUnexpectedShape},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			got, removed, err := FilterList(tt.method, []byte(tt.body), refuse(&calls, tt.refused...))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			want := tt.want
			if want == "" {
				want = tt.body
			}
			if string(got) != want {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			if (removed > 0) != (tt.want != "" && !tt.scopeOnly) {
				t.Fatalf("removed = %d", removed)
			}
			if tt.calls != "" && strings.Join(calls, ",") != tt.calls {
				t.Fatalf("calls %q, want %q", strings.Join(calls, ","), tt.calls)
			}
		})
	}
}

// FuzzFilterList: whatever FilterList keeps re-parses with encoding/json to
// the input's entries minus the refused ones, with every other member of
// the response and of the result unchanged.
func FuzzFilterList(f *testing.F) {
	in, err := os.ReadFile(filepath.Join("testdata", "tools_list.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(in, uint8(0b010))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`), uint8(1))
	f.Add([]byte(`{"id":1,"result":{"tools":[ {"name":"\u00e9"} , {"name":"x","annotations":null} ]}}`), uint8(2))
	f.Add([]byte(`{"id":1,"result":{"cacheScope":"public","tools":[{"name":"a"},{"name":"b"}],"ttlMs":1}}`), uint8(1))
	f.Add([]byte(`{"id":1,"result":{"tools":[{"name":"a"}],"cacheScope":[{"name":"b"}]}}`), uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, mask uint8) {
		// Refuse the entries whose position's bit is set in mask.
		n := 0
		keep := func(kind, name string, annotations json.RawMessage) bool {
			bit := n % 8
			n++
			return mask&(1<<bit) == 0
		}
		out, removed, err := FilterList("tools/list", body, keep)
		if err != nil {
			return
		}
		var before, after struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(body, &before); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("output %q does not parse: %v", out, err)
		}
		if before.Result == nil {
			if !bytes.Equal(out, body) || removed != 0 {
				t.Fatalf("a message without result was changed")
			}
			return
		}
		var was, is []json.RawMessage
		if err := json.Unmarshal(before.Result["tools"], &was); err != nil {
			t.Fatalf("accepted tools %q that encoding/json does not read as an array: %v", before.Result["tools"], err)
		}
		if err := json.Unmarshal(after.Result["tools"], &is); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, e := range was {
			var entry struct {
				Name *string `json:"name"`
			}
			if err := json.Unmarshal(e, &entry); err != nil || entry.Name == nil {
				t.Fatalf("accepted entry %q without a string name", e)
			}
			if mask&(1<<(i%8)) == 0 {
				want = append(want, compact(t, e))
			}
		}
		if len(was)-len(want) != removed || len(is) != len(want) {
			t.Fatalf("removed %d of %d, kept %d, want %d", removed, len(was), len(is), len(want))
		}
		for i := range is {
			if compact(t, is[i]) != want[i] {
				t.Fatalf("entry %d = %s, want %s", i, is[i], want[i])
			}
		}
		for k, v := range before.Result {
			switch k {
			case "tools":
			case "cacheScope":
				if string(after.Result[k]) != CacheScopePrivate {
					t.Fatalf("result.cacheScope %s came out as %s, want private", v, after.Result[k])
				}
			default:
				if compact(t, after.Result[k]) != compact(t, v) {
					t.Fatalf("result.%s changed", k)
				}
			}
		}
		if _, ok := before.Result["cacheScope"]; !ok && len(after.Result) != len(before.Result) {
			t.Fatalf("result members %d became %d", len(before.Result), len(after.Result))
		}
	})
}

func compact(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.String()
}

// TestFilterListAllocations guards the hot path: filtering a list costs
// the same few allocations (the output, the names) however many entries
// it holds.
func TestFilterListAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not kept under the race detector")
	}
	odd := func(_, name string, _ json.RawMessage) bool { return name[len(name)-1]%2 == 0 }
	all := func(string, string, json.RawMessage) bool { return true }
	for _, tt := range []struct {
		name  string
		tools int
		keep  Predicate
		max   float64
	}{
		{"10 tools, half removed", 10, odd, 3},
		{"1000 tools, half removed", 1000, odd, 3},
		{"1000 tools, none removed", 1000, all, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := toolsList(tt.tools)
			got := testing.AllocsPerRun(50, func() {
				if _, _, err := FilterList("tools/list", body, tt.keep); err != nil {
					t.Fatal(err)
				}
			})
			if got > tt.max {
				t.Errorf("%v allocations, want at most %v", got, tt.max)
			}
		})
	}
}
