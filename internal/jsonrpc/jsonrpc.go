// Package jsonrpc reads the one JSON-RPC 2.0 message an MCP (streamable HTTP)
// or A2A client POSTs, for authorization decisions: the method, the id, and
// the few params an access rule, the identity headers or the conversation
// lineage need. It validates the whole body as JSON in one pass but decodes
// only those members, skipping everything else structurally. It also decodes
// the MCP Mcp-Name header and builds JSON-RPC error bodies.
//
// Parse is strict where upstream decoders could read the body differently,
// and refuses rather than pick a reading:
//   - The body must be one UTF-8 JSON value (RFC 8259) with nothing after
//     it; a byte order mark, UTF-16 or trailing data is a parse error.
//   - A key that appears twice in any object (after unescaping) makes the
//     request invalid: parsers disagree on which value wins.
//   - In the objects upstreams decode into structs, a key differing from one
//     Parse reads only under Unicode case folding (Method, jſonrpc) is
//     invalid: Go's encoding/json matches it, the go-sdk's decoder does not.
//   - A string Parse reads that escapes an unpaired surrogate (\ud800) is
//     invalid: no UTF-8 string can carry it faithfully. A method, name or
//     URI holding a control character (\u0000) is invalid too.
//   - An A2A id under both its JSON name and its proto field name (taskId
//     and task_id, contextId and context_id, referenceTaskIds and
//     reference_task_ids) is invalid: protobuf JSON parsers accept either,
//     and the refusal says which.
//   - Batches, nesting deeper than MaxDepth, and numeric ids that are not
//     integers of at most 15 digits are refused.
//
// Escapes are decoded exactly as encoding/json decodes them ("tools\/call"
// is tools/call). Null stands for an absent member, except for jsonrpc and
// method. LooksLikeJSON tells which bodies some upstream may read as JSON.
package jsonrpc

import (
	"bytes"
	"errors"
	"log/slog"
	"strconv"
	"strings"
)

// MaxBodySize bounds the body Parse accepts.
const MaxBodySize = 1 << 20

// MaxDepth bounds the nesting of objects and arrays in the body.
const MaxDepth = 128

// Errors returned by Parse. CodeFor maps each to its JSON-RPC error code.
var (
	// ErrParse: the body is not JSON (RFC 8259, UTF-8) => -32700.
	ErrParse = errors.New("jsonrpc: body is not valid JSON")
	// ErrInvalidRequest: JSON, but not one valid JSON-RPC 2.0 message, or a
	// member we read has the wrong type or is ambiguous => -32600.
	ErrInvalidRequest = errors.New("jsonrpc: not a valid JSON-RPC 2.0 request")
	// ErrBatch: a JSON array; MCP 2025-06-18 and later forbid batches => -32600.
	ErrBatch = errors.New("jsonrpc: batch requests are not supported")
	// ErrTooLarge: longer than MaxBodySize => -32600.
	ErrTooLarge = errors.New("jsonrpc: body too large")
	// ErrTooDeep: nested deeper than MaxDepth => -32600.
	ErrTooDeep = errors.New("jsonrpc: body nested too deeply")
)

