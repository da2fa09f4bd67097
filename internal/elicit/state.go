package elicit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"time"
)

// MinStateKeyBytes is the shortest key that signs states.
const MinStateKeyBytes = 32

// Errors from VerifyState. Each one means the completion is refused; none
// says more than the caller needs to fix its own request.
var (
	ErrStateMissing = errors.New("elicit: the completion carries no state")
	ErrStateInvalid = errors.New("elicit: the state was not issued for this elicitation and user")
	ErrStateExpired = errors.New("elicit: the state has expired")
	ErrStateKey     = errors.New("elicit: a state key must be at least 32 bytes")
)

// stateKey signs the state of authorization URLs: HMAC-SHA256 over the
// elicitation id, the user (issuer and subject) and an expiry. A third party
// hands the state back to the callback, and the completion must present it:
// knowing an elicitation id is not enough to complete it, and a state issued
// for one user's elicitation completes no other.
type stateKey []byte

func newStateKey(key []byte) (stateKey, error) {
	if len(key) < MinStateKeyBytes {
		return nil, ErrStateKey
	}
	return stateKey(append([]byte(nil), key...)), nil
}

// randomStateKey is the key of a Store nobody gave one: good for a single
// replica, whose states need not verify anywhere else.
func randomStateKey() stateKey {
	k := make([]byte, MinStateKeyBytes)
	_, _ = rand.Read(k) // never fails (crypto/rand)
	return k
}

// sign returns the state for p: "<id>.<expiry in Unix seconds>.<mac>". The
// id comes first so that a callback holding only the state knows which
// elicitation to complete.
func (k stateKey) sign(p Pending, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return p.ID + "." + exp + "." + base64.RawURLEncoding.EncodeToString(k.mac(p, exp))
}

// mac is the HMAC of every bound value, each length-prefixed so that no
// two different tuples hash the same bytes.
func (k stateKey) mac(p Pending, exp string) []byte {
	h := hmac.New(sha256.New, k)
	var n [8]byte
	for _, v := range []string{"extauthz elicitation state v1", p.ID, p.Issuer, p.Subject, exp} {
		binary.BigEndian.PutUint64(n[:], uint64(len(v)))
		h.Write(n[:])
		h.Write([]byte(v))
	}
	return h.Sum(nil)
}

// verify checks that state was signed for p (its id, issuer and subject)
// and has not expired at now. The MAC is compared in constant time, and
// decoded strictly: one MAC has one spelling.
func (k stateKey) verify(p Pending, state string, now time.Time) error {
	if state == "" {
		return ErrStateMissing
	}
	id, rest, ok := strings.Cut(state, ".")
	if !ok || id != p.ID {
		return ErrStateInvalid
	}
	exp, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return ErrStateInvalid
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || !hmac.Equal(got, k.mac(p, exp)) {
		return ErrStateInvalid
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return ErrStateInvalid
	}
	if !now.Before(time.Unix(unix, 0)) {
		return ErrStateExpired
	}
	return nil
}
