package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanner validates a whole JSON document in one pass (RFC 8259, the
// rules of encoding/json plus a UTF-8 requirement) and, on the way, records
// where the few members an authorization decision needs sit in the body. It
// never builds maps or decodes values it does not need: unknown members are
// skipped structurally, and the recorded strings are unescaped afterwards,
// once the method tells which of them matter.

// kind is the JSON type of a recorded value.
type kind uint8

const (
	absent kind = iota // member not present
	null
	str
	num
	boolean
	object
	array
)

// field names one recorded member, by its path from the top-level object.
type field uint8

const (
	fJSONRPC field = iota
	fMethod
	fID
	fParams
	fResult
	fError

	// params.*
	fName
	fURI
	fMeta
	fProtocolVersion // params.protocolVersion (initialize)
	fCapabilities    // params.capabilities (initialize)
	fCapsElicitation
	fCapsElicitationURL
	fArguments
	fMetadata              // params.arguments._metadata
	fMetadataAuthorization // params.arguments._metadata.authorization
	fMessage               // params.message (A2A)
	fContextID
	fContextIDSnake // context_id: the proto field name, which protobuf JSON parsers also accept
	fTaskID
	fTaskIDSnake
	fReferenceTaskIDs      // params.message.referenceTaskIds (A2A)
	fReferenceTaskIDsSnake // params.message.reference_task_ids
	fMessageMetadata       // params.message.metadata (A2A)
	fSkillID               // params.message.metadata.skillId
	fSkill                 // params.message.metadata.skill
	fParamsID              // params.id (A2A task operations)
	fParamsTaskID          // params.taskId (MCP tasks, A2A push notification configs)
	fParamsTaskIDSnake     // params.task_id (A2A v1.0's proto field name)
	fParamsContextID       // params.contextId (A2A ListTasks' filter)
	fParamsContextIDSnake  // params.context_id
	fParamsTenant          // params.tenant (A2A v1.0: whose tasks and contexts the call acts on)
	fParent                // params.parent (the A2A v0.3 gRPC binding's task, which no JSON-RPC method has)
	fConfiguration         // params.configuration (A2A message sends)
	fRef                   // params.ref (MCP completion/complete)
	fRefType               // params.ref.type: ref/prompt or ref/resource
	fRefName               // params.ref.name: the prompt
	fRefURI                // params.ref.uri: the resource template
	fNotifications         // params.notifications (MCP subscriptions/listen)
	fResourceSubscriptions // params.notifications.resourceSubscriptions
	fSubscribedTaskIDs     // params.notifications.taskIds (the tasks extension)
	fInputResponses        // params.inputResponses (MCP 2026-07-28 multi round-trip requests)
	fRequestState          // params.requestState (the same)
	// params.configuration's push notification configuration, in every
	// spelling an A2A version or SDK gives it (configurationNode).
	fPushConfig
	fPushConfigSnake
	fPushNotification
	fPushNotificationSnake
	fTaskPushConfig
	fTaskPushConfigSnake

	// params._meta.*
	fMetaProtocolVersion
	fMetaClientCapabilities
	fMetaElicitation
	fMetaElicitationURL
	fTraceparent
	fTracestate
	fBaggage
	fMetaAuthorization
	fMetaRelatedTask   // params._meta["io.modelcontextprotocol/related-task"]
	fMetaRelatedTaskID // its taskId

	numFields
)

// member is one key of an object the scanner looks into.
type member struct {
	key   string
	field field
	child *node // looked into when the value is an object
}

// node describes an object the scanner looks into.
type node struct {
	members []member
	// fold: the object is decoded into a struct by some upstream (Go's
	// encoding/json matches struct keys case-insensitively, last one wins),
	// so a key that differs from one of ours only in case is ambiguous.
	// Map-like objects (_meta, tool arguments) are matched exactly.
	fold bool
}

var (
	elicitationNode = &node{fold: true, members: []member{
		{key: "url", field: fCapsElicitationURL},
	}}
	capabilitiesNode = &node{fold: true, members: []member{
		{key: "elicitation", field: fCapsElicitation, child: elicitationNode},
	}}
	metaElicitationNode = &node{fold: true, members: []member{
		{key: "url", field: fMetaElicitationURL},
	}}
	metaCapabilitiesNode = &node{fold: true, members: []member{
		{key: "elicitation", field: fMetaElicitation, child: metaElicitationNode},
	}}
	// The task a request belongs to (MCP 2025-11-25), an object SDKs
	// decode into a struct.
	relatedTaskNode = &node{fold: true, members: []member{
		{key: "taskId", field: fMetaRelatedTaskID},
	}}
	metaNode = &node{members: []member{
		{key: "io.modelcontextprotocol/protocolVersion", field: fMetaProtocolVersion},
		{key: "io.modelcontextprotocol/clientCapabilities", field: fMetaClientCapabilities, child: metaCapabilitiesNode},
		{key: "traceparent", field: fTraceparent},
		{key: "tracestate", field: fTracestate},
		{key: "baggage", field: fBaggage},
		{key: "authorization", field: fMetaAuthorization},
		{key: "io.modelcontextprotocol/related-task", field: fMetaRelatedTask, child: relatedTaskNode},
	}}
	metadataNode = &node{members: []member{
		{key: "authorization", field: fMetadataAuthorization},
	}}
	argumentsNode = &node{members: []member{
		{key: "_metadata", field: fMetadata, child: metadataNode},
	}}
	// A2A message metadata is a map: its keys are matched exactly.
	messageMetadataNode = &node{members: []member{
		{key: "skillId", field: fSkillID},
		{key: "skill", field: fSkill},
	}}
	messageNode = &node{fold: true, members: []member{
		{key: "metadata", field: fMessageMetadata, child: messageMetadataNode},
		{key: "contextId", field: fContextID},
		{key: "context_id", field: fContextIDSnake},
		{key: "taskId", field: fTaskID},
		{key: "task_id", field: fTaskIDSnake},
		{key: "referenceTaskIds", field: fReferenceTaskIDs},
		{key: "reference_task_ids", field: fReferenceTaskIDsSnake},
	}}
	// A message send's configuration: a push notification configuration
	// in it registers a webhook, as CreateTaskPushNotificationConfig does.
	// v0.3 names it pushNotificationConfig; v1.0 drafts and SDKs
	// pushNotification and taskPushNotificationConfig, and protobuf JSON
	// parsers take each one's proto field name too.
	configurationNode = &node{fold: true, members: []member{
		{key: "pushNotificationConfig", field: fPushConfig},
		{key: "push_notification_config", field: fPushConfigSnake},
		{key: "pushNotification", field: fPushNotification},
		{key: "push_notification", field: fPushNotificationSnake},
		{key: "taskPushNotificationConfig", field: fTaskPushConfig},
		{key: "task_push_notification_config", field: fTaskPushConfigSnake},
	}}
	// What a completion completes an argument of: a prompt by name, or a
	// resource template by URI.
	refNode = &node{fold: true, members: []member{
		{key: "type", field: fRefType},
		{key: "name", field: fRefName},
		{key: "uri", field: fRefURI},
	}}
	// What a subscriptions/listen stream is to carry (MCP 2026-07-28): the
	// resources whose updates it subscribes to, which replaces
	// resources/subscribe, and the tasks extension's tasks.
	notificationsNode = &node{fold: true, members: []member{
		{key: "resourceSubscriptions", field: fResourceSubscriptions},
		{key: "taskIds", field: fSubscribedTaskIDs},
	}}
	paramsNode = &node{fold: true, members: []member{
		{key: "name", field: fName},
		{key: "uri", field: fURI},
		{key: "_meta", field: fMeta, child: metaNode},
		{key: "protocolVersion", field: fProtocolVersion},
		{key: "capabilities", field: fCapabilities, child: capabilitiesNode},
		{key: "arguments", field: fArguments, child: argumentsNode},
		{key: "message", field: fMessage, child: messageNode},
		{key: "id", field: fParamsID},
		{key: "taskId", field: fParamsTaskID},
		{key: "task_id", field: fParamsTaskIDSnake},
		{key: "contextId", field: fParamsContextID},
		{key: "context_id", field: fParamsContextIDSnake},
		{key: "tenant", field: fParamsTenant},
		{key: "parent", field: fParent},
		{key: "configuration", field: fConfiguration, child: configurationNode},
		{key: "ref", field: fRef, child: refNode},
		{key: "notifications", field: fNotifications, child: notificationsNode},
		{key: "inputResponses", field: fInputResponses},
		{key: "requestState", field: fRequestState},
	}}
	topNode = &node{fold: true, members: []member{
		{key: "jsonrpc", field: fJSONRPC},
		{key: "method", field: fMethod},
		{key: "id", field: fID},
		{key: "params", field: fParams, child: paramsNode},
		{key: "result", field: fResult},
		{key: "error", field: fError},
	}}
)

// maxKeyLen bounds the unescaped key compared with ours: the longest is 42
// bytes, and case folding can at most triple a key's length (K is 3 bytes).
const maxKeyLen = 128

// span is where a recorded value sits: data[start:end] is its raw JSON,
// quotes included for a string.
type span struct {
	start, end int32
	kind       kind
	escaped    bool // a string holding backslash escapes
}

type scanner struct {
	data    []byte
	pos     int
	escaped bool // set by str: the last string scanned held an escape
	// ambiguous: a recorded member appeared twice, or a key differed from
	// one of ours only in case. Upstream decoders disagree on such input
	// (first wins, last wins, case-insensitive), so it is refused.
	ambiguous bool
	// unsure: the member may be read from another key by some upstream
	// (it appeared twice, or a key differing only in case names it).
	unsure [numFields]bool
	spans  [numFields]span
	// visit, when set, is told of every member and element held by a
	// container at most visitDepth deep, once its value is scanned
	// (WalkStrict).
	visit      Visit
	visitDepth int
}

// plain marks the bytes that stand for themselves inside a JSON string and
// need no further check: printable ASCII except '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *scanner) ws() {
	// Most documents are compact: one comparison decides.
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one value at s.pos (no leading whitespace) nested at depth.
func (s *scanner) value(depth int) (kind, error) {
	switch c := s.peek(); {
	case c == '{':
		return object, s.object(nil, depth+1)
	case c == '[':
		return array, s.array(depth + 1)
	case c == '"':
		return str, s.str()
	case c == 't':
		return boolean, s.literal("true")
	case c == 'f':
		return boolean, s.literal("false")
	case c == 'n':
		return null, s.literal("null")
	case c == '-' || isDigit(c):
		return num, s.number()
	default:
		return absent, ErrParse
	}
}

// object scans an object at s.pos. With a node, it records the members the
// node names; without one, it only validates. Either way a key that appears
// twice in the object (after unescaping) makes the body ambiguous: parsers
// disagree on which value wins, and the object may be one an upstream reads
// (tool arguments) even when we do not.
func (s *scanner) object(n *node, depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	s.pos++ // '{'
	s.ws()
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	var seen keySet
	for {
		if s.peek() != '"' {
			return ErrParse
		}
		keyStart := s.pos + 1
		if err := s.str(); err != nil {
			return err
		}
		keyEnd := s.pos - 1
		key := s.data[keyStart:keyEnd]
		if s.escaped {
			key = unescapeKey(key)
		}
		if !seen.add(s.data, keyStart, key, s.escaped) {
			s.ambiguous = true
		}
		s.ws()
		if s.peek() != ':' {
			return ErrParse
		}
		s.pos++
		s.ws()
		start := s.pos
		var err error
		if m := s.match(n, key); m != nil {
			err = s.record(m, depth)
		} else if s.peek() == '"' {
			err = s.str() // most values: one call fewer
		} else {
			_, err = s.value(depth)
		}
		if err != nil {
			return err
		}
		if s.visit != nil && depth <= s.visitDepth {
			s.visit(depth, key, start, s.pos)
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
			s.ws()
		case '}':
			s.pos++
			return nil
		default:
			return ErrParse
		}
	}
}

// unescapeKey decodes an escaped key (rare: kept out of object's frame).
func unescapeKey(key []byte) []byte {
	k, _ := unescape(make([]byte, 0, len(key)), key)
	return k
}

// keySeed keys the hashes of object keys: random per process, so that no
// one can craft two keys that collide (which would only refuse their own
// request anyway).
var keySeed = maphash.MakeSeed()

// smallKeys is how many keys of an object keySet compares one by one; a
// larger object is checked by hash.
const smallKeys = 16

// keySet remembers the keys of one object. Most objects have a few keys:
// those are remembered by their length, their first eight bytes and their
// place in the document, and a new key is compared with each (cheaper than
// hashing them): two integer comparisons tell most keys apart, and only
// keys longer than eight bytes that share length and head are compared
// byte by byte. From the smallKeys+1-th key on, every key is remembered by
// hash in a map, so that a large object costs linear time.
type keySet struct {
	n     int
	small [smallKeys]keyRef
	large map[uint64]struct{}
	// decoded holds the keys that had escapes, unescaped (rare).
	decoded [][]byte
}

// keyRef is a remembered key of n bytes (unescaped), whose first eight
// bytes (zero-padded) are head: data[start:start+n], or decoded[-start-1]
// when start < 0.
type keyRef struct {
	head     uint64
	start, n int32
}

func (k *keySet) bytes(data []byte, r keyRef) []byte {
	if r.start < 0 {
		return k.decoded[-r.start-1]
	}
	return data[r.start : r.start+r.n]
}

// keyHead returns the first eight bytes of key, zero-padded, as one word.
// A key that is data[start:start+len(key)] with eight bytes of data from
// start is read in one load.
func keyHead(data []byte, start int, key []byte) uint64 {
	if len(key) >= 8 {
		return binary.LittleEndian.Uint64(key)
	}
	if start >= 0 && start+8 <= len(data) {
		return binary.LittleEndian.Uint64(data[start:]) & (1<<(8*uint(len(key))) - 1)
	}
	var h uint64
	for i := len(key) - 1; i >= 0; i-- {
		h = h<<8 | uint64(key[i])
	}
	return h
}

// add records key, found at data[start:] (unescaped into key when
// escaped), and reports whether it is new.
func (k *keySet) add(data []byte, start int, key []byte, escaped bool) bool {
	if k.n < smallKeys {
		at := start
		if escaped {
			at = -1 // key is not data[start:]
		}
		r := keyRef{head: keyHead(data, at, key), start: int32(start), n: int32(len(key))}
		for _, o := range k.small[:k.n] {
			if o.head == r.head && o.n == r.n && (r.n <= 8 || string(k.bytes(data, o)[8:]) == string(key[8:])) {
				return false
			}
		}
		if escaped {
			k.decoded = append(k.decoded, key)
			r.start = -int32(len(k.decoded))
		}
		k.small[k.n] = r
		k.n++
		return true
	}
	if k.large == nil {
		k.large = make(map[uint64]struct{}, 2*smallKeys)
		for _, r := range k.small {
			k.large[maphash.Bytes(keySeed, k.bytes(data, r))] = struct{}{}
		}
	}
	h := maphash.Bytes(keySeed, key)
	if _, dup := k.large[h]; dup {
		return false
	}
	k.large[h] = struct{}{}
	k.n++
	return true
}

// match returns the member of n that key (unescaped) names, nil when none
// does. A key that names one only under case folding is marked unsure.
func (s *scanner) match(n *node, key []byte) *member {
	if n == nil {
		return nil
	}
	return s.matchNode(n, key)
}

// matchNode is match for a node: apart, so that match is inlined and an
// object without one costs no call.
func (s *scanner) matchNode(n *node, key []byte) *member {
	if len(key) > maxKeyLen {
		return nil
	}
	for i := range n.members {
		if string(key) == n.members[i].key {
			return &n.members[i]
		}
	}
	if n.fold {
		for i := range n.members {
			if bytes.EqualFold(key, []byte(n.members[i].key)) {
				s.ambiguous = true
				s.unsure[n.members[i].field] = true
				return nil
			}
		}
	}
	return nil
}

// record scans the value of member m and records where it is.
func (s *scanner) record(m *member, depth int) error {
	sp := &s.spans[m.field]
	if sp.kind != absent {
		s.ambiguous = true // duplicate key
		s.unsure[m.field] = true
	}
	start := s.pos
	var k kind
	var err error
	if m.child != nil && s.peek() == '{' {
		k, err = object, s.object(m.child, depth+1)
	} else {
		k, err = s.value(depth)
	}
	if err != nil {
		return err
	}
	*sp = span{start: int32(start), end: int32(s.pos), kind: k, escaped: k == str && s.escaped}
	return nil
}

func (s *scanner) array(depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	s.pos++ // '['
	s.ws()
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for {
		start := s.pos
		if _, err := s.value(depth); err != nil {
			return err
		}
		if s.visit != nil && depth <= s.visitDepth {
			s.visit(depth, nil, start, s.pos)
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
			s.ws()
		case ']':
			s.pos++
			return nil
		default:
			return ErrParse
		}
	}
}

// str scans a string at s.pos, its opening quote. It accepts exactly what
// encoding/json accepts, except that the bytes must be valid UTF-8.
func (s *scanner) str() error {
	d := s.data
	i := s.pos + 1
	s.escaped = false
	for {
		i = skipPlain(d, i)
		if i >= len(d) {
			return ErrParse
		}
		// skipPlain stops at the closing quote most of the time, and at a
		// plain byte only in the last eight bytes of the document.
		switch c := d[i]; {
		case c == '"':
			s.pos = i + 1
			return nil
		case plain[c]:
			i++
		case c == '\\':
			s.escaped = true
			if i+1 >= len(d) {
				return ErrParse
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex(d[i+2]) || !isHex(d[i+3]) || !isHex(d[i+4]) || !isHex(d[i+5]) {
					return ErrParse
				}
				i += 6
			default:
				return ErrParse
			}
		case c < 0x20:
			return ErrParse
		default: // a multi-byte UTF-8 sequence, or invalid
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return ErrParse
			}
			i += size
		}
	}
}

