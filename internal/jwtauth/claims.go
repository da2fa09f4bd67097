package jwtauth

import (
	"bytes"
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// Claims are a verified credential's claims.
//
// The registered claims a verifier checks are typed fields. Every claim,
// registered or not, is read with Claim (or All): a verified JWT keeps its
// decoded payload and decodes a member only when it is asked for, so a
// cache miss pays for the claims the route reads, not for every claim the
// token carries. Other credentials (introspection answers, API keys,
// workload identities) set Raw instead.
type Claims struct {
	// IssuerName is the Name of the IssuerSpec that verified the token.
	IssuerName string
	Issuer     string // iss
	Subject    string // sub, "" if absent
	ID         string // jti, "" if absent
	Audience   []string
	// KeyID identifies the key set's key that verified the token (its
	// RFC 7638 thumbprint), whether or not the token named a kid; "" for
	// a secret. A key set refresh that drops the key reports it
	// (Options.OnKeysRemoved), to end what was granted on the token.
	KeyID string
	// ExpiresAt is always set; NotBefore and IssuedAt are zero when absent.
	ExpiresAt, NotBefore, IssuedAt time.Time
	// Raw, when set, is every claim as decoded by encoding/json (numbers
	// are float64): what introspection, API keys and peer identities
	// produce, or a copy of a token's claims changed by the caller (it
	// then takes the place of the payload). It may be shared and must not
	// be modified. A JWT verified by Verifier leaves it nil; Claim and All
	// read either form.
	Raw map[string]any

	// payload is a verified JWT's payload: one JSON object, checked by
	// jsonrpc.WalkStrict (no duplicate member, no number out of float64
	// range), never modified. It has an allocation of its own, of its
	// exact size and without pointers: a buffer inline would make every
	// Claims as large as the largest usual payload (a 1 KiB object the
	// collector scans, for a 260-byte payload), and a miss's cost is much
	// in the memory it writes. members indexes its top level (inline holds
	// the first few without a second allocation). aud holds a one-string
	// Audience. The fields without pointers come last, so that the
	// collector scans only the start of a Claims.
	payload []byte
	members []member
	aud     [1]string
	// names is a one-hash Bloom filter of the payload's top-level member
	// names, unescaped (nameBit): find answers for a name the token
	// lacks, most of a miss's lookups, without scanning the members.
	names  uint64
	inline [inlineMembers]member
}

// inlineMembers is how many top-level claims Claims indexes without an
// allocation of its own: a typical access token has 8 to 14.
const inlineMembers = 16

// member is one top-level member of a document: doc[keyStart:keyEnd] is
// its key token (quotes included), doc[valStart:valEnd] its raw value. The
// offsets are 16 bits (a header or payload is shorter than MaxTokenSize,
// below maxDocument), which keeps the index inline in a small Claims;
// the key's top bit (escaped) marks a key holding an escape.
type member struct {
	keyStart, keyEnd uint16
	valStart, valEnd uint16
}

// maxDocument bounds the documents readObject indexes, so that every
// offset fits a member's 16 bits below the escaped bit.
const maxDocument = escaped - 1

// escaped is set in member.keyEnd when the key holds an escape.
const escaped = 1 << 15

// A token's decoded header and payload must fit a member's offsets.
var _ [maxDocument - MaxTokenSize]struct{}

func newMember(keyStart, keyEnd, valStart, valEnd int, escapedKey bool) member {
	m := member{uint16(keyStart), uint16(keyEnd), uint16(valStart), uint16(valEnd)}
	if escapedKey {
		m.keyEnd |= escaped
	}
	return m
}

// rawKey is m's key token in doc, quotes included.
func (m member) rawKey(doc []byte) []byte { return doc[m.keyStart : m.keyEnd&^escaped] }

// value is m's raw value in doc.
func (m member) value(doc []byte) []byte { return doc[m.valStart:m.valEnd] }

// escapedKey reports whether m's key holds an escape.
func (m member) escapedKey() bool { return m.keyEnd&escaped != 0 }

// Claim returns the claim name as encoding/json decodes it into an any:
// string, float64, bool, nil for null, []any or map[string]any. ok is
// false when the credential does not carry it. A JWT claim is decoded on
// each call; the result is the caller's.
func (c *Claims) Claim(name string) (any, bool) {
	if c.Raw != nil || c.payload == nil {
		v, ok := c.Raw[name]
		return v, ok
	}
	switch name {
	// The checked string claims are decoded already.
	case "iss":
		if c.Issuer != "" {
			return c.Issuer, true
		}
	case "sub":
		if c.Subject != "" {
			return c.Subject, true
		}
	case "jti":
		if c.ID != "" {
			return c.ID, true
		}
	}
	m, ok := c.find(name)
	if !ok {
		return nil, false
	}
	v, err := decodeValue(m.value(c.payload))
	if err != nil {
		// The payload was validated as a whole: this cannot happen, and a
		// claim that cannot be read is not there.
		return nil, false
	}
	return v, true
}

// ClaimString returns the claim name when it is a string; ok is false
// when it is absent or not a string. It is Claim without the boxing of the
// result in an interface, for the claims read as strings on every miss
// (user, session, client id, scope).
func (c *Claims) ClaimString(name string) (string, bool) {
	if c.Raw != nil || c.payload == nil {
		s, ok := c.Raw[name].(string)
		return s, ok
	}
	switch {
	case name == "iss" && c.Issuer != "":
		return c.Issuer, true
	case name == "sub" && c.Subject != "":
		return c.Subject, true
	case name == "jti" && c.ID != "":
		return c.ID, true
	}
	m, ok := c.find(name)
	if !ok {
		return "", false
	}
	s, isString, err := payloadString(m.value(c.payload))
	return s, isString && err == nil
}

// All returns every claim as a map, as encoding/json decodes the payload.
// For a JWT the map is built on each call and is the caller's; Raw is
// returned as it is and must not be modified. Meant for what reads claims
// by names not known in advance (an expression reading jwt as a whole).
func (c *Claims) All() map[string]any {
	if c.Raw != nil || c.payload == nil {
		return c.Raw
	}
	m := make(map[string]any, len(c.members))
	for _, mem := range c.members {
		k, ok := c.key(mem)
		if !ok {
			continue
		}
		if v, err := decodeValue(mem.value(c.payload)); err == nil {
			m[k] = v
		}
	}
	return m
}

// find returns the top-level member named name. A grant looks up a dozen
// names, most of them absent, in a payload of about ten members: names
// rules out most absent ones at once; then a key without escapes is its
// bytes between the quotes, so its length is read from the offsets and
// rules out nearly every member without slicing the payload for it
// (rawKey's slice and bounds checks, then a second slice to drop the
// quotes, for each member).
func (c *Claims) find(name string) (member, bool) {
	if c.names&nameBit(name) == 0 {
		return member{}, false
	}
	for _, m := range c.members {
		if m.escapedKey() {
			if k, ok := c.key(m); ok && k == name {
				return m, true
			}
			continue
		}
		start, end := int(m.keyStart)+1, int(m.keyEnd)-1 // inside the quotes
		if end-start == len(name) && string(c.payload[start:end]) == name {
			return m, true
		}
	}
	return member{}, false
}

// key is m's key, unescaped.
func (c *Claims) key(m member) (string, bool) {
	raw := m.rawKey(c.payload)
	if !m.escapedKey() {
		return string(raw[1 : len(raw)-1]), true
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", false
	}
	return k, true
}

// decodeValue decodes one validated JSON value of a verified payload as
// encoding/json decodes it into an any. Plain strings, numbers and
// literals, nearly every claim, skip the reflection of encoding/json; a
// plain string is the payload's own bytes (payloadString).
func decodeValue(raw []byte) (any, error) {
	switch c := raw[0]; {
	case c == '"':
		if body, ok := plainBody(raw); ok {
			return unsafe.String(unsafe.SliceData(body), len(body)), nil
		}
	case c == 't':
		return true, nil
	case c == 'f':
		return false, nil
	case c == 'n':
		return nil, nil
	case c == '-' || '0' <= c && c <= '9':
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return nil, ErrMalformed
		}
		return f, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, ErrMalformed
	}
	return v, nil
}