// Request is what Parse reads from a message. Every string is the decoded
// JSON string, read whatever the method; a member that is absent, null or
// (for methods whose schema does not define it) of another type reads as "".
type Request struct {
	Method string
	// ID is the raw JSON of the id (`1`, `"abc"`, `null`), nil when absent:
	// a notification, or an error response without id. It is echoed
	// verbatim in error bodies. A null id, which JSON-RPC allows and MCP
	// forbids, is accepted as `null`.
	ID []byte
	// IsResponse: the body is a JSON-RPC response (result or error, no
	// method), which clients POST to answer server requests. Only ID and
	// Answers are set.
	IsResponse bool
	// Answers are the server requests (ServerRequests, one bit each) whose
	// answers the message may carry: a response's result, by its shape,
	// or a request's params.inputResponses (MCP 2026-07-28), each entry
	// by its shape. An object is required there.
	Answers uint8
	// RequestState is params.requestState: the state a 2026-07-28 server
	// handed the client with an input_required result, sent back on the
	// retry for the server to resume the round from. A string; any other
	// value makes the request invalid.
	RequestState string

	Name string // params.name (tools/call, prompts/get)
	URI  string // params.uri (of the methods IsURIMethod names)

	// ProtocolVersion is _meta["io.modelcontextprotocol/protocolVersion"]
	// (MCP 2026-07-28), else params.protocolVersion on initialize.
	ProtocolVersion string
	// ElicitationURL: the client declared URL-mode elicitation, in
	// params.capabilities.elicitation.url (initialize) or
	// _meta["io.modelcontextprotocol/clientCapabilities"].elicitation.url.
	// An elicitation object without url means form mode only.
	ElicitationURL bool
	// Trace context carried in params._meta.
	Traceparent, Tracestate, Baggage string
	// MetaAuthorization is params._meta.authorization, else
	// params.arguments._metadata.authorization: a bearer token some agent
	// frameworks put in the tool call. It is a secret: never log it
	// (LogValue and String leave it out).
	MetaAuthorization string
	// MetaAuthorizationsDiffer: params._meta.authorization and
	// params.arguments._metadata.authorization both carry a token, and not
	// the same one. MetaAuthorization is then the first, and an upstream
	// reading the second acts on a token nobody verified.
	MetaAuthorizationsDiffer bool

	// A2A. Every id is also read under its proto field name (context_id,
	// task_id, reference_task_ids), which protobuf JSON parsers accept
	// beside the JSON name; a body naming one in both spellings is invalid.
	ContextID string // params.message.contextId
	TaskID    string // params.message.taskId
	ParamsID  string // params.id (task operations; a push notification configuration's own id in v1.0)
	// Skill is the skill a message send names, in
	// params.message.metadata.skillId or .skill: A2A has no field for it,
	// and clients that pick a skill put it there. A string of at most
	// MaxSkillLen bytes without control characters; both keys, or either
	// of another type, make the request invalid.
	Skill string
	// ParamsTaskID is params.taskId or params.task_id (MCP 2025-11-25
	// tasks/*, A2A push notification configurations).
	ParamsTaskID string
	// ParamsContextID is params.contextId or params.context_id: the
	// context A2A v1.0's ListTasks filters by.
	ParamsContextID string
	// SubscribedURIs and SubscribedTaskIDs are what an MCP
	// subscriptions/listen stream subscribes to (params.notifications):
	// the resources whose updates it is to carry (resourceSubscriptions,
	// which replaces resources/subscribe in 2026-07-28), as sent, and the
	// tasks whose status it is to carry, results included (taskIds, the
	// tasks extension). Arrays of at most MaxSubscribedURIs and
	// MaxReferenceTaskIDs strings, nil for other methods and for none;
	// any other value makes the request invalid.
	SubscribedURIs, SubscribedTaskIDs []string
	// RelatedTaskID is the task an MCP request says it belongs to
	// (params._meta["io.modelcontextprotocol/related-task"].taskId, MCP
	// 2025-11-25), whatever its method: the TypeScript SDK's server hands
	// it to the handler, queues the answer to that task's messages and may
	// set the task's status by it. A string without control characters;
	// any other value makes the request invalid.
	RelatedTaskID string
	// Tenant is params.tenant: A2A v1.0 requests name the tenant the agent
	// serves them for there (over JSON-RPC; HTTP+JSON puts it in the
	// path), and an agent serving several reads it to pick the tenant's
	// tasks (the A2A JavaScript SDK's context.tenant). A string without
	// control characters; any other value makes an A2A request invalid.
	// "" for methods that are not A2A's.
	Tenant string
	// ReferenceTaskIDs are the tasks a message send references
	// (params.message.referenceTaskIds or reference_task_ids), which the
	// agent may load into its context (a2a-go's ReferencedTasksLoader).
	// Read for message sends only: an array of at most
	// MaxReferenceTaskIDs strings, nil when empty; any other value makes
	// the request invalid.
	ReferenceTaskIDs []string
	// PushConfig: a message send's params.configuration carries a push
	// notification configuration (pushNotificationConfig, or a v1.0
	// spelling of it), which registers a webhook the agent will call, as
	// CreateTaskPushNotificationConfig does. Read for message sends only;
	// a configuration or push configuration that is not an object (or
	// null) makes the request invalid.
	PushConfig bool
	// CompletedPrompt is the prompt whose argument a completion/complete
	// completes (params.ref.name, with params.ref.type ref/prompt): its
	// suggestions come from the prompt, so the prompt's rules hold for it.
	// "" for other methods and for a resource template's completion.
	CompletedPrompt string
	// CompletedTemplate is the resource template whose argument a
	// completion/complete completes (params.ref.uri, with params.ref.type
	// ref/resource): its suggestions are parts of the URIs it expands to,
	// so the rules on those hold for it. "" for other methods and for a
	// prompt's completion.
	CompletedTemplate string

	// ArgumentsStart and ArgumentsEnd locate params.arguments in the parsed
	// body (body[ArgumentsStart:ArgumentsEnd]) when it is an object; both
	// are 0 otherwise. Offsets, not a copy: most checks never read them.
	ArgumentsStart, ArgumentsEnd int
}

