// Package secrets loads a secret named in configuration: from an environment
// variable or from a file, the one way every secret of the service (HMAC
// issuer secrets, STS client secrets, the elicitation state key) is read.
package secrets

import (
	"fmt"
	"strings"

	"github.com/extauthz/extauthz/internal/bounded"
)

// MaxFileBytes bounds a secret file: a secret is a short string, and a
// misconfigured path (a log, a device) must not be read into memory.
const MaxFileBytes = 64 << 10

// Load returns the secret in the environment variable env (looked up with
// getenv) or, when env is empty, in file, whose trailing line breaks are
// dropped (editors add them). Neither named: "" and no error. An empty
// variable is an error; errors never show the secret.
func Load(getenv func(string) string, env, file string) (string, error) {
	switch {
	case env != "":
		s := getenv(env)
		if s == "" {
			return "", fmt.Errorf("environment variable %s is empty", env)
		}
		return s, nil
	case file != "":
		b, err := bounded.ReadFile(file, MaxFileBytes)
		if err != nil {
			return "", err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}
