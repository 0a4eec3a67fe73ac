package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// SecretPrefix starts every symmetric Standard Webhooks secret.
const SecretPrefix = "whsec_"

// The decoded size of a secret: the spec's at least 192 bits, at most 512.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// Secret is a parsed whsec_ secret: the HMAC key. Printing it shows only that it is masked, so
// a Secret in a log line or an error leaks nothing.
type Secret struct {
	key []byte
}

// ParseSecret reads a whsec_ secret: the prefix, then standard base64 (with padding) of
// MinSecretBytes to MaxSecretBytes bytes. The error wraps ErrBadSecret and never quotes s.
func ParseSecret(s string) (Secret, error) {
	enc, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: it must start with %s", ErrBadSecret, SecretPrefix)
	}
	key, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil || strings.ContainsAny(enc, "\r\n") { // the decoder skips line breaks
		return Secret{}, fmt.Errorf("%w: what follows %s is not standard base64", ErrBadSecret, SecretPrefix)
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("%w: it decodes to %d bytes, want %d to %d", ErrBadSecret, len(key), MinSecretBytes, MaxSecretBytes)
	}
	return Secret{key: key}, nil
}

// MustParseSecret is ParseSecret for tests and constants; it panics on a malformed secret.
func MustParseSecret(s string) Secret {
	p, err := ParseSecret(s)
	if err != nil {
		panic(err)
	}
	return p
}

// NewSecret makes a fresh secret of 32 random bytes, as an operator puts in the config.
func NewSecret() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// String masks the secret.
func (Secret) String() string { return SecretPrefix + "***" }

// GoString masks the secret under %#v too.
func (Secret) GoString() string { return "webhook.Secret{" + SecretPrefix + "***}" }

// IsZero reports whether s was never parsed.
func (s Secret) IsZero() bool { return len(s.key) == 0 }