// MirroredName returns the value the MCP Mcp-Name header mirrors for r
// (params.name for tools/call and prompts/get, params.uri for
// resources/read, params.taskId for tasks/get, tasks/update and
// tasks/cancel) and whether the method is one whose header mirrors it.
func (r Request) MirroredName() (string, bool) {
	switch {
	case TaskMirrored(r.Method):
		return r.ParamsTaskID, true
	case NameMirrored(r.Method):
		return r.RuleName(), true
	}
	return "", false
}

// NameMirrored reports whether MCP mirrors the rule name of method's calls
// in the Mcp-Name header, which servers check against the body. Of the
// other methods with a rule name (HasRuleName), the header says nothing a
// server checks.
func NameMirrored(method string) bool {
	switch method {
	case "tools/call", "prompts/get", "resources/read":
		return true
	}
	return false
}

// TaskMirrored reports whether MCP mirrors the task of method's calls
// (params.taskId) in the Mcp-Name header: 2026-07-28 clients name it there
// for tasks/get, tasks/update and tasks/cancel (SEP-2663's Streamable HTTP
// binding, as the TypeScript SDK's v2 client and server implement it), so
// that gateways can route a task's requests, and servers check it against
// the body as they check a name.
func TaskMirrored(method string) bool {
	switch method {
	case "tasks/get", "tasks/update", "tasks/cancel":
		return true
	}
	return false
}

// HasRuleName reports whether method's calls have a name that rules match
// (RuleName).
func HasRuleName(method string) bool {
	return NameMirrored(method) || IsURIMethod(method)
}

// IsURIMethod reports whether method's calls are named by a resource URI
// (params.uri): resources/read, resources/subscribe and
// resources/unsubscribe, and the skills extension's skills/get (of a
// skill's SKILL.md) and resources/directory/read (of a directory).
func IsURIMethod(method string) bool {
	switch method {
	case "resources/read", "resources/subscribe", "resources/unsubscribe", "skills/get", "resources/directory/read":
		return true
	}
	return false
}

// RuleName returns the name access rules match for r. Which member it is
// is fixed by the method, never "whichever is present": params.name for
// tools/call and prompts/get; params.uri for the methods named by a
// resource URI (IsURIMethod; an extra params.name is ignored); "" for
// every other method, so that a rule listing names never matches them.
func (r Request) RuleName() string {
	switch {
	case IsURIMethod(r.Method):
		return r.URI
	case HasRuleName(r.Method):
		return r.Name
	}
	return ""
}

// LooksLikeJSON reports whether body may be read as JSON by some upstream:
// its first byte other than JSON whitespace, NUL and byte order marks is
// '{' or '[', or starts a comment ("//", "/*"), which lenient JSON5 and
// JSONC parsers skip. The NULs and marks cover UTF-16 and UTF-32 bodies,
// which Python's json.loads reads. Parse refuses all but the first.
func LooksLikeJSON(body []byte) bool {
	for i := 0; i < len(body); i++ {
		switch c := body[i]; c {
		case ' ', '\t', '\n', '\r', 0, 0xef, 0xbb, 0xbf, 0xfe, 0xff:
		case '{', '[':
			return true
		case '/':
			return i+1 < len(body) && (body[i+1] == '*' || body[i+1] == '/')
		default:
			return false
		}
	}
	return false
}

// LogValue describes r for slog without the secret it may carry.
func (r Request) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 8)
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	add("method", r.Method)
	add("id", string(r.ID))
	if r.IsResponse {
		attrs = append(attrs, slog.Bool("response", true))
	}
	add("name", r.Name)
	add("uri", r.URI)
	add("protocol_version", r.ProtocolVersion)
	add("context_id", r.ContextID)
	add("task_id", r.TaskID)
	add("params_id", r.ParamsID)
	add("skill", r.Skill)
	add("params_task_id", r.ParamsTaskID)
	add("params_context_id", r.ParamsContextID)
	add("tenant", r.Tenant)
	add("related_task_id", r.RelatedTaskID)
	if len(r.ReferenceTaskIDs) > 0 {
		attrs = append(attrs, slog.Int("reference_task_ids", len(r.ReferenceTaskIDs)))
	}
	if len(r.SubscribedURIs) > 0 {
		attrs = append(attrs, slog.Int("subscribed_uris", len(r.SubscribedURIs)))
	}
	if len(r.SubscribedTaskIDs) > 0 {
		attrs = append(attrs, slog.Int("subscribed_task_ids", len(r.SubscribedTaskIDs)))
	}
	add("traceparent", r.Traceparent)
	if r.MetaAuthorization != "" {
		attrs = append(attrs, slog.Bool("meta_authorization", true))
	}
	return slog.GroupValue(attrs...)
}

