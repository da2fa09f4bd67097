package envoyauthz

import (
	"context"
	"errors"
	"strings"
	"sync"
	"unsafe"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/extauthz/extauthz/internal/check"
)

// The hot path does not build Envoy's whole CheckRequest message tree
// (peers, addresses, metadata, timestamps, one allocation per header): it
// reads the fields the pipeline uses straight from the wire, every string a
// substring of one copy of the message. And a response that repeats the
// last one of its grant is sent as the bytes already encoded for it.

// Field numbers of envoy.service.auth.v3 messages, from
// external_auth.proto and attribute_context.proto.
const (
	fCheckRequestAttributes = 1 // CheckRequest.attributes

	fAttrSource            = 1  // AttributeContext.source
	fAttrRequest           = 4  // AttributeContext.request
	fAttrContextExtensions = 10 // AttributeContext.context_extensions

	fPeerAddress     = 1 // AttributeContext.Peer.address
	fPeerPrincipal   = 4 // AttributeContext.Peer.principal
	fPeerCertificate = 5 // AttributeContext.Peer.certificate (include_peer_certificate)

	fAddressSocket        = 1 // config.core.v3.Address.socket_address (a oneof with the two below)
	fAddressPipe          = 2 // Address.pipe
	fAddressEnvoyInternal = 3 // Address.envoy_internal_address
	fSocketAddress        = 2 // SocketAddress.address

	fRequestHTTP = 2 // AttributeContext.Request.http

	fHTTPMethod    = 2
	fHTTPHeaders   = 3
	fHTTPPath      = 4
	fHTTPHost      = 5
	fHTTPScheme    = 6
	fHTTPProtocol  = 10
	fHTTPBody      = 11
	fHTTPRawBody   = 12
	fHTTPHeaderMap = 13

	fHeaderMapHeaders = 1 // config.core.v3.HeaderMap.headers
	fHeaderValueKey   = 1
	fHeaderValueValue = 2
	fHeaderValueRaw   = 3

	fMapKey   = 1
	fMapValue = 2
)

var errWire = errors.New("malformed CheckRequest")

// wireRequest is a CheckRequest read for the pipeline only.
type wireRequest struct {
	in     check.Request
	method string
	scheme string
	host   string
	path   string
	body   string
	raw    []byte
	rawHdr []rawHeader
	// cert is source.certificate as sent (URL-encoded PEM), hashed only in
	// request: usually absent, and then it costs nothing.
	cert string
}

type rawHeader struct{ key, value string }

// decode reads b, which it keeps: the strings of the request point into it,
// so nothing may write to b again (keepable).
//
// It does not check that strings are UTF-8, as the generated code does.
// Envoy never sends anything else (it writes invalid bytes of a header as
// "!"); a client that does gets the decision its bytes earn, read as the
// upstream reads them, where the generated code would fail the call and
// leave the answer to the proxy's failure mode.
func (w *wireRequest) decode(b []byte) error {
	s := unsafe.String(unsafe.SliceData(b), len(b))
	if w.in.Headers == nil {
		w.in.Headers = check.Headers{}
	}
	return fields(s, func(num protowire.Number, v string) error {
		if num == fCheckRequestAttributes {
			return fields(v, w.attributes)
		}
		return nil
	})
}

func (w *wireRequest) attributes(num protowire.Number, v string) error {
	switch num {
	case fAttrSource:
		return fields(v, func(num protowire.Number, v string) error {
			switch num {
			case fPeerPrincipal:
				w.in.SourcePrincipal = v
			case fPeerCertificate:
				w.cert = v
			case fPeerAddress:
				return fields(v, w.address)
			}
			return nil
		})
	case fAttrRequest:
		return fields(v, func(num protowire.Number, v string) error {
			if num == fRequestHTTP {
				return fields(v, w.http)
			}
			return nil
		})
	case fAttrContextExtensions:
		k, val, err := mapEntry(v)
		if err != nil {
			return err
		}
		if w.in.ContextExtensions == nil {
			w.in.ContextExtensions = map[string]string{}
		}
		w.in.ContextExtensions[k] = val
	}
	return nil
}

// address reads the peer's Address as protobuf merges repeated messages:
// a later socket address's address wins, another kind of address in the
// oneof clears it.
func (w *wireRequest) address(num protowire.Number, v string) error {
	switch num {
	case fAddressSocket:
		return fields(v, func(num protowire.Number, v string) error {
			if num == fSocketAddress {
				w.in.SourceAddress = v
			}
			return nil
		})
	case fAddressPipe, fAddressEnvoyInternal:
		w.in.SourceAddress = ""
	}
	return nil
}

