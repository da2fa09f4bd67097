package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParse(f *testing.F) {
	for _, bb := range benchBodies {
		f.Add([]byte(bb.body))
	}
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"x","result":{}}`,
		`{"jsonrpc":"2.0","error":{"code":-32700,"message":"m"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"context_id":"c","task_id":"t"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t","taskId":"u"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"task_id":"t","id":"c"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","name":null,"p\u0061rent":"tasks/u"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"context_id":"c","contextId":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"referenceTaskIds":["a","b\u0000",""]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"reference_task_ids":["\ud83d\ude00"],"referenceTaskIds":null}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"metadata":{"skillId":"refund","SKILL":1}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"metadata":{"skill":"s\u00e9"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{},"configuration":{"push_notification_config":{"url":"u"},"pushNotification":null}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"configuration":{"taskPushNotificationConfig":{}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p\u0061"},"argument":{"name":"a","value":""}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"file:///{path}"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"skills/get","params":{"uri":"skill://a/SKILL.md","name":"b"}}`,
		`{"jsonrpc":"2.0","id":"s","result":{"rootſ":[],"Action":"accept","content":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{"a":{"MODEL":"m"},"b":[],"c":{"result":{}}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/directory/read","params":{"ur\u0069":"skill://a","cursor":"c"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"\ud83d\ude00","NAME":"x","arguments":{"_metadata":{"authorization":"t"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"authorization":"a","traceparent":"t","tracestate":"s","baggage":"b"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t\u00e9","TASKID":null}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///\u00e9",""],"taskIds":null}}}`,
		`[{"jsonrpc":"2.0","method":"ping"}]`,
		`{"jsonrpc":"2.0","id":01}`, `"x"`, `[[[[]]]]`, "{\"a\":\"\xff\"}", `-0.0e-0`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse(body)

		// Whether a body is JSON is encoding/json's verdict, plus UTF-8.
		isJSON := json.Valid(body) && utf8.Valid(body)
		switch {
		case errors.Is(err, ErrTooLarge), errors.Is(err, ErrTooDeep):
			return
		case errors.Is(err, ErrParse) == isJSON:
			t.Fatalf("Parse(%q) = %v, but json.Valid && utf8.Valid = %v", body, err, isJSON)
		case err != nil:
			if !reflect.DeepEqual(r, Request{ID: r.ID}) {
				t.Fatalf("Parse(%q) returned %#v with %v", body, r, err)
			}
			if r.ID != nil {
				// The id of a refusal is one every reader agrees on.
				assertSameID(t, body, r.ID)
			}
			return
		}

		// Accepted: the strict reference decoder accepts it too, and reads
		// the same method, id and names with exact (case-sensitive) keys, as
		// the go-sdk's decoder does.
		assertStrictAgrees(t, body, r)

		// Accepted: the strings are UTF-8, the id is a JSON id, and a
		// request has a method.
		for _, s := range []string{r.Method, r.Name, r.URI, r.ProtocolVersion, r.Traceparent, r.Tracestate,
			r.Baggage, r.MetaAuthorization, r.ContextID, r.TaskID, r.ParamsID, r.ParamsTaskID, r.ParamsContextID, r.Skill, r.Tenant, r.RelatedTaskID} {
			if !utf8.ValidString(s) {
				t.Fatalf("Parse(%q): %q is not UTF-8", body, s)
			}
		}
		if len(r.ReferenceTaskIDs) > MaxReferenceTaskIDs {
			t.Fatalf("Parse(%q) read %d referenced tasks", body, len(r.ReferenceTaskIDs))
		}
		for _, s := range r.ReferenceTaskIDs {
			if !utf8.ValidString(s) {
				t.Fatalf("Parse(%q): referenced task %q is not UTF-8", body, s)
			}
		}
		if r.IsResponse == (r.Method != "") {
			t.Fatalf("Parse(%q) = %#v: a request needs a method, a response none", body, r)
		}
		if r.ID != nil && !validID(r.ID) && string(r.ID) != "null" {
			t.Fatalf("Parse(%q): id %q is not a JSON string, number or null", body, r.ID)
		}

		// And encoding/json, decoding into structs as a Go server would
		// (case-insensitive keys, last duplicate wins), reads the same.
		assertSameAsEncodingJSON(t, body, r)
	})
}

type raw = json.RawMessage

