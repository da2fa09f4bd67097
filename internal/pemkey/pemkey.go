// Package pemkey reads the private key of a PEM file (PKCS #8, PKCS #1 RSA or
// SEC 1 EC), skipping blocks that are not keys, such as EC PARAMETERS.
package pemkey

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ErrNoKey means the data holds no PEM private key.
var ErrNoKey = errors.New("no PEM private key found")

// Parse returns the first private key in data.
func Parse(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, ErrNoKey
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", block.Type, err)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%s: %T cannot sign", block.Type, key)
		}
		return s, nil
	}
}