func (w *wireRequest) http(num protowire.Number, v string) error {
	switch num {
	case fHTTPMethod:
		w.method = v
	case fHTTPHeaders:
		k, val, err := mapEntry(v)
		if err != nil {
			return err
		}
		w.in.Headers[k] = val
		w.in.UnderscoreNames = w.in.UnderscoreNames || strings.IndexByte(k, '_') >= 0
	case fHTTPPath:
		w.path = v
	case fHTTPHost:
		w.host = v
	case fHTTPScheme:
		w.scheme = v
	case fHTTPProtocol:
		w.in.Protocol = v
	case fHTTPBody:
		w.body = v
	case fHTTPRawBody:
		w.raw = unsafe.Slice(unsafe.StringData(v), len(v))
	case fHTTPHeaderMap:
		return fields(v, func(num protowire.Number, v string) error {
			if num != fHeaderMapHeaders {
				return nil
			}
			var h rawHeader
			var raw string
			err := fields(v, func(num protowire.Number, v string) error {
				switch num {
				case fHeaderValueKey:
					h.key = v
				case fHeaderValueValue:
					h.value = v
				case fHeaderValueRaw:
					raw = v
				}
				return nil
			})
			if raw != "" {
				h.value = raw
			}
			w.rawHdr = append(w.rawHdr, h)
			return err
		})
	}
	return nil
}

// request finishes the plain request: the raw header list merged as Envoy
// merges headers (lower-case keys, repeats joined with "," or for Cookie
// "; ", invalid UTF-8 as "!"), attributes Envoy left empty taken from the
// pseudo-headers, the body and whether it is partial.
func (w *wireRequest) request() *check.Request {
	in := &w.in
	if len(in.Headers) == 0 && len(w.rawHdr) > 0 {
		for _, h := range w.rawHdr {
			in.AddHeader(h.key, h.value)
		}
	}
	h := in.Headers
	in.Method = orHeader(w.method, h, ":method")
	in.Scheme = orHeader(w.scheme, h, ":scheme")
	in.Host = orHeader(w.host, h, ":authority")
	in.Path = orHeader(w.path, h, ":path")
	if in.Scheme == "" {
		in.Scheme = h["x-forwarded-proto"]
	}
	in.RequestID = h["x-request-id"]
	switch {
	case len(w.raw) > 0:
		in.Body = w.raw
	case w.body != "":
		in.Body = unsafe.Slice(unsafe.StringData(w.body), len(w.body))
	}
	in.BodyPartial = h["x-envoy-auth-partial-body"] == "true"
	// Envoy's own view of the TLS connection, never a header: an
	// x-forwarded-client-cert reaching ext_authz is not read for it.
	// Hashed only when a bound token asks (check.Request).
	in.ClientCert, in.ClientCertForm = w.cert, check.CertPEM
	return in
}

// fields calls fn with every length-delimited field of the message in s
// and skips the others. s must stay alive: the values are substrings.
//
// Nearly every tag and length in a CheckRequest is one byte (a field
// number below 16, a value shorter than 128 bytes): those are read inline,
// the rest by protowire, whose calls do not inline and were some 7% of a
// cache hit's time across the request's dozens of fields.
func fields(s string, fn func(protowire.Number, string) error) error {
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	for off := 0; off < len(b); {
		var (
			num protowire.Number
			typ protowire.Type
		)
		if c := b[off]; c < 0x80 && c>>3 != 0 { // field number 0 is invalid
			num, typ = protowire.Number(c>>3), protowire.Type(c&7)
			off++
		} else {
			var n int
			if num, typ, n = protowire.ConsumeTag(b[off:]); n < 0 {
				return errWire
			}
			off += n
		}
		if typ != protowire.BytesType {
			n := protowire.ConsumeFieldValue(num, typ, b[off:])
			if n < 0 {
				return errWire
			}
			off += n
			continue
		}
		var start, end int
		if off < len(b) && b[off] < 0x80 {
			start, end = off+1, off+1+int(b[off])
			if end > len(b) {
				return errWire
			}
		} else {
			v, n := protowire.ConsumeBytes(b[off:])
			if n < 0 {
				return errWire
			}
			start, end = off+n-len(v), off+n
		}
		off = end
		if err := fn(num, s[start:end]); err != nil {
			return err
		}
	}
	return nil
}

// mapEntry reads one entry of a map<string, string> (the headers). The
// form every encoder writes for a header, the key then the value, each
// with a one-byte tag and length and nothing else, is read directly; any
// other (a field repeated or missing, in another order, an unknown one,
// longer lengths) is read by fields, as the protobuf library reads it. A
// request carries a dozen headers, and the general walk costs each of them
// a closure call and four calls into protowire.
func mapEntry(s string) (k, v string, err error) {
	const keyTag, valueTag = fMapKey<<3 | 2, fMapValue<<3 | 2 // length-delimited
	if len(s) >= 4 && s[0] == keyTag && s[1] < 0x80 {
		kl := int(s[1])
		if 4+kl <= len(s) && s[2+kl] == valueTag && s[3+kl] < 0x80 && 4+kl+int(s[3+kl]) == len(s) {
			return s[2 : 2+kl], s[4+kl:], nil
		}
	}
	return mapEntryFields(s)
}

// mapEntryFields is mapEntry read field by field.
func mapEntryFields(s string) (k, v string, err error) {
	err = fields(s, func(num protowire.Number, val string) error {
		switch num {
		case fMapKey:
			k = val
		case fMapValue:
			v = val
		}
		return nil
	})
	return k, v, err
}

