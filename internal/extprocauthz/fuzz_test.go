package extprocauthz

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

// FuzzTaskID: any answer body is read without panicking, and an id read
// from it (a task's, an A2A context's) is the one encoding/json (the Go
// SDK client's decoder) reads: where the two could differ, no id is read.
func FuzzTaskID(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t1"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t2"}}`))
	f.Add([]byte(`{"result":null}`))
	f.Add([]byte(`{"result":{"task":{"taskId":"a","TaskId":"b"}}}`))
	f.Add([]byte(`{"result":{"task":{"id":"a\u00e9"},"kind":"task","id":"b"}}`))
	f.Add([]byte(`{"result":{"resultType":"task","taskId":"t3","status":"working"}}`))
	f.Add([]byte(`{"result":{"resultType":"task","taskId":"a","task":{"taskId":"b"}}}`))
	f.Add([]byte(`{"result":{"kind":"message","contextId":"c1"}}`))
	f.Add([]byte(`{"result":{"task":{"id":"t1","context_id":"c1"},"message":{"contextId":"c2"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		task, context := answerIDs(body)
		if want := stdlibTaskID(body); task != "" && task != want {
			t.Fatalf("%q: task id %q, encoding/json reads %q", body, task, want)
		}
		if want := stdlibContextID(body); context != "" && context != want {
			t.Fatalf("%q: context id %q, encoding/json reads %q", body, context, want)
		}
	})
}

// stdlibContextID reads the context of an A2A answer with encoding/json:
// the one context the result, its task and its message name, "" for two.
func stdlibContextID(body []byte) string {
	type contexts struct {
		ContextID      string `json:"contextId"`
		ContextIDSnake string `json:"context_id"`
	}
	var msg struct {
		Result *struct {
			contexts
			Task    *contexts `json:"task"`
			Message *contexts `json:"message"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Result == nil {
		return ""
	}
	r := msg.Result
	var vals []string
	for _, c := range []*contexts{&r.contexts, r.Task, r.Message} {
		if c != nil {
			vals = append(vals, c.ContextID, c.ContextIDSnake)
		}
	}
	// The rule for several names of one context is the package's own
	// (assignedContext); what this reference reads differently is the JSON.
	return assignedContext(vals)
}

// stdlibTaskID is how taskID was first written, with encoding/json, which
// takes the last of repeated keys and matches keys case-insensitively.
func stdlibTaskID(body []byte) string {
	var msg struct {
		Result *struct {
			Kind       string `json:"kind"`
			ID         string `json:"id"`
			ResultType string `json:"resultType"`
			TaskID     string `json:"taskId"`
			Task       *struct {
				TaskID string `json:"taskId"`
				ID     string `json:"id"`
			} `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Result == nil {
		return ""
	}
	r := msg.Result
	switch {
	case r.ResultType == "task" && r.TaskID != "":
		if r.Task != nil && r.Task.TaskID != "" && r.Task.TaskID != r.TaskID {
			return ""
		}
		return r.TaskID
	case r.Task != nil && r.Task.TaskID != "":
		return r.Task.TaskID
	case r.Task != nil && r.Task.ID != "":
		return r.Task.ID
	case r.Kind == "task":
		return r.ID
	}
	return ""
}

// FuzzSSEListStream: a tools/list answered as an event stream, split into
// data frames anywhere, never lets a hidden tool's name leave the
// processor, and every frame gets one reply of its kind.
func FuzzSSEListStream(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"read_1\"},{\"name\":\"delete_1\"}]}}\n\n"), uint16(7), uint16(40))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"delete_1\"}]}}\r\n\r\n"), uint16(0), uint16(1))
	f.Add([]byte(": comment\n\nid: 1\ndata:\n\n"), uint16(3), uint16(3))
	pl := pipelinetest.New(f, benchConfig, check.Deps{}, check.Options{})
	s := NewServer(pl, Options{})
	f.Fuzz(func(t *testing.T, body []byte, a, b uint16) {
		i, j := min(int(a), len(body)), min(int(b), len(body))
		if i > j {
			i, j = j, i
		}
		chunks := [][]byte{body[:i], body[i:j], body[j:]}
		msgs := benchStream(t, "text/event-stream", chunks)
		out := sentBody(t, s, msgs)
		if name, ok := hiddenListed(out); ok {
			t.Fatalf("hidden tool %q left in %q", name, out)
		}
	})
}

