package envoyauthz

import (
	"math"
	"math/bits"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/check"
)

// Allows are answered on the wire path in their encoded form, written here
// field by field: the generic protobuf marshaler walks the metadata map by
// reflection, at one or two allocations per entry, several times what the
// rest of a miss costs. The allow of a grant is written from the verdict
// without building a message (encodeGrantAllow); any other allow from the
// message okResponse builds (encodeAllow). The tests decode the bytes with
// the protobuf library and compare them with the message the protobuf API
// answers (encode_test.go).

// Field numbers of the messages written here.
const (
	fieldResponseStatus   = 1 // CheckResponse.status
	fieldResponseOK       = 3 // CheckResponse.ok_response
	fieldResponseMetadata = 4 // CheckResponse.dynamic_metadata
	fieldStatusCode       = 1 // google.rpc.Status.code
	fieldStatusMessage    = 2 // google.rpc.Status.message
	fieldOKHeaders        = 2 // OkHttpResponse.headers
	fieldOKRemove         = 5 // OkHttpResponse.headers_to_remove
	fieldOptionHeader     = 1 // HeaderValueOption.header
	fieldOptionAppend     = 2 // HeaderValueOption.append
	fieldHeaderKey        = 1 // HeaderValue.key
	fieldHeaderValue      = 2 // HeaderValue.value
	fieldBoolValue        = 1 // BoolValue.value
	fieldStructFields     = 1 // Struct.fields (map entries)
	fieldEntryKey         = 1 // map entry key
	fieldEntryValue       = 2 // map entry value
	fieldListValues       = 1 // ListValue.values
	fieldValueNull        = 1 // Value.null_value
	fieldValueNumber      = 2 // Value.number_value
	fieldValueString      = 3 // Value.string_value
	fieldValueBool        = 4 // Value.bool_value
	fieldValueStruct      = 5 // Value.struct_value
	fieldValueList        = 6 // Value.list_value
)

// Every field number above is below 16, so that its tag is one byte, as
// appendLen writes it: a larger one makes this array's length negative.
var _ [15 - max(fieldResponseStatus, fieldResponseOK, fieldResponseMetadata, fieldStatusCode, fieldStatusMessage,
	fieldOKHeaders, fieldOKRemove, fieldOptionHeader, fieldOptionAppend, fieldHeaderKey, fieldHeaderValue, fieldBoolValue,
	fieldStructFields, fieldEntryKey, fieldEntryValue, fieldListValues, fieldValueNull, fieldValueNumber, fieldValueString,
	fieldValueBool, fieldValueStruct, fieldValueList)]struct{}

// encodeAllow returns the wire form of an allow built by okResponse, in
// one allocation of exactly its size, or nil when resp holds anything
// okResponse does not set (the caller then sends the message).
func encodeAllow(resp *authv3.CheckResponse) []byte {
	ok := resp.GetOkResponse()
	if ok == nil || resp.GetStatus().GetDetails() != nil || !plainOK(ok) {
		return nil
	}
	n := allowSize(resp, ok)
	b := make([]byte, 0, n)
	b = appendAllow(b, resp, ok)
	if len(b) != n {
		return nil // cannot happen: the sizes are those of the writes
	}
	return b
}

// plainOK reports whether ok holds only what okResponse sets.
func plainOK(ok *authv3.OkHttpResponse) bool {
	//lint:ignore SA1019 a deprecated field set (never by okResponse) is left to the library
	if ok.DynamicMetadata != nil || len(ok.ResponseHeadersToAdd) > 0 || len(ok.QueryParametersToSet) > 0 ||
		len(ok.QueryParametersToRemove) > 0 || len(ok.ProtoReflect().GetUnknown()) > 0 {
		return false
	}
	for _, h := range ok.Headers {
		//lint:ignore SA1019 append false is what okResponse sets (see headerOptions)
		if h.GetHeader() == nil || len(h.Header.RawValue) > 0 || h.AppendAction != 0 || h.KeepEmptyValue || h.Append.GetValue() {
			return false
		}
	}
	return true
}

