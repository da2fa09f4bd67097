package jwtauth

import (
	"context"
	"net/http"
)

// CheckKeySource loads the key set of spec once, exactly as the verifier
// would (file, URL or discovery), and reports why it would not load; nil for
// an HMAC issuer. It keeps nothing and starts no refresh.
func CheckKeySource(ctx context.Context, client *http.Client, spec IssuerSpec) error {
	var fetch fetchFunc
	switch {
	case spec.JWKSFile != "":
		fetch = fetchFile(spec.JWKSFile)
	case spec.JWKSURL != "":
		fetch = fetchURL(client, spec.JWKSURL)
	case spec.Discovery:
		fetch = fetchDiscovered(client, spec.Issuer)
	default:
		return nil
	}
	doc, err := fetch(ctx)
	if err != nil {
		return err
	}
	_, _, err = parseKeySet(doc)
	return err
}

// MinSecretLen is the shortest HMAC secret the verifier accepts.
const MinSecretLen = minSecretLen