// FuzzSSEResumedStream: the same for a resumed stream (GET with
// Last-Event-ID), whose events are read by their shape: whatever the
// upstream replays, split anywhere, no hidden tool leaves.
func FuzzSSEResumedStream(f *testing.F) {
	f.Add([]byte("id: 2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"read_1\"},{\"name\":\"delete_1\"}]}}\n\n"), uint16(7), uint16(40))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n\ndata: {\"id\":1,\"result\":{\"Tools\":[{\"name\":\"delete_1\"}]}}\r\n\r\n"), uint16(0), uint16(30))
	f.Add([]byte("data: {\"id\":1,\"result\":{\"tools\":[{\"NAME\":\"delete_1\"}],\"prompts\":[]}}\n\n"), uint16(3), uint16(3))
	pl := pipelinetest.New(f, benchConfig, check.Deps{}, check.Options{})
	s := NewServer(pl, Options{})
	f.Fuzz(func(t *testing.T, body []byte, a, b uint16) {
		i, j := min(int(a), len(body)), min(int(b), len(body))
		if i > j {
			i, j = j, i
		}
		msgs := benchExchange(t, true, "text/event-stream", [][]byte{body[:i], body[i:j], body[j:]})
		out := sentBody(t, s, msgs)
		if name, ok := hiddenListed(out); ok {
			t.Fatalf("hidden tool %q left in %q", name, out)
		}
	})
}

// sentBody runs msgs through one exchange of s, checking that each gets a
// reply of its kind, and returns the body the replies send on.
func sentBody(t *testing.T, s *Server, msgs []*extprocv3.ProcessingRequest) []byte {
	st := &exchange{s: s, ctx: t.Context(), req: check.Request{Headers: check.Headers{}}}
	var out []byte
	for _, m := range msgs {
		reply, err := st.handle(m)
		if err != nil || reply == nil {
			t.Fatalf("%v %v", reply, err)
		}
		if want, got := kind(m), replyKind(reply); want != got {
			t.Fatalf("reply %s to %s", got, want)
		}
		if rb := reply.GetResponseBody(); rb != nil {
			out = append(out, rb.GetResponse().GetBodyMutation().GetBody()...)
		}
	}
	return out
}

// hiddenListed reads the stream as a client does (events, their data
// lines joined, JSON as encoding/json reads it) and reports a listed tool
// the reader may not call (delete_*, without files:write).
func hiddenListed(stream []byte) (string, bool) {
	var found string
	read := func(event []byte) error {
		var data []byte
		for _, line := range bytes.Split(bytes.ReplaceAll(bytes.ReplaceAll(event, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n")), []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				v, _ = bytes.CutPrefix(v, []byte(" "))
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, v...)
			}
		}
		var msg struct {
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"result"`
		}
		if json.Unmarshal(data, &msg) == nil {
			for _, tool := range msg.Result.Tools {
				if strings.HasPrefix(tool.Name, "delete_") || strings.HasPrefix(tool.Name, "drop_") {
					found = tool.Name
				}
			}
		}
		return nil
	}
	r := mcpresponse.NewReassembler(0)
	_ = r.Write(stream, read)
	_, _ = r.Flush(read) // an unterminated event is never dispatched
	return found, found != ""
}

func kind(m *extprocv3.ProcessingRequest) string {
	switch m.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return "request_headers"
	case *extprocv3.ProcessingRequest_RequestBody:
		return "request_body"
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return "response_headers"
	case *extprocv3.ProcessingRequest_ResponseBody:
		return "response_body"
	}
	return "?"
}

func replyKind(m *extprocv3.ProcessingResponse) string {
	switch m.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		return "request_headers"
	case *extprocv3.ProcessingResponse_RequestBody:
		return "request_body"
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		return "response_headers"
	case *extprocv3.ProcessingResponse_ResponseBody:
		return "response_body"
	}
	return "?"
}