// plainString returns the content of a string token that holds no escape.
func plainString(raw []byte) (string, bool) {
	body, ok := plainBody(raw)
	if !ok {
		return "", false
	}
	return string(body), true
}

// payloadString is stringClaim for a raw value of a verified payload. A
// plain string (no escape, nearly every claim) is not copied: it is the
// payload's own bytes, which nothing writes once the payload is verified
// (the payload is never pooled or reused), so the string stays valid and
// unchanged for as long as anything holds it. What keeps a claim longer
// than the request (a cached grant) copies it, so as not to keep the
// whole payload alive.
func payloadString(raw []byte) (string, bool, error) {
	if raw != nil && raw[0] == '"' {
		if body, ok := plainBody(raw); ok {
			return unsafe.String(unsafe.SliceData(body), len(body)), true, nil
		}
	}
	return stringClaim(raw)
}

// plainBody is the content of a string token that holds no escape, as it
// sits in the document.
func plainBody(raw []byte) ([]byte, bool) {
	body := raw[1 : len(raw)-1]
	return body, bytes.IndexByte(body, '\\') < 0
}

// payloadClaims is what parsePayload reads of a payload: the registered
// claims the verifier checks, as raw values (nil when absent).
type payloadClaims struct {
	iss, sub, jti, aud, exp, nbf, iat []byte
}