// assertSameID: encoding/json (case-insensitive, last duplicate wins) reads
// id as the raw id, and no other key of the top-level object folds onto it.
func assertSameID(t *testing.T, body, id []byte) {
	var top struct {
		ID raw `json:"id"`
	}
	if err := json.Unmarshal(body, &top); err != nil || !bytes.Equal(top.ID, id) {
		t.Fatalf("Parse(%q) refused with id %s; encoding/json reads %s (%v)", body, id, top.ID, err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		t.Fatalf("Parse(%q) returned an id for a body that is not an object", body)
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.EqualFold([]byte(k.(string)), []byte("id")) {
			n++
		}
		var skip raw
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Fatalf("Parse(%q) returned id %s, but %d keys read as id", body, id, n)
	}
}

// assertStrictAgrees checks an accepted body against the strict reference
// decoder.
func assertStrictAgrees(t *testing.T, body []byte, got Request) {
	top, err := strictDecode(body)
	if err != nil {
		t.Fatalf("Parse accepted %q, which the strict reference refuses", body)
	}
	if foldsOntoMember(top) {
		t.Fatalf("Parse accepted %q, where a key folds onto a member it reads", body)
	}
	if top.get("jsonrpc").text() != "2.0" {
		t.Fatalf("Parse accepted %q without jsonrpc 2.0", body)
	}
	if got.Answers != referenceAnswers(top) {
		t.Fatalf("Parse(%q) answers %03b, the reference reads %03b", body, got.Answers, referenceAnswers(top))
	}
	if got.IsResponse {
		return
	}
	params := top.get("params")
	want := top.get("method").text()
	if got.Method != want {
		t.Fatalf("Parse(%q) method %q, strict reads %q", body, got.Method, want)
	}
	var name string
	switch want {
	case "tools/call", "prompts/get":
		name = params.get("name").text()
	case "resources/read", "resources/subscribe", "resources/unsubscribe", "skills/get", "resources/directory/read":
		name = params.get("uri").text()
	}
	if got.RuleName() != name {
		t.Fatalf("Parse(%q) rule name %q, strict reads %q", body, got.RuleName(), name)
	}
	if _, a2a := ClassifyA2A(want); a2a {
		// The v0.3 gRPC binding's resource names would name a task the
		// service does not read.
		for _, k := range []string{"name", "parent"} {
			if v := params.get(k); v != nil && v.kind != null {
				t.Fatalf("Parse accepted %q, an A2A request with params.%s", body, k)
			}
		}
	}
	for _, s := range []string{got.Method, got.Name, got.URI} {
		for _, c := range []byte(s) {
			if c < 0x20 || c == 0x7f {
				t.Fatalf("Parse(%q) accepted a control character in %q", body, s)
			}
		}
	}
	if id := top.get("id"); id != nil && id.kind != null {
		var fromParse any
		d := json.NewDecoder(bytes.NewReader(got.ID))
		d.UseNumber()
		if err := d.Decode(&fromParse); err != nil {
			t.Fatalf("Parse(%q) id %s does not decode: %v", body, got.ID, err)
		}
		switch v := fromParse.(type) {
		case string:
			if id.kind != str || v != id.str {
				t.Fatalf("Parse(%q) id %s, strict reads %q", body, got.ID, id.str)
			}
		case json.Number:
			if id.kind != num || v != id.num {
				t.Fatalf("Parse(%q) id %s, strict reads %v", body, got.ID, id.num)
			}
		default:
			t.Fatalf("Parse(%q) id %s is neither string nor number", body, got.ID)
		}
	}
}

// jsonText is the string a raw value holds, "" for any other value.
func jsonText(t *testing.T, v raw) string {
	var s string
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	if err := json.Unmarshal(v, &s); err != nil {
		t.Fatalf("decoding %s: %v", v, err)
	}
	return s
}

// decodeObject decodes v into dst when v is a JSON object.
func decodeObject(t *testing.T, v raw, dst any) {
	if len(v) == 0 || v[0] != '{' {
		return
	}
	if err := json.Unmarshal(v, dst); err != nil {
		t.Fatalf("decoding %s: %v", v, err)
	}
}

func assertSameAsEncodingJSON(t *testing.T, body []byte, got Request) {
	var top struct {
		Method string `json:"method"`
		ID     raw    `json:"id"`
		Params raw    `json:"params"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatalf("encoding/json refuses what Parse accepted: %v: %q", err, body)
	}
	var params struct {
		Name            raw `json:"name"`
		URI             raw `json:"uri"`
		ID              raw `json:"id"`
		TaskID          raw `json:"taskId"`
		TaskIDSnake     raw `json:"task_id"`
		ContextID       raw `json:"contextId"`
		ContextIDSnake  raw `json:"context_id"`
		Tenant          raw `json:"tenant"`
		Meta            raw `json:"_meta"`
		Message         raw `json:"message"`
		ProtocolVersion raw `json:"protocolVersion"`
		Capabilities    raw `json:"capabilities"`
		Arguments       raw `json:"arguments"`
		Configuration   raw `json:"configuration"`
		Ref             raw `json:"ref"`
		Notifications   raw `json:"notifications"`
		RequestState    raw `json:"requestState"`
	}
	decodeObject(t, top.Params, &params)
	var configuration map[string]raw // every spelling, matched exactly (Parse refuses the others)
	decodeObject(t, params.Configuration, &configuration)
	var meta map[string]raw // maps, as _meta and the arguments are
	decodeObject(t, params.Meta, &meta)
	var arguments, metadata map[string]raw
	decodeObject(t, params.Arguments, &arguments)
	decodeObject(t, arguments["_metadata"], &metadata)
	var message struct {
		ContextID       raw `json:"contextId"`
		ContextIDSnake  raw `json:"context_id"`
		TaskID          raw `json:"taskId"`
		TaskIDSnake     raw `json:"task_id"`
		References      raw `json:"referenceTaskIds"`
		ReferencesProto raw `json:"reference_task_ids"`
		Metadata        raw `json:"metadata"`
	}
	decodeObject(t, params.Message, &message)
	var messageMetadata map[string]raw
	decodeObject(t, message.Metadata, &messageMetadata)
	type capabilities struct {
		Elicitation raw `json:"elicitation"`
	}
	type elicitation struct {
		URL raw `json:"url"`
	}
	var caps, metaCaps capabilities
	var elicit, metaElicit elicitation
	decodeObject(t, params.Capabilities, &caps)
	decodeObject(t, caps.Elicitation, &elicit)
	decodeObject(t, meta["io.modelcontextprotocol/clientCapabilities"], &metaCaps)
	decodeObject(t, metaCaps.Elicitation, &metaElicit)
	var relatedTask struct {
		TaskID raw `json:"taskId"`
	}
	decodeObject(t, meta["io.modelcontextprotocol/related-task"], &relatedTask)
	isObject := func(v raw) bool { return len(v) > 0 && v[0] == '{' }

	// Answers are read by shape, which encoding/json does not tell:
	// assertStrictAgrees checks them against the strict reference.
	if got.IsResponse {
		if !bytes.Equal(got.ID, top.ID) || !reflect.DeepEqual(got, Request{ID: got.ID, IsResponse: true, Answers: got.Answers}) {
			t.Fatalf("Parse(%q) = %#v; encoding/json reads id %q", body, got, top.ID)
		}
		return
	}
	want := Request{
		Method:            top.Method,
		ID:                got.ID, // compared raw below
		Answers:           got.Answers,
		RequestState:      jsonText(t, params.RequestState),
		Name:              jsonText(t, params.Name),
		URI:               jsonText(t, params.URI),
		ProtocolVersion:   jsonText(t, meta["io.modelcontextprotocol/protocolVersion"]),
		ElicitationURL:    isObject(metaElicit.URL),
		Traceparent:       jsonText(t, meta["traceparent"]),
		Tracestate:        jsonText(t, meta["tracestate"]),
		Baggage:           jsonText(t, meta["baggage"]),
		MetaAuthorization: jsonText(t, meta["authorization"]),
		ContextID:         jsonText(t, message.ContextID) + jsonText(t, message.ContextIDSnake), // never both
		TaskID:            jsonText(t, message.TaskID) + jsonText(t, message.TaskIDSnake),
		ParamsID:          jsonText(t, params.ID),
		ParamsTaskID:      jsonText(t, params.TaskID) + jsonText(t, params.TaskIDSnake), // never both
		ParamsContextID:   jsonText(t, params.ContextID) + jsonText(t, params.ContextIDSnake),
		RelatedTaskID:     jsonText(t, relatedTask.TaskID),
	}
	if _, a2a := ClassifyA2A(top.Method); a2a {
		want.Tenant = jsonText(t, params.Tenant)
	}
	if top.Method == "initialize" {
		if want.ProtocolVersion == "" {
			want.ProtocolVersion = jsonText(t, params.ProtocolVersion)
		}
		want.ElicitationURL = want.ElicitationURL || isObject(elicit.URL)
	}
	if want.MetaAuthorization == "" {
		want.MetaAuthorization = jsonText(t, metadata["authorization"])
	}
	if c, _ := ClassifyA2A(top.Method); c == "SendMessage" || c == "SendStreamingMessage" {
		want.Skill = jsonText(t, messageMetadata["skillId"]) + jsonText(t, messageMetadata["skill"]) // never both
		// As a2a-go's Message decodes them: an array of strings (Parse
		// refuses any other shape), either spelling (never both).
		for _, refs := range []raw{message.References, message.ReferencesProto} {
			var ids []string
			if len(refs) > 0 && refs[0] == '[' {
				if err := json.Unmarshal(refs, &ids); err != nil {
					t.Fatalf("Parse(%q) accepted references encoding/json refuses: %v", body, err)
				}
			}
			want.ReferenceTaskIDs = append(want.ReferenceTaskIDs, ids...)
		}
		for _, k := range []string{"pushNotificationConfig", "push_notification_config", "pushNotification",
			"push_notification", "taskPushNotificationConfig", "task_push_notification_config"} {
			if v, ok := configuration[k]; ok && string(v) != "null" {
				want.PushConfig = true
			}
		}
	}
	if top.Method == "subscriptions/listen" {
		// As the go-sdk's NotificationSubscriptions decodes them: arrays of
		// strings (Parse refuses any other shape).
		var n struct {
			URIs  []string `json:"resourceSubscriptions"`
			Tasks []string `json:"taskIds"`
		}
		if len(params.Notifications) == 0 {
			params.Notifications = raw("null") // absent: it subscribes to nothing
		}
		if err := json.Unmarshal(params.Notifications, &n); err != nil {
			t.Fatalf("Parse(%q) accepted notifications encoding/json refuses: %v", body, err)
		}
		if len(n.URIs) > 0 {
			want.SubscribedURIs = n.URIs
		}
		if len(n.Tasks) > 0 {
			want.SubscribedTaskIDs = n.Tasks
		}
	}
	if top.Method == "completion/complete" {
		var ref struct {
			Name raw `json:"name"`
			URI  raw `json:"uri"`
		}
		decodeObject(t, params.Ref, &ref)
		want.CompletedPrompt, want.CompletedTemplate = jsonText(t, ref.Name), jsonText(t, ref.URI)
	}
	if got.ArgumentsEnd > 0 {
		var args map[string]any
		if err := json.Unmarshal(body[got.ArgumentsStart:got.ArgumentsEnd], &args); err != nil || args == nil {
			t.Fatalf("Parse(%q): arguments span %d:%d is not an object", body, got.ArgumentsStart, got.ArgumentsEnd)
		}
		got.ArgumentsStart, got.ArgumentsEnd = 0, 0
	}
	if !bytes.Equal(got.ID, top.ID) || !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%q)\n  = %#v\nencoding/json reads\n    %#v (id %q)", body, got, want, top.ID)
	}
}

// referenceAnswers is what a message answers of the server's requests
// (Request.Answers), read from the strict reference's tree: a response's
// result by its members, each entry of params.inputResponses by its own,
// an entry that wraps its answer, has none of the telling members or is
// no object standing for any. Members are compared in any case.
func referenceAnswers(top *jvalue) uint8 {
	kinds := func(v *jvalue) (a uint8, wrapped bool) {
		is := func(key string, names ...string) bool {
			for _, n := range names {
				if strings.EqualFold(key, n) { // Unicode folding, as Go's struct decoding: rootſ is roots
					return true
				}
			}
			return false
		}
		for _, m := range v.members {
			switch {
			case is(m.key, "action"):
				a |= AnswersElicitation
			case is(m.key, "roots"):
				a |= AnswersRoots
			case is(m.key, "role", "model"):
				a |= AnswersSampling
			case is(m.key, "method", "result"):
				wrapped = true
			}
		}
		return a, wrapped
	}
	if top.get("method") == nil {
		if res := top.get("result"); res != nil && res.kind == object {
			a, _ := kinds(res)
			return a
		}
		return 0
	}
	ir := top.get("params").get("inputResponses")
	if ir == nil || ir.kind != object {
		return 0
	}
	var all uint8
	for _, m := range ir.members {
		a, wrapped := kinds(&m.value)
		if m.value.kind != object || a == 0 || wrapped {
			a = AnswersAny
		}
		all |= a
	}
	return all
}
