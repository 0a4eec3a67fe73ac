// Package webhook signs and verifies webhooks as the Standard Webhooks specification says
// (standardwebhooks.com): paygw signs what it delivers with Sign, and a merchant's service checks
// it with Verify, the way stripe-go's webhook package checks Stripe's.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery (http.Header canonicalizes them; the spec writes them lower case).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Tolerance is how far a delivery's webhook-timestamp may be from the receiver's clock, either
// way, before Verify refuses it as a replay (too old) or as forged ahead (too new).
const Tolerance = 5 * time.Minute

// MaxIDLen bounds webhook-id; paygw's event ids are far shorter.
const MaxIDLen = 256

// version is the signature identifier of HMAC-SHA256 signatures.
const version = "v1"

// The errors Verify returns, matched with errors.Is. A consumer answers every one of them with a
// 4xx: the delivery is not paygw's (or is a replay), and retrying the same bytes will not help.
var (
	// ErrMissingHeaders: webhook-id, webhook-timestamp or webhook-signature is absent or empty.
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature header")
	// ErrBadID: webhook-id is longer than MaxIDLen or holds a '.', which would make the signed
	// content ambiguous.
	ErrBadID = errors.New("webhook: malformed webhook-id")
	// ErrBadTimestamp: webhook-timestamp is not unix seconds in decimal digits.
	ErrBadTimestamp = errors.New("webhook: malformed webhook-timestamp")
	// ErrTooOld: webhook-timestamp is more than Tolerance before now (a replay, or a clock behind).
	ErrTooOld = errors.New("webhook: webhook-timestamp too old")
	// ErrTooNew: webhook-timestamp is more than Tolerance after now.
	ErrTooNew = errors.New("webhook: webhook-timestamp too new")
	// ErrNoMatchingSignature: no v1 signature in webhook-signature matches the body under any of
	// the secrets.
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")
	// ErrBadSecret: a configured secret is not whsec_ + base64 of MinSecretBytes to MaxSecretBytes
	// bytes, or none is configured. It is the receiver's own configuration, not the delivery's.
	ErrBadSecret = errors.New("webhook: malformed secret")
)

// Sign is the webhook-signature header's value for a delivery of body with this id at ts: one
// "v1,<base64 HMAC-SHA256>" per secret, space-separated, the first secret first. During a
// rotation paygw signs with [new, old], so receivers holding either secret accept it. id must
// not hold a '.' (Verify refuses it); paygw's event ids never do.
func Sign(id string, ts time.Time, body []byte, secrets ...Secret) string {
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = version + "," + base64.StdEncoding.EncodeToString(mac(s.key, id, ts.Unix(), body))
	}
	return strings.Join(sigs, " ")
}

// Headers are the three headers of a signed delivery, for a sender and for tests that play one.
func Headers(id string, ts time.Time, body []byte, secrets ...Secret) http.Header {
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(id, ts, body, secrets...))
	return h
}

// mac is HMAC-SHA256 over "id.timestamp.body", the spec's signed content.
func mac(key []byte, id string, unix int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, unix, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks that body and header are a delivery signed with one of secrets (whsec_ strings,
// several during a rotation) within Tolerance of now. It returns nil or an error wrapping one of
// the package's sentinels. body must be the raw bytes received, before any JSON parsing.
func Verify(body []byte, header http.Header, secrets []string, now time.Time) error {
	v, err := NewVerifier(secrets...)
	if err != nil {
		return err
	}
	return v.Verify(body, header, now)
}

// Verifier holds parsed secrets, for a receiver that verifies many deliveries.
type Verifier struct {
	secrets []Secret
}

// NewVerifier parses secrets once; it returns ErrBadSecret if any is malformed or none is given.
func NewVerifier(secrets ...string) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, ErrBadSecret
	}
	v := &Verifier{secrets: make([]Secret, len(secrets))}
	for i, s := range secrets {
		p, err := ParseSecret(s)
		if err != nil {
			return nil, err
		}
		v.secrets[i] = p
	}
	return v, nil
}

// Verify is the package's Verify with the verifier's secrets.
func (v *Verifier) Verify(body []byte, header http.Header, now time.Time) error {
	id, tsText, sigs := header.Get(HeaderID), header.Get(HeaderTimestamp), header.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	if len(id) > MaxIDLen || strings.Contains(id, ".") {
		return ErrBadID
	}
	unix, err := parseUnix(tsText)
	if err != nil {
		return err
	}
	ts := time.Unix(unix, 0)
	switch {
	case now.Sub(ts) > Tolerance:
		return ErrTooOld
	case ts.Sub(now) > Tolerance:
		return ErrTooNew
	}
	want := make([][]byte, len(v.secrets))
	for i, s := range v.secrets {
		want[i] = mac(s.key, id, unix, body)
	}
	for _, sig := range strings.Split(sigs, " ") {
		ver, enc, ok := strings.Cut(sig, ",")
		if !ok || ver != version {
			continue // another scheme (v1a), or padding between signatures
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		for _, w := range want {
			if hmac.Equal(got, w) {
				return nil
			}
		}
	}
	return ErrNoMatchingSignature
}

// maxTimestampDigits keeps parseUnix within int64 and time.Unix's sensible range.
const maxTimestampDigits = 12

// parseUnix reads decimal unix seconds: digits only (no sign, space, fraction or leading zero),
// so that the text signed is the one canonical spelling of the time.
func parseUnix(s string) (int64, error) {
	if len(s) > maxTimestampDigits || (len(s) > 1 && s[0] == '0') {
		return 0, ErrBadTimestamp
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrBadTimestamp
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, ErrBadTimestamp
	}
	return n, nil
}
