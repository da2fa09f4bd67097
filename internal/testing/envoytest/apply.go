package envoytest

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
)

// Errors from ApplyOK. ErrInvalidMutation is Envoy's behaviour (it answers
// 500); ErrAppendUnset and ErrRawValue are this package being stricter than
// Envoy about answers that would behave differently across Envoy versions or
// silently lose data. Messages name header keys, never values, since values
// may carry credentials.
var (
	ErrAppendUnset     = errors.New("envoytest: HeaderValueOption.append is unset; set it explicitly (Envoy versions disagree on the default)")
	ErrRawValue        = errors.New("envoytest: HeaderValueOption.header.raw_value is ignored by Envoy's ext_authz; use value")
	ErrInvalidMutation = errors.New("envoytest: invalid header or query parameter mutation (Envoy with validate_mutations answers 500)")
)

// headerMutation is one validated HeaderValueOption: key is lower-case;
// appendValue false overwrites, true appends.
type headerMutation struct {
	key, value  string
	appendValue bool
}

// ApplyOK applies ok the way Envoy's ext_authz filter does on an allow, and
// returns the headers Envoy adds to the response it sends back to the client
// (response_headers_to_add, as they would land on a response that has none
// of them). A nil ok changes nothing.
//
// On r it applies, in Envoy's order: ok.headers in order (append false
// overwrites every value; append true comma-appends to the first value and
// does nothing when the header is absent, Envoy's long-standing behaviour,
// which the newest versions may not keep, so do not rely on it), then
// headers_to_remove, then query_parameters_to_set/remove (exact, case
// sensitive names; the query is rebuilt sorted by name as Envoy does).
// Decoder header mutation rules are Envoy's defaults: mutations of host,
// :authority, :scheme, :method and x-envoy-* are ignored; pseudo-headers and
// host are never removed. Of the other pseudo-headers only :path can be set.
//
// It returns an error and leaves r untouched when Envoy would answer 500
// (ErrInvalidMutation: an invalid header name, a value with CR, LF, NUL or
// another control byte, a query parameter that is not URL-encoded) or when an
// option leaves append unset or uses raw_value (ErrAppendUnset, ErrRawValue).
func ApplyOK(r *http.Request, ok *authv3.OkHttpResponse) (http.Header, error) {
	resp, err := applyOK(r, ok)
	if err != nil {
		return nil, err
	}
	h := make(http.Header, len(resp))
	for _, m := range resp {
		if m.appendValue {
			h.Add(m.key, m.value)
		} else {
			h.Set(m.key, m.value)
		}
	}
	return h, nil
}

// applyOK is ApplyOK returning the response mutations as a list, so the
// proxy can apply them to the upstream response with set/add semantics.
func applyOK(r *http.Request, ok *authv3.OkHttpResponse) ([]headerMutation, error) {
	if ok == nil {
		return nil, nil
	}
	reqMuts, err := headerMutations(ok.GetHeaders(), true)
	if err != nil {
		return nil, fmt.Errorf("ok_response.headers: %w", err)
	}
	respMuts, err := headerMutations(ok.GetResponseHeadersToAdd(), false)
	if err != nil {
		return nil, fmt.Errorf("ok_response.response_headers_to_add: %w", err)
	}
	for _, q := range ok.GetQueryParametersToSet() {
		if !queryIsURLEncoded(q.GetKey()) || !queryIsURLEncoded(q.GetValue()) {
			return nil, fmt.Errorf("ok_response.query_parameters_to_set %q: %w", q.GetKey(), ErrInvalidMutation)
		}
	}
	var newURL *url.URL
	for _, m := range reqMuts {
		if m.key == ":path" {
			u, err := url.ParseRequestURI(m.value)
			if err != nil {
				return nil, fmt.Errorf("ok_response.headers :path: %w", ErrInvalidMutation)
			}
			newURL = u
		}
	}

	// Everything is valid: mutate.
	if r.Header == nil {
		r.Header = http.Header{}
	}
	for _, m := range reqMuts {
		if refusedByDefaultRules(m.key) {
			continue
		}
		switch {
		case m.key == ":path":
			r.URL.Path, r.URL.RawPath, r.URL.RawQuery = newURL.Path, newURL.RawPath, newURL.RawQuery
		case m.appendValue:
			ck := http.CanonicalHeaderKey(m.key)
			if vs := r.Header[ck]; len(vs) > 0 {
				vs[0] += "," + m.value
			}
		default:
			r.Header[http.CanonicalHeaderKey(m.key)] = []string{m.value}
		}
	}
	for _, name := range ok.GetHeadersToRemove() {
		lk := strings.ToLower(name)
		if !validHeaderName(name) || strings.HasPrefix(lk, ":") || lk == "host" || refusedByDefaultRules(lk) {
			continue // Envoy ignores these removals
		}
		r.Header.Del(lk)
	}
	if len(ok.GetQueryParametersToSet()) > 0 || len(ok.GetQueryParametersToRemove()) > 0 {
		r.URL.RawQuery = rewriteQuery(r.URL.RawQuery, ok.GetQueryParametersToSet(), ok.GetQueryParametersToRemove())
		r.URL.ForceQuery = false
	}
	return respMuts, nil
}

