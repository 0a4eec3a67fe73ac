// Package channels verifies the raw bytes a payment channel sends into a payment.Event, and renders
// the reply that channel expects; one file per channel.
package channels

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// Errors returned by the channels, wrapped with a short reason. The reasons name fields, never
// values of keys or signatures. All of them mean "refuse this message"; none means "retry".
var (
	ErrMalformed    = errors.New("channels: malformed")     // not parseable, or a field missing or invalid
	ErrBadSignature = errors.New("channels: bad signature") // missing, undecodable or not matching
	ErrNotOurs      = errors.New("channels: not ours")      // app or merchant id is not the configured one
	ErrUnsupported  = errors.New("channels: unsupported")   // e.g. an unknown sign_type or charset
)

// Response is what the HTTP layer writes back to the channel, as is.
type Response struct {
	Status      int
	ContentType string
	Body        []byte
}

// minRSABits refuses toy keys at configuration time rather than at the first notification.
// 1024 still admits the legacy keys of Alipay's sign_type RSA.
const minRSABits = 1024

// ParseRSAPublicKey reads an RSA public key given as PEM ("PUBLIC KEY" PKIX or "RSA PUBLIC KEY"
// PKCS#1) or as the bare base64 of a PKIX DER, which is what the Alipay console shows; whitespace
// and line breaks inside the base64 are ignored.
func ParseRSAPublicKey(s string) (*rsa.PublicKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("channels: RSA public key: empty")
	}

	var key any
	var err error
	if strings.HasPrefix(s, "-----BEGIN") {
		block, rest := pem.Decode([]byte(s))
		switch {
		case block == nil:
			return nil, errors.New("channels: RSA public key: invalid PEM")
		case len(strings.TrimSpace(string(rest))) != 0:
			return nil, errors.New("channels: RSA public key: data after the PEM block")
		}
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		default:
			return nil, fmt.Errorf("channels: RSA public key: PEM type %q, want PUBLIC KEY or RSA PUBLIC KEY", block.Type)
		}
	} else {
		der, decErr := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s), ""))
		if decErr != nil {
			return nil, errors.New("channels: RSA public key: neither PEM nor valid base64")
		}
		key, err = x509.ParsePKIXPublicKey(der)
	}
	if err != nil {
		return nil, fmt.Errorf("channels: RSA public key: %w", err)
	}

	rsaKey, ok := key.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("channels: RSA public key: got a %T key", key)
	}
	if n := rsaKey.N.BitLen(); n < minRSABits {
		return nil, fmt.Errorf("channels: RSA public key: %d bits, want at least %d", n, minRSABits)
	}
	return rsaKey, nil
}