// String describes r without the secret it may carry.
func (r Request) String() string { return r.LogValue().String() }

// Parse reads one JSON-RPC message. Errors come in this order: ErrTooLarge
// before anything is read; ErrParse or ErrTooDeep, whichever the scan of the
// whole body meets first (so a body that is not JSON is ErrParse, whatever
// else is wrong with it); then ErrBatch for an array; then
// ErrInvalidRequest. A JSON-RPC response is valid and comes back with
// IsResponse set. With ErrInvalidRequest the Request holds only the id, and
// only when every reader reads the same one (it appears once, no other key
// folds onto it), so that the refusal can echo it.
//
// The returned Request does not alias body. Parse is safe for concurrent use.
func Parse(body []byte) (Request, error) {
	if len(body) > MaxBodySize {
		return Request{}, ErrTooLarge
	}
	var s scanner // not a composite literal: see WalkStrict
	s.data = body
	s.ws()
	first := s.peek()
	var err error
	if first == '{' {
		err = s.object(topNode, 1)
	} else {
		_, err = s.value(0)
	}
	if err != nil {
		return Request{}, err
	}
	s.ws()
	if s.pos != len(body) {
		return Request{}, ErrParse
	}
	switch first {
	case '{':
		// Filled in place: a Request is large, and copies of it add up.
		var r Request
		if err := s.request(&r); err != nil {
			return Request{ID: r.ID}, err
		}
		return r, nil
	case '[':
		return Request{}, ErrBatch
	default:
		return Request{}, ErrInvalidRequest
	}
}

// request checks the recorded members of a syntactically valid object and
// decodes those the method needs into r, which is zero. With an error, r's
// ID is the id to echo in the refusal, nil when some reader may read
// another (then the body is refused as ambiguous), and the rest of r is to
// be dropped.
func (s *scanner) request(r *Request) error {
	sp := &s.spans
	switch sp[fID].kind {
	case absent, null, str, num:
	default:
		return ErrInvalidRequest
	}
	id := s.raw(fID)
	if sp[fID].kind == num && !integerID(id) {
		return ErrInvalidRequest
	}
	if id != nil {
		// Exactly its length: an append to nil would round it up to a
		// size class (8 bytes for a one-digit id).
		id = append(make([]byte, 0, len(id)), id...)
	}
	// Refusals echo the id when every upstream reads the same one; an
	// accepted body has but one.
	if !s.unsure[fID] {
		r.ID = id
	}
	if s.ambiguous || !s.isString(fJSONRPC, "2.0") {
		return ErrInvalidRequest
	}
	if err := s.spelledTwice(); err != nil {
		return err
	}
	hasResult, hasError := sp[fResult].kind != absent, sp[fError].kind != absent
	if sp[fMethod].kind == absent {
		// A response: exactly one of result and error; only an error
		// response may lack the id (it answers a message whose id could
		// not be read).
		if hasResult == hasError || hasError && sp[fError].kind != object || hasResult && id == nil {
			return ErrInvalidRequest
		}
		r.IsResponse = true
		r.Answers = answersOfResult(s.raw(fResult))
		return nil
	}
	if sp[fMethod].kind != str || hasResult || hasError {
		return ErrInvalidRequest
	}
	switch sp[fParams].kind {
	case absent, null, object, array:
	default:
		return ErrInvalidRequest
	}

	if !s.decode(r) || r.Method == "" || !s.typesValid(r.Method) {
		return ErrInvalidRequest
	}
	if r.Method != "completion/complete" {
		r.CompletedPrompt, r.CompletedTemplate = "", "" // params.ref means nothing to other methods
	}
	// The members below mean something to A2A methods only (a tool's or
	// prompt's name is MCP's): the method is classified only when one is
	// there, which keeps the lookup off the common path.
	resourceNamed := s.present(fParent) || s.present(fName) && !NameMirrored(r.Method)
	if r.Tenant != "" || resourceNamed {
		if _, a2a := ClassifyA2A(r.Method); !a2a {
			r.Tenant = "" // nor params.tenant to methods that are not A2A's
		} else if resourceNamed {
			// The A2A v0.3 gRPC binding names a task in resource names
			// (name: "tasks/T", parent: "tasks/T"). No JSON-RPC method
			// has them, but an agent decoding params into that binding's
			// messages (protobuf JSON, unknown fields discarded) would act
			// on the task they name, not on the params.id the service binds.
			return errResourceName
		}
	}
	if hasControl(r.Method) || hasControl(r.Name) || hasControl(r.URI) ||
		hasControl(r.CompletedPrompt) || hasControl(r.CompletedTemplate) || hasControl(r.Tenant) ||
		hasControl(r.RelatedTaskID) {
		return ErrInvalidRequest
	}
	var ok bool
	var err error
	if r.ProtocolVersion == "" && r.Method == "initialize" {
		if r.ProtocolVersion, ok = s.text(fProtocolVersion); !ok {
			return ErrInvalidRequest
		}
	}
	r.ElicitationURL = s.spans[fMetaElicitationURL].kind == object ||
		r.Method == "initialize" && s.spans[fCapsElicitationURL].kind == object
	if r.MetaAuthorization, ok = s.text(fMetaAuthorization); !ok {
		return ErrInvalidRequest
	}
	if r.Skill, ok = s.skill(r.Method); !ok {
		return ErrInvalidRequest
	}
	if r.ReferenceTaskIDs, err = s.referenceTaskIDs(r.Method); err != nil {
		return err
	}
	if r.Method == "subscriptions/listen" {
		if r.SubscribedURIs, err = s.strings(fResourceSubscriptions, MaxSubscribedURIs, errSubscribedURIs); err != nil {
			return err
		}
		if r.SubscribedTaskIDs, err = s.strings(fSubscribedTaskIDs, MaxReferenceTaskIDs, errSubscribedTasks); err != nil {
			return err
		}
	}
	r.PushConfig = s.pushConfig(r.Method)
	if s.spans[fInputResponses].kind == object {
		r.Answers = answersOfInputResponses(s.raw(fInputResponses))
	}
	if r.RequestState, ok = s.text(fRequestState); !ok {
		return ErrInvalidRequest
	}
	if sp := s.spans[fArguments]; sp.kind == object {
		r.ArgumentsStart, r.ArgumentsEnd = int(sp.start), int(sp.end)
	}
	if s.spans[fMetadata].kind == object && s.spans[fMetadataAuthorization].kind != absent {
		// Tool arguments are the tool's own: a _metadata member of another
		// shape is not ours to refuse.
		metadata, ok := s.text(fMetadataAuthorization)
		if !ok {
			return ErrInvalidRequest
		}
		if r.MetaAuthorization == "" {
			r.MetaAuthorization = metadata
		} else if metadata != "" && metadata != r.MetaAuthorization {
			r.MetaAuthorizationsDiffer = true
		}
	}
	return nil
}