// parsePayload validates a JWT payload and indexes its top-level members
// into c. The payload must be one JSON object that every mainstream parser
// reads the same way (jsonrpc.WalkStrict: no member name twice at any
// depth, valid UTF-8, bounded nesting), whose strings escape no unpaired
// surrogate and whose numbers all fit a float64 (as encoding/json
// requires).
func parsePayload(r *objectReader, c *Claims, payload []byte) (payloadClaims, error) {
	var pc payloadClaims
	var names uint64
	members, err := readObject(r, payload, c.inline[:0], readClaims, func(m member, name []byte) bool {
		names |= nameBit(name)
		return pc.set(name, m.value(payload))
	})
	if err != nil {
		return pc, err
	}
	c.payload, c.members, c.names = payload, members, names
	return pc, nil
}

// nameBit is the bit of Claims.names a member name sets: one of 64, from
// its length and its first, second and last bytes, which tell the usual
// claim names apart.
func nameBit[T string | []byte](name T) uint64 {
	x := uint64(len(name))
	if n := len(name); n > 0 {
		x |= uint64(name[0])<<8 | uint64(name[n-1])<<16
		if n > 1 {
			x |= uint64(name[1]) << 24
		}
	}
	// Fibonacci hashing: the top six bits of the product.
	return 1 << (x * 0x9e3779b97f4a7c15 >> 58)
}

// readObject validates doc (objectReader.read), appending its top-level
// members to members, and calls fn with each of them and its name,
// unescaped: an escaped name ("\u0073ub") is that member, as
// encoding/json reads it. fn reports whether it reads the member; a member
// it does not read whose name folds to one of known (foldsTo) makes the
// document ErrMalformed. The header and the payload are both read this
// way.
func readObject(r *objectReader, doc []byte, members []member, known *foldSet, fn func(m member, name []byte) bool) ([]member, error) {
	members, err := r.read(doc, members)
	if err != nil {
		return nil, err
	}
	folded := false
	for _, m := range members {
		raw := m.rawKey(doc)
		name := raw[1 : len(raw)-1]
		if m.escapedKey() {
			var k string
			if json.Unmarshal(raw, &k) != nil {
				name = nil // cannot happen once WalkStrict accepted doc
			} else {
				name = []byte(k)
			}
		}
		if !fn(m, name) && foldsTo(name, known) {
			folded = true
		}
	}
	if folded {
		return nil, ErrMalformed
	}
	return members, nil
}

// readClaims are the claims the verifier and the pipeline read by name.
var readClaims = newFoldSet("iss", "sub", "aud", "exp", "nbf", "iat", "jti", "azp", "client_id", "scope", "scp", "act", "cnf")

// foldSet is a list of names foldsTo compares with and, by a name's first
// byte, the ones it may fold to: those whose first rune folds to a rune
// starting with that byte. Most names are told apart by that byte alone.
type foldSet struct {
	names []string
	first [256]uint32 // bit i: names[i]
}

func newFoldSet(names ...string) *foldSet {
	if len(names) > 32 {
		panic("jwtauth: a foldSet holds at most 32 names")
	}
	s := &foldSet{names: names}
	for i, n := range names {
		r0, _ := utf8.DecodeRuneInString(n)
		// Every rune r0 folds to, as bytes.EqualFold compares runes: a
		// simple folding orbit has at most four runes.
		for r, j := r0, 0; j < 8; j++ {
			var b [utf8.UTFMax]byte
			utf8.EncodeRune(b[:], r)
			s.first[b[0]] |= 1 << i
			if r = unicode.SimpleFold(r); r == r0 {
				break
			}
		}
	}
	return s
}