// headerMutations validates opts. request says they target the upstream
// request, where only :path among pseudo-headers is supported.
func headerMutations(opts []*corev3.HeaderValueOption, request bool) ([]headerMutation, error) {
	muts := make([]headerMutation, 0, len(opts))
	for _, o := range opts {
		key, value := o.GetHeader().GetKey(), o.GetHeader().GetValue()
		if !validHeaderName(key) {
			return nil, fmt.Errorf("header name %q: %w", key, ErrInvalidMutation)
		}
		if !validHeaderValue(value) {
			return nil, fmt.Errorf("value of %q: %w", key, ErrInvalidMutation)
		}
		//lint:ignore SA1019 ext_authz answers still carry append; this emulates how Envoy applies it
		if o.GetAppend() == nil {
			return nil, fmt.Errorf("header %q: %w", key, ErrAppendUnset)
		}
		if len(o.GetHeader().GetRawValue()) > 0 {
			return nil, fmt.Errorf("header %q: %w", key, ErrRawValue)
		}
		lk := strings.ToLower(key)
		//lint:ignore SA1019 as above: Envoy reads append on ext_authz header mutations
		m := headerMutation{key: lk, value: value, appendValue: o.GetAppend().GetValue()}
		if strings.HasPrefix(lk, ":") && !refusedByDefaultRules(lk) {
			if !request || lk != ":path" || m.appendValue {
				return nil, fmt.Errorf("pseudo-header %q (only :path can be set, with append false): %w", key, ErrInvalidMutation)
			}
		}
		muts = append(muts, m)
	}
	return muts, nil
}

// DeniedResponse is the local reply Envoy sends the client for a denial:
// status (403 when unset), headers and body. Envoy starts from its local
// reply headers (content-type: text/plain when there is a body), removes
// every listed key, then adds every entry, so repeated keys (Set-Cookie)
// survive. Like Envoy with validate_mutations, an invalid header name or
// value turns the reply into a bare 500.
func DeniedResponse(d *authv3.DeniedHttpResponse) (status int, header http.Header, body []byte) {
	status, header, body, ok := localReply(d, http.StatusForbidden)
	if !ok {
		return http.StatusInternalServerError, http.Header{}, nil
	}
	return status, header, body
}

// localReply builds the local reply for a denied or error response, with
// defaultStatus when d sets none. ok is false when a header is invalid.
func localReply(d *authv3.DeniedHttpResponse, defaultStatus int) (status int, header http.Header, body []byte, ok bool) {
	for _, o := range d.GetHeaders() {
		if !validHeaderName(o.GetHeader().GetKey()) || !validHeaderValue(o.GetHeader().GetValue()) {
			return 0, nil, nil, false
		}
	}
	status = defaultStatus
	if c := d.GetStatus().GetCode(); c != 0 {
		status = int(c)
	}
	header = http.Header{}
	if d.GetBody() != "" {
		header.Set("Content-Type", "text/plain")
	}
	for _, o := range d.GetHeaders() {
		header.Del(o.GetHeader().GetKey())
	}
	for _, o := range d.GetHeaders() {
		header.Add(o.GetHeader().GetKey(), o.GetHeader().GetValue())
	}
	if d.GetBody() != "" {
		body = []byte(d.GetBody())
	}
	return status, header, body, true
}

// refusedByDefaultRules reports whether Envoy's default decoder header
// mutation rules ignore a change to the lower-case header key.
func refusedByDefaultRules(key string) bool {
	switch key {
	case "host", ":authority", ":scheme", ":method":
		return true
	}
	return strings.HasPrefix(key, "x-envoy-")
}

// validHeaderName is Envoy's HeaderUtility::headerNameIsValid: an RFC 9110
// token, or ':' followed by a lower-case token for pseudo-headers.
func validHeaderName(k string) bool {
	pseudo := strings.HasPrefix(k, ":")
	if pseudo {
		k = k[1:]
	}
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !isTokenChar(c) || (pseudo && 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validHeaderValue is Envoy's HeaderUtility::headerValueIsValid: no control
// bytes other than horizontal tab (so no CR, LF or NUL), no DEL.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// queryIsURLEncoded reports whether s needs no further percent-encoding to
// sit in a query string as a key or value: unreserved characters, sub-delims
// other than '&' and '=', ':', '@', '/', '?', and well-formed %XX escapes.
func queryIsURLEncoded(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$'()*+,;:@/?", c) >= 0:
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// rewriteQuery is Envoy's QueryParamsMulti round trip: parse the raw query
// (no decoding; "k" is k with an empty value), overwrite the set names, drop
// the removed ones, and print every pair as k=v sorted by name.
func rewriteQuery(raw string, set []*corev3.QueryParameter, remove []string) string {
	params := map[string][]string{}
	for seg := range strings.SplitSeq(raw, "&") {
		if seg == "" {
			continue
		}
		k, v, _ := strings.Cut(seg, "=")
		params[k] = append(params[k], v)
	}
	for _, q := range set {
		params[q.GetKey()] = []string{q.GetValue()}
	}
	for _, k := range remove {
		delete(params, k)
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range params[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(v)
		}
	}
	return b.String()
}