// skipPlain returns the index of the first byte from i on that is not
// plain, eight bytes at a time: long string values (tool arguments) are
// most of what a body holds.
func skipPlain(d []byte, i int) int {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	for i+8 <= len(d) {
		x := binary.LittleEndian.Uint64(d[i:])
		// The high bit of a byte of m is set where the byte is below 0x20,
		// is '"' or '\\' (the XOR makes it zero, and zero minus one
		// borrows), or is 0x80 or above. A borrow only reaches later
		// bytes, so the lowest flagged byte is the first such byte.
		m := ((x - 0x20*ones) | ((x ^ '"'*ones) - ones) | ((x ^ '\\'*ones) - ones) | x) & high
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	return i
}

func (s *scanner) number() error {
	d, i := s.data, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && isDigit(d[i]):
		i = digits(d, i)
	default:
		return ErrParse
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return ErrParse
		}
		i = digits(d, i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return ErrParse
		}
		i = digits(d, i)
	}
	s.pos = i
	return nil
}

func digits(d []byte, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}

func (s *scanner) literal(lit string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return ErrParse
	}
	s.pos += len(lit)
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) rune {
	switch {
	case c <= '9':
		return rune(c - '0')
	case c >= 'a':
		return rune(c - 'a' + 10)
	default:
		return rune(c - 'A' + 10)
	}
}

func hex4(b []byte) rune {
	return hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3])
}

// unescape appends the decoded content of a string the scanner accepted
// (src excludes the quotes). ok is false when src escapes an unpaired
// surrogate, which no UTF-8 string can carry; it is then decoded as U+FFFD,
// as encoding/json does.
func unescape(dst, src []byte) (out []byte, ok bool) {
	ok = true
	for i := 0; i < len(src); {
		j := bytes.IndexByte(src[i:], '\\')
		if j < 0 {
			return append(dst, src[i:]...), ok
		}
		dst = append(dst, src[i:i+j]...)
		i += j
		switch c := src[i+1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(src[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(src) && src[i] == '\\' && src[i+1] == 'u' {
					r2 = utf16.DecodeRune(r, hex4(src[i+2:i+6]))
				}
				if r2 == utf8.RuneError {
					ok = false
				} else {
					i += 6 // the low half of the pair
				}
				r = r2
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		i += 2
	}
	return dst, ok
}