func allowSize(resp *authv3.CheckResponse, ok *authv3.OkHttpResponse) int {
	n := messageSize(fieldResponseStatus, statusSize(resp))
	n += messageSize(fieldResponseOK, okSize(ok))
	if md := resp.DynamicMetadata; md != nil {
		n += messageSize(fieldResponseMetadata, structSize(md))
	}
	return n
}

func appendAllow(b []byte, resp *authv3.CheckResponse, ok *authv3.OkHttpResponse) []byte {
	b = appendLen(b, fieldResponseStatus, statusSize(resp))
	if c := resp.GetStatus().GetCode(); c != 0 {
		b = protowire.AppendTag(b, fieldStatusCode, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(c)))
	}
	if m := resp.GetStatus().GetMessage(); m != "" {
		b = appendString(b, fieldStatusMessage, m)
	}
	b = appendLen(b, fieldResponseOK, okSize(ok))
	for _, h := range ok.Headers {
		b = appendLen(b, fieldOKHeaders, optionSize(h))
		b = appendLen(b, fieldOptionHeader, headerSize(h.Header))
		if h.Header.Key != "" {
			b = appendString(b, fieldHeaderKey, h.Header.Key)
		}
		if h.Header.Value != "" {
			b = appendString(b, fieldHeaderValue, h.Header.Value)
		}
		//lint:ignore SA1019 append false is what every Envoy release reads (see headerOptions)
		if h.Append != nil {
			b = protowire.AppendTag(b, fieldOptionAppend, protowire.BytesType)
			b = protowire.AppendVarint(b, 0) // false: an empty BoolValue
		}
	}
	for _, name := range ok.HeadersToRemove {
		b = appendString(b, fieldOKRemove, name)
	}
	if md := resp.DynamicMetadata; md != nil {
		b = appendLen(b, fieldResponseMetadata, structSize(md))
		b = appendStruct(b, md)
	}
	return b
}

// appendLen writes the tag of field num, length-delimited, and the
// length n of what follows. Every field here is below 16, a one-byte tag
// (see the field numbers), and nearly every length below 128, a one-byte
// varint: two bytes, written inline.
func appendLen(b []byte, num protowire.Number, n int) []byte {
	if uint(n) < 0x80 {
		return append(b, byte(num)<<3|byte(protowire.BytesType), byte(n))
	}
	return appendLongLen(b, num, n)
}

// appendLongLen is appendLen for a length of 128 or more.
func appendLongLen(b []byte, num protowire.Number, n int) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.BytesType), uint64(n))
}

// appendString writes field num holding s.
func appendString(b []byte, num protowire.Number, s string) []byte {
	return append(appendLen(b, num, len(s)), s...)
}

// sizeVarint is protowire.SizeVarint, computed the same way, small
// enough to inline.
func sizeVarint(v uint64) int {
	return int(9*uint32(bits.Len64(v))+64) / 64
}

// messageSize is the size of a length-delimited field of n bytes. It
// inlines, so that the tag's size of a constant field number folds away.
func messageSize(num protowire.Number, n int) int {
	return tagSize(num) + sizeVarint(uint64(n)) + n
}

// tagSize is protowire.SizeTag: a tag is the varint of num<<3 and the
// wire type, one byte for the fields below 16 that every message written
// here uses.
func tagSize(num protowire.Number) int {
	return sizeVarint(uint64(num) << 3)
}

func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return messageSize(num, len(s))
}

func statusSize(resp *authv3.CheckResponse) int {
	n := 0
	if c := resp.GetStatus().GetCode(); c != 0 {
		n += protowire.SizeTag(fieldStatusCode) + protowire.SizeVarint(uint64(int64(c)))
	}
	return n + stringSize(fieldStatusMessage, resp.GetStatus().GetMessage())
}