// maxIDDigits bounds a numeric id: every integer of up to 15 digits is exact
// in a float64, so JavaScript, Python and the Go SDKs all read the same id.
const maxIDDigits = 15

// integerID reports whether a numeric id is an integer of at most
// maxIDDigits digits. JSON-RPC says ids SHOULD NOT have fractions; the
// go-sdk truncates 1.5 to 1 and Python's SDK refuses it, so we refuse
// fractions, exponents and longer numbers rather than echo an id the
// upstream reads differently.
func integerID(id []byte) bool {
	digits := bytes.TrimPrefix(id, []byte("-"))
	if len(digits) == 0 || len(digits) > maxIDDigits {
		return false
	}
	for _, c := range digits {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// hasControl reports whether s holds a C0 control character or DEL
// (\u0000 and the like, escaped in JSON). No method, tool, prompt or
// resource name has one, and upstreams written in C-like languages may cut
// a name at NUL: such a call is refused rather than matched.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// decoded lists the members decode copies into the one string it
// allocates; setString says where each goes in a Request.
var decoded = [...]field{
	fMethod, fName, fURI, fMetaProtocolVersion, fTraceparent, fTracestate, fBaggage,
	fContextID, fTaskID, fContextIDSnake, fTaskIDSnake, fParamsID, fParamsTaskID,
	fParamsTaskIDSnake, fParamsContextID, fParamsContextIDSnake, fParamsTenant, fRefName, fRefURI,
	fMetaRelatedTaskID,
}

func (r *Request) setString(f field, v string) {
	switch f {
	case fMethod:
		r.Method = v
	case fName:
		r.Name = v
	case fURI:
		r.URI = v
	case fMetaProtocolVersion:
		r.ProtocolVersion = v
	case fTraceparent:
		r.Traceparent = v
	case fTracestate:
		r.Tracestate = v
	case fBaggage:
		r.Baggage = v
	case fContextID, fContextIDSnake: // never both: see typesValid
		r.ContextID = v
	case fTaskID, fTaskIDSnake:
		r.TaskID = v
	case fParamsID:
		r.ParamsID = v
	case fParamsTaskID, fParamsTaskIDSnake:
		r.ParamsTaskID = v
	case fParamsContextID, fParamsContextIDSnake:
		r.ParamsContextID = v
	case fParamsTenant:
		r.Tenant = v
	case fMetaRelatedTaskID:
		r.RelatedTaskID = v
	case fRefName:
		r.CompletedPrompt = v
	case fRefURI:
		r.CompletedTemplate = v
	}
}

// decode unescapes the string members listed in decoded into r. To keep
// the hot path to one allocation, they share one backing array, and a
// known method or protocol version is not copied at all. (Secrets are decoded apart, so
// that keeping a name does not keep a token alive.) ok is false when a
// string escapes an unpaired surrogate.
func (s *scanner) decode(r *Request) (ok bool) {
	// copied lists, by index in decoded, the members to copy: most bodies
	// have one or two.
	var copied [len(decoded)]uint8
	n, size := 0, 0
	for i, f := range decoded {
		sp := s.spans[f]
		if sp.kind != str {
			continue
		}
		if (f == fMethod || f == fMetaProtocolVersion) && !sp.escaped {
			if known, found := interned[string(s.content(f))]; found {
				r.setString(f, known)
				continue
			}
		}
		copied[n] = uint8(i)
		n++
		size += int(sp.end - sp.start)
	}
	if n == 0 {
		return true
	}
	var stack [512]byte
	buf := stack[:0]
	if size > len(stack) {
		buf = make([]byte, 0, size)
	}
	var ends [len(decoded)]int // ends[j]: where the copy of copied[j] ends in buf
	ok = true
	for j, i := range copied[:n] {
		var good bool
		buf, good = unescape(buf, s.content(decoded[i]))
		ok = ok && good
		ends[j] = len(buf)
	}
	if !ok {
		return false
	}
	all := string(buf)
	start := 0
	for j, i := range copied[:n] {
		r.setString(decoded[i], all[start:ends[j]])
		start = ends[j]
	}
	return true
}

// typesValid checks the types of the members the method's schema defines.
// Null always stands for absent.
func (s *scanner) typesValid(method string) bool {
	// MCP reserves _meta and the keys read from it, whatever the method.
	if !s.is(fMeta, object) || !s.is(fMetaProtocolVersion, str) ||
		!s.is(fMetaClientCapabilities, object) || !s.is(fMetaElicitation, object) ||
		!s.is(fMetaElicitationURL, object) || !s.is(fTraceparent, str) ||
		!s.is(fTracestate, str) || !s.is(fBaggage, str) || !s.is(fMetaAuthorization, str) ||
		!s.is(fMetaRelatedTask, object) || !s.is(fMetaRelatedTaskID, str) ||
		!s.is(fInputResponses, object) || !s.is(fRequestState, str) {
		return false
	}
	// The methods rules name by a member take their params by name only.
	switch {
	case method == "tools/call" || method == "prompts/get":
		return s.is(fParams, object) && s.is(fName, str) && s.is(fArguments, object)
	case IsURIMethod(method):
		return s.is(fParams, object) && s.is(fURI, str)
	case method == "completion/complete":
		// The reference must be one a server reads one way: a prompt by
		// name or a resource template by URI, never both.
		return s.is(fParams, object) && s.spans[fRef].kind == object &&
			s.spans[fRefType].kind == str && s.is(fRefName, str) && s.is(fRefURI, str) &&
			!(s.present(fRefName) && s.present(fRefURI)) &&
			(s.isString(fRefType, "ref/prompt") && s.present(fRefName) ||
				s.isString(fRefType, "ref/resource") && s.present(fRefURI))
	case method == "subscriptions/listen":
		// Absent, they subscribe to nothing.
		return s.is(fParams, object) && s.is(fNotifications, object)
	case method == "initialize":
		return s.is(fProtocolVersion, str) && s.is(fCapabilities, object) &&
			s.is(fCapsElicitation, object) && s.is(fCapsElicitationURL, object)
	}
	canonical, isA2A := ClassifyA2A(method)
	if isA2A || strings.HasPrefix(method, "tasks/") {
		if !s.is(fParamsID, str) || !s.is(fParamsTaskID, str) || !s.is(fParamsTaskIDSnake, str) ||
			!s.is(fParamsContextID, str) || !s.is(fParamsContextIDSnake, str) {
			return false
		}
	}
	if isA2A && !s.is(fParamsTenant, str) {
		// An agent that reads any truthy value as the tenant (the A2A
		// JavaScript SDK) would serve one the rules did not see.
		return false
	}
	if canonical == "SendMessage" || canonical == "SendStreamingMessage" {
		// The message is required in every A2A version; a send without it
		// may carry it under a name we do not read (the v0.3 gRPC proto's
		// request, which protobuf JSON parsers accept beside message).
		return s.spans[fMessage].kind == object && s.is(fContextID, str) && s.is(fContextIDSnake, str) &&
			s.is(fTaskID, str) && s.is(fTaskIDSnake, str) &&
			// Two keys naming the skill would let the agent and the rules
			// read different ones.
			s.is(fMessageMetadata, object) && s.is(fSkillID, str) && s.is(fSkill, str) &&
			!(s.present(fSkillID) && s.present(fSkill)) &&
			s.is(fConfiguration, object) && s.pushConfigsAre(object)
	}
	return true
}

// pushConfigs are the spellings of a message send's push notification
// configuration (configurationNode).
var pushConfigs = [...]field{fPushConfig, fPushConfigSnake, fPushNotification, fPushNotificationSnake, fTaskPushConfig, fTaskPushConfigSnake}

// pushConfigsAre reports whether every spelling of the push notification
// configuration that is present is of kind k.
func (s *scanner) pushConfigsAre(k kind) bool {
	for _, f := range pushConfigs {
		if !s.is(f, k) {
			return false
		}
	}
	return true
}

// pushConfig reports whether a message send carries a push notification
// configuration, in any spelling.
func (s *scanner) pushConfig(method string) bool {
	if canonical, _ := ClassifyA2A(method); canonical != "SendMessage" && canonical != "SendStreamingMessage" {
		return false
	}
	for _, f := range pushConfigs {
		if s.present(f) {
			return true
		}
	}
	return false
}

// invalid is ErrInvalidRequest with the reason the refusal gives.
type invalid string

func (e invalid) Error() string        { return "jsonrpc: " + string(e) }
func (e invalid) Is(target error) bool { return target == ErrInvalidRequest }

// twice pairs the two spellings of each A2A field Parse reads (the JSON
// name and the proto field name) with the refusal of a body naming both:
// protobuf JSON parsers take either, so two decoders could read different
// ids.
var twice = [...]struct {
	json, proto field
	err         invalid
}{
	{fContextID, fContextIDSnake, "params.message names its context twice, as contextId and context_id"},
	{fTaskID, fTaskIDSnake, "params.message names its task twice, as taskId and task_id"},
	{fReferenceTaskIDs, fReferenceTaskIDsSnake, "params.message names its referenced tasks twice, as referenceTaskIds and reference_task_ids"},
	{fParamsTaskID, fParamsTaskIDSnake, "params names the task twice, as taskId and task_id"},
	{fParamsContextID, fParamsContextIDSnake, "params names the context twice, as contextId and context_id"},
}

// spelledTwice refuses a body naming an A2A field in both spellings,
// whatever the method.
func (s *scanner) spelledTwice() error {
	for _, t := range twice {
		if s.present(t.json) && s.present(t.proto) {
			return t.err
		}
	}
	return nil
}

// MaxReferenceTaskIDs bounds the tasks a message may reference, and a
// subscription may follow: each is looked up in the task bindings.
const MaxReferenceTaskIDs = 64

// MaxSubscribedURIs bounds the resources a subscriptions/listen stream may
// subscribe to: each is decided as a resources/subscribe of it, which may
// ask a decision point (the go-sdk's client subscribes to one per stream).
const MaxSubscribedURIs = 64

var (
	errReferences = listErrors{
		typ:     invalid("params.message.referenceTaskIds must be an array of strings"),
		tooMany: invalid("params.message references more than " + strconv.Itoa(MaxReferenceTaskIDs) + " tasks"),
	}
	errSubscribedURIs = listErrors{
		typ:     invalid("params.notifications.resourceSubscriptions must be an array of strings"),
		tooMany: invalid("params.notifications subscribes to more than " + strconv.Itoa(MaxSubscribedURIs) + " resources"),
	}
	errSubscribedTasks = listErrors{
		typ:     invalid("params.notifications.taskIds must be an array of strings"),
		tooMany: invalid("params.notifications subscribes to more than " + strconv.Itoa(MaxReferenceTaskIDs) + " tasks"),
	}
	errListEncoding = invalid("a listed id or URI escapes an unpaired surrogate")
	errResourceName = invalid("an A2A request names no task or resource in params.name or params.parent (the v0.3 gRPC binding's resource names): name the task in params.id")
)

// listErrors are the refusals of one array of strings Parse reads.
type listErrors struct{ typ, tooMany error }

// referenceTaskIDs reads the tasks a message send references
// (Request.ReferenceTaskIDs): nil for other methods, and for none.
func (s *scanner) referenceTaskIDs(method string) ([]string, error) {
	f := fReferenceTaskIDs
	if !s.present(f) {
		f = fReferenceTaskIDsSnake // spelledTwice refused both
	}
	if canonical, _ := ClassifyA2A(method); canonical != "SendMessage" && canonical != "SendStreamingMessage" {
		return nil, nil
	}
	return s.strings(f, MaxReferenceTaskIDs, errReferences)
}

// strings reads the array of at most max strings at f: nil when absent,
// null or empty.
func (s *scanner) strings(f field, max int, errs listErrors) ([]string, error) {
	sp := s.spans[f]
	switch sp.kind {
	case absent, null:
		return nil, nil
	case array:
	default:
		return nil, errs.typ
	}
	// The scan validated the array: its elements are values separated by
	// commas, and only strings are taken.
	var out []string
	s.pos = int(sp.start) + 1
	for {
		s.ws()
		switch s.peek() {
		case ']':
			return out, nil
		case ',':
			s.pos++
			continue
		case '"':
		default:
			return nil, errs.typ
		}
		if len(out) == max {
			return nil, errs.tooMany
		}
		start := s.pos
		if err := s.str(); err != nil {
			return nil, err
		}
		c := s.data[start+1 : s.pos-1]
		if !s.escaped {
			out = append(out, string(c))
			continue
		}
		b, ok := unescape(make([]byte, 0, len(c)), c)
		if !ok {
			return nil, errListEncoding
		}
		out = append(out, string(b))
	}
}

// MaxSkillLen bounds the skill name a message may carry.
const MaxSkillLen = 256

// skill reads the skill an A2A message send names (Request.Skill; types
// were checked by typesValid). ok is false for a name over MaxSkillLen,
// with control characters, or escaping an unpaired surrogate.
func (s *scanner) skill(method string) (string, bool) {
	if s.spans[fSkillID].kind != str && s.spans[fSkill].kind != str {
		// Nothing to read, whatever the method (typesValid refused a skill
		// of another type): most calls are not message sends.
		return "", true
	}
	if canonical, _ := ClassifyA2A(method); canonical != "SendMessage" && canonical != "SendStreamingMessage" {
		return "", true
	}
	f := fSkillID
	if !s.present(f) {
		f = fSkill
	}
	sp := s.spans[f]
	if sp.kind != str {
		return "", true // absent or null
	}
	if sp.end-sp.start-2 > 6*MaxSkillLen {
		// Too long whatever its escapes (one decoded byte takes at most
		// six): refused before decoding.
		return "", false
	}
	v, ok := s.text(f)
	if !ok || len(v) > MaxSkillLen || hasControl(v) {
		return "", false
	}
	return v, true
}

// is reports whether f is absent, null or of kind k.
func (s *scanner) is(f field, k kind) bool {
	switch s.spans[f].kind {
	case absent, null, k:
		return true
	}
	return false
}

// present reports whether f holds a value other than null.
func (s *scanner) present(f field) bool {
	k := s.spans[f].kind
	return k != absent && k != null
}

// raw returns the raw JSON of f, nil when absent.
func (s *scanner) raw(f field) []byte {
	sp := s.spans[f]
	if sp.kind == absent {
		return nil
	}
	return s.data[sp.start:sp.end]
}

// content returns the bytes between the quotes of string f, nil otherwise.
func (s *scanner) content(f field) []byte {
	sp := s.spans[f]
	if sp.kind != str {
		return nil
	}
	return s.data[sp.start+1 : sp.end-1]
}

// isString reports whether f is the string want.
func (s *scanner) isString(f field, want string) bool {
	c := s.content(f)
	if c == nil {
		return false
	}
	if !s.spans[f].escaped {
		return string(c) == want
	}
	var buf [16]byte
	got, ok := unescape(buf[:0], c)
	return ok && string(got) == want
}

// text decodes string f into its own allocation ("" when f is not a
// string). ok is false when it escapes an unpaired surrogate.
func (s *scanner) text(f field) (string, bool) {
	c := s.content(f)
	if len(c) == 0 {
		return "", true
	}
	if !s.spans[f].escaped {
		if known, found := interned[string(c)]; found {
			return known, true
		}
		return string(c), true
	}
	b, ok := unescape(make([]byte, 0, len(c)), c)
	if !ok {
		return "", false
	}
	return string(b), true
}