// encodedResponse is a CheckResponse already in its wire form. pooled,
// when set, is the buffer of gRPC's pool b was written in (an answer sent
// once, see encodeGrantAllow): the codec hands it to gRPC, which puts it
// back once sent, so nothing may read b after Marshal.
type encodedResponse struct {
	b      []byte
	pooled *[]byte
}

// codec decodes Check requests into wireRequest and sends encodedResponse
// bytes as they are and allows as encodeAllow writes them; every other
// message goes through the standard proto codec (the health service,
// errors, denials).
type codec struct{ proto encoding.CodecV2 }

func (c codec) Name() string { return "proto" }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	switch v := v.(type) {
	case *encodedResponse:
		if v.pooled != nil {
			return mem.BufferSlice{mem.NewBuffer(v.pooled, mem.DefaultBufferPool())}, nil
		}
		return mem.BufferSlice{mem.SliceBuffer(v.b)}, nil
	case *authv3.CheckResponse:
		// An allow not memoized (a miss) is written field by field
		// (encode.go); anything else goes to the library.
		if b := encodeAllow(v); b != nil {
			return mem.BufferSlice{mem.SliceBuffer(b)}, nil
		}
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if w, ok := v.(*wireRequest); ok {
		return w.decode(keepable(data))
	}
	return c.proto.Unmarshal(data, v)
}

// keepable returns a request's bytes in memory that nobody will write to
// again, for the decoded request to point into for as long as anything
// keeps one of its strings. A message that came in one mem.SliceBuffer is
// read where it is: gRPC reads an HTTP/2 frame of at most 1 KiB
// (mem.IsBelowBufferPoolingThreshold) into a slice of its own and hands
// that on as a SliceBuffer, which is never recycled (its Free does
// nothing, so nobody can tell gRPC it is done with one): only the
// collector reclaims it. Any other message is copied: a pooled buffer goes back to
// gRPC's pool when Unmarshal returns, to hold another request's bytes.
func keepable(data mem.BufferSlice) []byte {
	if len(data) == 1 {
		if b, ok := data[0].(mem.SliceBuffer); ok {
			return b
		}
	}
	return data.Materialize()
}

// ServerOptions install the wire codec on a gRPC server that serves
// Register.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ForceServerCodecV2(codec{proto: encoding.GetCodecV2("proto")})}
}

// Register serves s as envoy.service.auth.v3.Authorization on gs, through
// the wire path. gs must have been built with ServerOptions.
func Register(gs *grpc.Server, s *Server) {
	desc := authv3.Authorization_ServiceDesc
	desc.HandlerType = (*any)(nil)
	desc.Methods = []grpc.MethodDesc{{MethodName: "Check", Handler: s.handleWire}}
	gs.RegisterService(&desc, s)
}

// wirePool recycles wireRequests and their header maps: nothing keeps a
// reference to either once the check has been answered (the strings in
// them point into the message's bytes, which are never recycled: see
// keepable).
var wirePool = sync.Pool{New: func() any { return &wireRequest{in: check.Request{Headers: make(check.Headers, 32)}} }}

func (w *wireRequest) release() {
	h := w.in.Headers
	clear(h)
	*w = wireRequest{rawHdr: w.rawHdr[:0]}
	w.in.Headers = h
	wirePool.Put(w)
}

func (s *Server) handleWire(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	w := wirePool.Get().(*wireRequest)
	if err := dec(w); err != nil {
		w.release()
		return nil, err
	}
	if interceptor == nil {
		resp := s.checkWire(ctx, w)
		w.release()
		return resp, nil
	}
	// The request goes back to the pool once answered, as above, also when
	// an interceptor recovered a panic.
	resp, err := interceptor(ctx, w, &s.wireInfo, s.wireNext)
	w.release()
	return resp, err
}

// checkWire decides a wire request and answers with a response message or
// its encoded form.
func (s *Server) checkWire(ctx context.Context, w *wireRequest) any {
	v := s.pipeline.Check(ctx, w.request())
	if e := wireAllow(&v); e != nil {
		return e
	}
	// Denials and allows of no grant go to the codec as messages.
	return respond(&v)
}

// wireAllow is the encoded allow of a grant (nil for any other verdict),
// memoized from the grant's second use on as Response memoizes the
// message.
func wireAllow(v *check.Verdict) *encodedResponse {
	g := v.Grant
	if v.Outcome != check.Allowed || g == nil || v.Route != g.Route {
		return nil
	}
	shape := check.RenderedShape(g, renderShape).encoded
	if !v.CacheHit {
		b, pooled := encodeGrantAllow(v, shape, mem.DefaultBufferPool())
		return &encodedResponse{b: b, pooled: pooled}
	}
	r := check.Rendered(v, renderGrant)
	if l := r.last.Load(); l != nil && l.matches(v, true) {
		return l.encoded
	}
	l := newLast(v)
	b, _ := encodeGrantAllow(v, shape, nil)
	l.encoded = &encodedResponse{b: b}
	r.last.Store(l)
	return l.encoded
}