func okSize(ok *authv3.OkHttpResponse) int {
	n := 0
	for _, h := range ok.Headers {
		n += messageSize(fieldOKHeaders, optionSize(h))
	}
	for _, name := range ok.HeadersToRemove {
		n += messageSize(fieldOKRemove, len(name))
	}
	return n
}

func optionSize(h *corev3.HeaderValueOption) int {
	n := messageSize(fieldOptionHeader, headerSize(h.Header))
	//lint:ignore SA1019 append false is what every Envoy release reads (see headerOptions)
	if h.Append != nil {
		n += messageSize(fieldOptionAppend, 0)
	}
	return n
}

func headerSize(h *corev3.HeaderValue) int {
	return stringSize(fieldHeaderKey, h.Key) + stringSize(fieldHeaderValue, h.Value)
}

func structSize(s *structpb.Struct) int {
	n := 0
	for k, v := range s.Fields {
		n += messageSize(fieldStructFields, entrySize(k, v))
	}
	return n
}

func entrySize(k string, v *structpb.Value) int {
	return messageSize(fieldEntryKey, len(k)) + messageSize(fieldEntryValue, valueSize(v))
}

func appendStruct(b []byte, s *structpb.Struct) []byte {
	for k, v := range s.Fields {
		b = appendField(b, k, v)
	}
	return b
}

// appendField writes one entry of a Struct's fields.
func appendField(b []byte, k string, v *structpb.Value) []byte {
	b = appendLen(b, fieldStructFields, entrySize(k, v))
	b = appendString(b, fieldEntryKey, k)
	b = appendLen(b, fieldEntryValue, valueSize(v))
	return appendValue(b, v)
}

// encodeFields is fs as the fields of a Struct: what a shape's grants all
// show, written once and copied into each answer.
func encodeFields(fs []field) []byte {
	n := 0
	for _, f := range fs {
		n += messageSize(fieldStructFields, entrySize(f.key, f.val))
	}
	b := make([]byte, 0, n)
	for _, f := range fs {
		b = appendField(b, f.key, f.val)
	}
	return b
}

// valueSize is the size of a Value's fields; a nil Value (never set here)
// is an empty message, as the protobuf library writes it.
func valueSize(v *structpb.Value) int {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return protowire.SizeTag(fieldValueNull) + protowire.SizeVarint(uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		return protowire.SizeTag(fieldValueNumber) + protowire.SizeFixed64()
	case *structpb.Value_StringValue:
		return messageSize(fieldValueString, len(k.StringValue))
	case *structpb.Value_BoolValue:
		return protowire.SizeTag(fieldValueBool) + 1
	case *structpb.Value_StructValue:
		return messageSize(fieldValueStruct, structSize(k.StructValue))
	case *structpb.Value_ListValue:
		return messageSize(fieldValueList, listSize(k.ListValue))
	}
	return 0
}

func listSize(l *structpb.ListValue) int {
	n := 0
	for _, v := range l.GetValues() {
		n += messageSize(fieldListValues, valueSize(v))
	}
	return n
}

func appendValue(b []byte, v *structpb.Value) []byte {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		b = protowire.AppendTag(b, fieldValueNull, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(k.NullValue))
	case *structpb.Value_NumberValue:
		b = protowire.AppendTag(b, fieldValueNumber, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(k.NumberValue))
	case *structpb.Value_StringValue:
		return appendString(b, fieldValueString, k.StringValue)
	case *structpb.Value_BoolValue:
		b = protowire.AppendTag(b, fieldValueBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(k.BoolValue))
	case *structpb.Value_StructValue:
		b = appendLen(b, fieldValueStruct, structSize(k.StructValue))
		return appendStruct(b, k.StructValue)
	case *structpb.Value_ListValue:
		b = appendLen(b, fieldValueList, listSize(k.ListValue))
		for _, e := range k.ListValue.GetValues() {
			b = appendLen(b, fieldListValues, valueSize(e))
			b = appendValue(b, e)
		}
	}
	return b
}