// foldsTo reports whether name differs from one of names only in case
// ("SUB", "ſub" with U+017F). Go's encoding/json matches struct fields
// that way, so a program behind the service decoding the token into a
// struct could read {"sub":"alice","Sub":"admin"} as admin: such a token
// is refused, as a JSON-RPC body with such a key is.
func foldsTo(name []byte, names *foldSet) bool {
	if len(name) > 3*len("client_id") {
		return false // folding at most triples a name's length
	}
	if len(name) == 0 {
		return slices.Contains(names.names, "")
	}
	// One bit per name that may fold to name: bounded by 32.
	for m := names.first[name[0]]; m != 0; m &= m - 1 {
		if bytes.EqualFold(name, []byte(names.names[bits.TrailingZeros32(m)])) {
			return true
		}
	}
	return false
}

// set records v when name is one of the registered claims the verifier
// checks or one the pipeline reads, and reports whether it is.
func (pc *payloadClaims) set(name, v []byte) bool {
	switch string(name) {
	case "iss":
		pc.iss = v
	case "sub":
		pc.sub = v
	case "jti":
		pc.jti = v
	case "aud":
		pc.aud = v
	case "exp":
		pc.exp = v
	case "nbf":
		pc.nbf = v
	case "iat":
		pc.iat = v
	case "azp", "client_id", "scope", "scp", "act", "cnf":
	default:
		return false
	}
	return true
}

// objectReader checks a JOSE header or payload and indexes its top-level
// members in one pass of jsonrpc.WalkStrict. A scratch holds one, so that
// visit, which WalkStrict keeps (a func value made per document would be
// an allocation), is made once.
type objectReader struct {
	doc     []byte
	next    int      // where the next top-level key is looked for
	members []member // the top-level members so far
	bad     bool     // a number out of float64 range, or a key not found
	visit   jsonrpc.Visit
}

// read checks that doc is a JSON object as jsonrpc.WalkStrict accepts it
// whose every number fits a float64 and whose strings escape no unpaired
// surrogate, and appends its top-level members to members. Whatever it
// accepts, encoding/json decodes to the same values; what it refuses and
// encoding/json would accept (a member twice, invalid UTF-8, nesting
// deeper than jsonrpc.MaxDepth, a lone `\ud800`, which encoding/json reads
// as U+FFFD and JavaScript as itself) is refused because parsers disagree
// on it.
func (r *objectReader) read(doc []byte, members []member) ([]member, error) {
	i := jsonrpc.SkipSpace(doc, 0)
	if len(doc) > maxDocument || i >= len(doc) || doc[i] != '{' {
		return nil, ErrMalformed // beyond maxDocument: offsets would not fit
	}
	if r.visit == nil {
		r.visit = r.member
	}
	r.doc, r.next, r.members, r.bad = doc, i+1, members, false
	err := jsonrpc.WalkStrict(doc, jsonrpc.MaxDepth, r.visit)
	members, bad := r.members, r.bad
	r.doc, r.members = nil, nil // a pooled reader holds no document
	if err != nil || bad || jsonrpc.LoneSurrogate(doc) {
		return nil, ErrMalformed
	}
	return members, nil
}

// member is read's Visit: it sees every value nested in doc (MaxDepth
// bounds the nesting WalkStrict accepts), checks the numbers, and indexes
// the members of the top-level object. WalkStrict has validated doc up to
// end, so the key of a top-level member starts after the previous member
// (or the '{') and a comma, and ends before the colon before the value.
func (r *objectReader) member(depth int, key []byte, start, end int) {
	doc := r.doc
	if c := doc[start]; (c == '-' || '0' <= c && c <= '9') && !numberFits(doc[start:end]) {
		r.bad = true
	}
	if depth != 1 {
		return
	}
	ks := jsonrpc.SkipSpace(doc, r.next)
	if ks < start && doc[ks] == ',' {
		ks = jsonrpc.SkipSpace(doc, ks+1)
	}
	ke := skipSpaceBack(doc, ks, start)
	if ke > ks && doc[ke-1] == ':' {
		ke = skipSpaceBack(doc, ks, ke-1)
	} else {
		ke = ks // no colon: refused below
	}
	if ke-ks < 2 || doc[ks] != '"' || doc[ke-1] != '"' {
		r.bad = true // cannot happen: WalkStrict found a key here
		return
	}
	// key is the name unescaped, and every escape is longer than what it
	// stands for: a key as long as its token's content holds none.
	r.members = append(r.members, newMember(ks, ke, start, end, ke-ks-2 != len(key)))
	r.next = end
}

