package peer

import (
	"errors"
	"strings"
)

// Bounds of an X-Forwarded-Client-Cert header. Envoy may forward the
// client's certificate and chain URL-encoded, so the header can be large,
// but never unbounded.
const (
	MaxXFCCBytes = 64 << 10
	maxElements  = 16
	maxPairs     = 64
)

// Element is one element of an X-Forwarded-Client-Cert header: what one
// proxy says about the client certificate it saw.
type Element struct {
	// By are the URI SANs of the proxy's own certificate.
	By []string
	// Hash is the SHA-256 of the client certificate, hex.
	Hash string
	// Cert and Chain are the URL-encoded PEM certificate and chain, when
	// the proxy forwards them.
	Cert, Chain string
	// Subject is the certificate's subject DN.
	Subject string
	// URI and DNS are the certificate's URI and DNS SANs.
	URI, DNS []string
}

var errXFCC = errors.New("malformed X-Forwarded-Client-Cert")

// ParseXFCC parses an X-Forwarded-Client-Cert header as Envoy writes it:
// elements separated by ',', each of key=value pairs separated by ';'; keys
// (By, Hash, Cert, Chain, Subject, URI, DNS) are case-insensitive; a value
// containing ',', ';', '=' or '"' is double-quoted, with '"' and '\'
// escaped by '\'. Unknown keys are ignored; By, URI and DNS may repeat, the
// others may not. Anything else is an error that never quotes the input.
func ParseXFCC(h string) ([]Element, error) {
	if h == "" || len(h) > MaxXFCCBytes {
		return nil, errXFCC
	}
	var out []Element
	var el Element
	pairs := 0
	seen := map[string]bool{}
	i := 0
	for {
		// key
		j := i
		for j < len(h) && h[j] != '=' && h[j] != ';' && h[j] != ',' && h[j] != '"' {
			j++
		}
		if j == i || j == len(h) || h[j] != '=' {
			return nil, errXFCC
		}
		k := strings.ToLower(h[i:j])
		i = j + 1
		// value
		var v string
		if i < len(h) && h[i] == '"' {
			var b strings.Builder
			i++
			closed := false
			for i < len(h) {
				c := h[i]
				if c == '\\' && i+1 < len(h) && (h[i+1] == '"' || h[i+1] == '\\') {
					b.WriteByte(h[i+1])
					i += 2
					continue
				}
				if c == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(c)
				i++
			}
			if !closed {
				return nil, errXFCC
			}
			v = b.String()
		} else {
			j := i
			for j < len(h) && h[j] != ';' && h[j] != ',' {
				if h[j] == '"' || h[j] == '=' || h[j] == '\\' {
					return nil, errXFCC
				}
				j++
			}
			v, i = h[i:j], j
		}
		if pairs++; pairs > maxPairs {
			return nil, errXFCC
		}
		switch k {
		case "by":
			el.By = append(el.By, v)
		case "uri":
			el.URI = append(el.URI, v)
		case "dns":
			el.DNS = append(el.DNS, v)
		case "hash", "cert", "chain", "subject":
			if seen[k] {
				return nil, errXFCC
			}
			seen[k] = true
			switch k {
			case "hash":
				el.Hash = v
			case "cert":
				el.Cert = v
			case "chain":
				el.Chain = v
			case "subject":
				el.Subject = v
			}
		}
		// separator
		if i == len(h) {
			return append(out, el), nil
		}
		switch h[i] {
		case ';':
		case ',':
			if out = append(out, el); len(out) >= maxElements {
				return nil, errXFCC
			}
			el, pairs = Element{}, 0
			clear(seen)
		default:
			return nil, errXFCC
		}
		i++
	}
}

// FormatXFCC writes elements as ParseXFCC reads them, quoting every value
// that needs it.
func FormatXFCC(els []Element) string {
	var b strings.Builder
	for n, el := range els {
		if n > 0 {
			b.WriteByte(',')
		}
		first := true
		add := func(k, v string) {
			if !first {
				b.WriteByte(';')
			}
			first = false
			b.WriteString(k)
			b.WriteByte('=')
			if v != "" && !strings.ContainsAny(v, ",;=\"\\") {
				b.WriteString(v)
				return
			}
			b.WriteByte('"')
			for i := 0; i < len(v); i++ {
				if v[i] == '"' || v[i] == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(v[i])
			}
			b.WriteByte('"')
		}
		for _, v := range el.By {
			add("By", v)
		}
		if el.Hash != "" {
			add("Hash", el.Hash)
		}
		if el.Cert != "" {
			add("Cert", el.Cert)
		}
		if el.Chain != "" {
			add("Chain", el.Chain)
		}
		if el.Subject != "" {
			add("Subject", el.Subject)
		}
		for _, v := range el.URI {
			add("URI", v)
		}
		for _, v := range el.DNS {
			add("DNS", v)
		}
	}
	return b.String()
}