// encodeGrantAllow writes the allow of v, a verdict of its grant's route,
// as the message Response(v) builds would be written, in one buffer of
// exactly its size: the headers the verdict sets (append false, see
// headerOptions) and strips, and the metadata, whose shape's part comes
// encoded (shapeFields.encoded).
//
// With pool nil the buffer is an allocation of its own: the form a grant
// memoizes. With a pool it is the pool's, returned as pooled for the codec
// to hand to gRPC, which puts it back once sent: for an allow sent once (a
// miss's), which then allocates no answer of its own.
func encodeGrantAllow(v *check.Verdict, shape []byte, pool mem.BufferPool) (b []byte, pooled *[]byte) {
	var buf [maxEntries]entry
	es := requestEntries(ownEntries(buf[:0], v.Grant), v)
	ok := 0
	for _, h := range v.Set {
		ok += messageSize(fieldOKHeaders, setOptionSize(h))
	}
	for _, name := range v.Remove {
		ok += messageSize(fieldOKRemove, len(name))
	}
	md := len(shape)
	for i := range es {
		es[i].n = es[i].size()
		md += messageSize(fieldStructFields, es[i].n)
	}
	n := messageSize(fieldResponseStatus, 0) + messageSize(fieldResponseOK, ok) + messageSize(fieldResponseMetadata, md)
	if pool == nil {
		b = make([]byte, 0, n)
	} else {
		pooled = pool.Get(n)
		b = (*pooled)[:0]
	}
	b = appendLen(b, fieldResponseStatus, 0) // okStatus: code 0, no message
	b = appendLen(b, fieldResponseOK, ok)
	for _, h := range v.Set {
		b = appendLen(b, fieldOKHeaders, setOptionSize(h))
		b = appendLen(b, fieldOptionHeader, stringSize(fieldHeaderKey, h.Name)+stringSize(fieldHeaderValue, h.Value))
		if h.Name != "" {
			b = appendString(b, fieldHeaderKey, h.Name)
		}
		if h.Value != "" {
			b = appendString(b, fieldHeaderValue, h.Value)
		}
		b = appendLen(b, fieldOptionAppend, 0) // false: an empty BoolValue
	}
	for _, name := range v.Remove {
		b = appendString(b, fieldOKRemove, name)
	}
	b = appendLen(b, fieldResponseMetadata, md)
	b = append(b, shape...)
	for i := range es {
		b = es[i].append(b)
	}
	if pooled != nil {
		*pooled = b
	}
	return b, pooled
}

// setOptionSize is the size of the HeaderValueOption headerOptions makes
// of h.
func setOptionSize(h check.Header) int {
	return messageSize(fieldOptionHeader, stringSize(fieldHeaderKey, h.Name)+stringSize(fieldHeaderValue, h.Value)) +
		messageSize(fieldOptionAppend, 0)
}

// valueSize is the size of e's Value.
func (e *entry) valueSize() int {
	switch e.kind {
	case entryNumber:
		return protowire.SizeTag(fieldValueNumber) + protowire.SizeFixed64()
	case entryTrue, entryFalse:
		return protowire.SizeTag(fieldValueBool) + 1
	}
	return messageSize(fieldValueString, len(e.str))
}

// size is the size of e as a Struct's map entry.
func (e *entry) size() int {
	return messageSize(fieldEntryKey, len(e.key)) + messageSize(fieldEntryValue, e.valueSize())
}

// append writes e as a Struct's field; e.n holds its size.
func (e *entry) append(b []byte) []byte {
	b = appendLen(b, fieldStructFields, e.n)
	b = appendString(b, fieldEntryKey, e.key)
	b = appendLen(b, fieldEntryValue, e.valueSize())
	switch e.kind {
	case entryNumber:
		b = protowire.AppendTag(b, fieldValueNumber, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(e.num))
	case entryTrue, entryFalse:
		b = protowire.AppendTag(b, fieldValueBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(e.kind == entryTrue))
	}
	return appendString(b, fieldValueString, e.str)
}