// skipSpaceBack returns the index just past the last byte before end, and
// not before start, that is not JSON whitespace.
func skipSpaceBack(doc []byte, start, end int) int {
	for end > start && (doc[end-1] == ' ' || doc[end-1] == '\t' || doc[end-1] == '\n' || doc[end-1] == '\r') {
		end--
	}
	return end
}

// numberFits reports whether a valid JSON number fits a float64, as
// encoding/json requires of a number decoded into an any.
func numberFits(raw []byte) bool {
	// An integer of at most 300 digits is below 1e300: most numbers
	// (dates) need no ParseFloat.
	if len(raw) <= 300 && isInteger(raw) {
		return true
	}
	_, err := strconv.ParseFloat(string(raw), 64)
	return err == nil
}

// maxNumericDate is 9999-12-31T23:59:59Z; larger dates are malformed rather
// than silently overflowing time.Unix.
const maxNumericDate = 253402300799

// numericDate reads an RFC 7519 NumericDate claim from its raw value. An
// absent claim or a JSON null counts as absent; anything but a number in
// range is ErrMalformed.
func numericDate(raw []byte) (time.Time, bool, error) {
	if raw == nil || raw[0] == 'n' {
		return time.Time{}, false, nil
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return time.Time{}, false, ErrMalformed
	}
	if sec, ok := smallInteger(raw); ok {
		// Nearly every date: whole seconds, exactly what ParseFloat
		// would give.
		if sec > maxNumericDate {
			return time.Time{}, false, ErrMalformed
		}
		return time.Unix(sec, 0), true, nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return time.Time{}, false, ErrMalformed
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// isInteger reports whether a valid JSON number has no fraction or
// exponent.
func isInteger(raw []byte) bool {
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// smallInteger reads a number of at most 15 decimal digits and no sign,
// fraction or exponent: one that a float64 holds exactly.
func smallInteger(raw []byte) (int64, bool) {
	if len(raw) == 0 || len(raw) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// stringClaim decodes a string claim's raw value; absent is "", a present
// non-string is ErrMalformed. A null is a non-string, as it was when
// claims were read from a map.
func stringClaim(raw []byte) (string, bool, error) {
	if raw == nil {
		return "", false, nil
	}
	if raw[0] != '"' {
		return "", false, ErrMalformed
	}
	if s, ok := plainString(raw); ok {
		return s, true, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, ErrMalformed
	}
	return s, true, nil
}

// rawStringIs reports whether the raw string value raw decodes to want,
// without allocating when it holds no escape.
func rawStringIs(raw []byte, want string) bool {
	if raw == nil || raw[0] != '"' {
		return false
	}
	if body, plain := plainBody(raw); plain {
		return string(body) == want
	}
	s, _, err := stringClaim(raw)
	return err == nil && s == want
}

// audienceClaim reads aud, a string or an array of strings. An element
// equal to one of want reuses want's string; a single string is put in
// one (nil: allocated).
func audienceClaim(raw []byte, want []string, one *[1]string) ([]string, error) {
	if raw == nil || raw[0] == 'n' {
		return nil, nil
	}
	str := func(v []byte) (string, error) {
		for _, w := range want {
			if rawStringIs(v, w) {
				return w, nil
			}
		}
		s, _, err := stringClaim(v)
		return s, err
	}
	switch raw[0] {
	case '"':
		s, err := str(raw)
		if err != nil {
			return nil, err
		}
		if one == nil {
			return []string{s}, nil
		}
		one[0] = s
		return one[:], nil
	case '[':
		var out []string
		n := 0
		err := eachElement(raw, func(v []byte) error {
			if n == 0 {
				out = make([]string, 0, countElements(raw))
			}
			n++
			s, err := str(v)
			out = append(out, s)
			return err
		})
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = []string{}
		}
		return out, nil
	}
	return nil, ErrMalformed
}

// eachElement calls fn with each element of a validated array.
func eachElement(raw []byte, fn func([]byte) error) error {
	i := jsonrpc.SkipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return nil
	}
	for i < len(raw) {
		e := jsonrpc.SkipValue(raw, i)
		if e < 0 {
			return ErrMalformed
		}
		if err := fn(raw[i:e]); err != nil {
			return err
		}
		i = jsonrpc.SkipSpace(raw, e)
		if i >= len(raw) || raw[i] == ']' {
			return nil
		}
		i = jsonrpc.SkipSpace(raw, i+1) // past ','
	}
	return nil
}

func countElements(raw []byte) int {
	n := 0
	_ = eachElement(raw, func([]byte) error { n++; return nil })
	return n
}
