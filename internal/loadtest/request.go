package loadtest

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Shape of every request: an MCP client's POST to /mcp, as Envoy's HTTP
// connection manager hands it to ext_authz (lower-case header keys,
// pseudo-headers included, x-request-id and x-forwarded-* added).
const (
	RequestHost   = "mcp.bench.invalid"
	RequestPath   = "/mcp"
	RequestMethod = "POST"
	RequestScheme = "http"
	// requestBodySize is the content-length of a small tools/call request;
	// Envoy does not send the body itself unless configured to.
	requestBodySize = 148
)

// checkRequest builds the CheckRequest Envoy would send for one request
// with the given stream id, x-request-id and Authorization header; empty
// ones are left out.
func checkRequest(now time.Time, id, requestID, authorization string) *authv3.CheckRequest {
	headers := map[string]string{
		":authority":           RequestHost,
		":method":              RequestMethod,
		":path":                RequestPath,
		":scheme":              RequestScheme,
		"accept":               "application/json, text/event-stream",
		"content-type":         "application/json",
		"content-length":       strconv.Itoa(requestBodySize),
		"mcp-protocol-version": "2025-06-18",
		"user-agent":           "extauthz-loadtest",
		"x-forwarded-for":      "10.0.0.7",
		"x-forwarded-proto":    RequestScheme,
	}
	if requestID != "" {
		headers["x-request-id"] = requestID
	}
	if authorization != "" {
		headers["authorization"] = authorization
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: socketAddress("10.0.0.7", 53124)},
		Destination: &authv3.AttributeContext_Peer{Address: socketAddress("10.0.0.9", 8080)},
		Request: &authv3.AttributeContext_Request{
			Time: timestamppb.New(now),
			Http: &authv3.AttributeContext_HttpRequest{
				Id:       id,
				Method:   RequestMethod,
				Headers:  headers,
				Path:     RequestPath,
				Host:     RequestHost,
				Scheme:   RequestScheme,
				Protocol: "HTTP/1.1",
			},
		},
		MetadataContext:      &corev3.Metadata{},
		RouteMetadataContext: &corev3.Metadata{},
	}}
}

func socketAddress(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       ip,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// envoyRequest is one caller's request, kept encoded. Everything but the
// stream id, x-request-id and Authorization is the same on every request,
// so it is encoded once; each request appends only the fields that change.
// Protobuf merges repeated occurrences of a message field and appends map
// entries, so the server decodes exactly the CheckRequest checkRequest
// builds. The load tool thus spends next to nothing per request on its own
// side of the wire and leaves the CPU to the servers it measures.
type envoyRequest struct {
	static []byte
	buf    []byte
	// idBase makes this caller's request ids distinct from every other's.
	idBase [16]byte
	seq    uint64
	id     [20]byte
	uuid   [36]byte
}

func newEnvoyRequest(idBase [16]byte, now time.Time) *envoyRequest {
	static, err := proto.MarshalOptions{Deterministic: true}.Marshal(checkRequest(now, "", "", ""))
	if err != nil {
		panic("loadtest: encoding the request template: " + err.Error()) // a fixed, valid message
	}
	return &envoyRequest{static: static, idBase: idBase}
}

// Field numbers on the path to the per-request fields.
const (
	fieldCheckRequestAttributes = 1 // CheckRequest.attributes
	fieldAttributesRequest      = 4 // AttributeContext.request
	fieldRequestHTTP            = 2 // AttributeContext.Request.http
	fieldHTTPID                 = 1 // HttpRequest.id
	fieldHTTPHeaders            = 3 // HttpRequest.headers (map entries)
	fieldMapKey                 = 1
	fieldMapValue               = 2
)

// next encodes the next request with the given Authorization header value:
// a fresh stream id and x-request-id, as Envoy would send. The result is
// valid until the following call.
func (r *envoyRequest) next(authorization string) *envoyRequest {
	r.seq++
	idv := r.idBase
	binary.BigEndian.PutUint64(idv[8:], binary.BigEndian.Uint64(idv[8:])+r.seq)
	id := strconv.AppendUint(r.id[:0], binary.BigEndian.Uint64(idv[8:]), 10)
	requestID := uuidAppend(&r.uuid, idv)

	httpLen := protowire.SizeTag(fieldHTTPID) + protowire.SizeBytes(len(id)) +
		headerSize("x-request-id", len(requestID)) + headerSize("authorization", len(authorization))
	reqLen := protowire.SizeTag(fieldRequestHTTP) + protowire.SizeBytes(httpLen)
	attrLen := protowire.SizeTag(fieldAttributesRequest) + protowire.SizeBytes(reqLen)

	b := append(r.buf[:0], r.static...)
	b = protowire.AppendTag(b, fieldCheckRequestAttributes, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(attrLen))
	b = protowire.AppendTag(b, fieldAttributesRequest, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(reqLen))
	b = protowire.AppendTag(b, fieldRequestHTTP, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(httpLen))
	b = protowire.AppendTag(b, fieldHTTPID, protowire.BytesType)
	b = protowire.AppendBytes(b, id)
	b = appendHeader(b, "x-request-id", requestID)
	b = appendHeader(b, "authorization", authorization)
	r.buf = b
	return r
}

func headerSize(key string, valueLen int) int {
	entry := protowire.SizeTag(fieldMapKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(fieldMapValue) + protowire.SizeBytes(valueLen)
	return protowire.SizeTag(fieldHTTPHeaders) + protowire.SizeBytes(entry)
}

func appendHeader[V string | []byte](b []byte, key string, value V) []byte {
	entry := protowire.SizeTag(fieldMapKey) + protowire.SizeBytes(len(key)) +
		protowire.SizeTag(fieldMapValue) + protowire.SizeBytes(len(value))
	b = protowire.AppendTag(b, fieldHTTPHeaders, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(entry))
	b = protowire.AppendTag(b, fieldMapKey, protowire.BytesType)
	b = protowire.AppendString(b, key)
	b = protowire.AppendTag(b, fieldMapValue, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(value)))
	return append(b, value...)
}

// uuidAppend formats b as a version 4 UUID into dst, like Envoy's
// x-request-id.
func uuidAppend(dst *[36]byte, b [16]byte) []byte {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	s := dst[:]
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return s
}

// requestCodec sends an encoded envoyRequest as it is and handles every
// other message, such as the CheckResponse, with gRPC's proto codec.
type requestCodec struct{ proto encoding.CodecV2 }

var _ encoding.CodecV2 = requestCodec{}

func newRequestCodec() requestCodec {
	return requestCodec{proto: encoding.GetCodecV2(grpcproto.Name)}
}

func (c requestCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*envoyRequest); ok {
		// gRPC is done with the bytes when the call returns, before the
		// caller encodes its next request over them.
		return mem.BufferSlice{mem.SliceBuffer(r.buf)}, nil
	}
	return c.proto.Marshal(v)
}

func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.proto.Unmarshal(data, v)
}

// Name is the proto codec's: the bytes on the wire are protobuf.
func (requestCodec) Name() string { return grpcproto.Name }
