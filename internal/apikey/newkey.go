package apikey

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// NewEntry generates a key and the file entry for it: the key is to be
// shown once and handed to its holder; the entry, which holds only its
// SHA-256 digest, is added to the keys file. An empty id gets a random one.
func NewEntry(id, subject string, scopes []string) (string, Entry, error) {
	if subject == "" {
		return "", Entry{}, errors.New("apikey: a subject is required")
	}
	if id == "" {
		id = "key-" + rand.Text()[:10]
	}
	k, err := Generate()
	if err != nil {
		return "", Entry{}, err
	}
	e := Entry{ID: id, Hash: SHA256Hash(k), Subject: subject, Scopes: scopes}
	if _, err := compileEntry(e); err != nil {
		return "", Entry{}, fmt.Errorf("apikey: %w", err)
	}
	return k, e, nil
}

// YAML renders e as a one-entry keys file, to paste under keys:.
func (e Entry) YAML() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(File{Keys: []Entry{e}}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
