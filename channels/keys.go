package channels

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Key sizes, checked when a channel is built (toy keys are refused at configuration time rather
// than at the first notification) and by paygw doctor, through CheckRSAKey. Each channel package
// states which applies to which of its keys.
const (
	// MinRSABits is the smallest key any channel accepts: it still admits the legacy keys of
	// Alipay's sign_type RSA and UnionPay's 1024-bit certificates.
	MinRSABits = 1024
	// MinRSABits2048 is for what signs with RSA2 or SHA256-RSA2048: WeChat Pay's platform keys,
	// and the merchant keys paygw signs its Alipay and WeChat Pay requests with.
	MinRSABits2048 = 2048
)

// CheckRSAKey refuses key when it has fewer than minBits bits: "N-bit key, want at least M".
func CheckRSAKey(key *rsa.PublicKey, minBits int) error {
	if n := key.N.BitLen(); n < minBits {
		return fmt.Errorf("%d-bit key, want at least %d", n, minBits)
	}
	return nil
}

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
	if err := CheckRSAKey(rsaKey, MinRSABits); err != nil {
		return nil, fmt.Errorf("channels: RSA public key: %w", err)
	}
	return rsaKey, nil
}

// ReadPrivateKeyFile reads an RSA private key file (PKCS#1 "RSA PRIVATE KEY" or PKCS#8 "PRIVATE
// KEY" PEM) and returns its PEM text once ParseRSAPrivateKey accepted it. Errors never include
// the file's contents.
func ReadPrivateKeyFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- the operator's own configuration names it
	if err != nil {
		return nil, err
	}
	_, err = ParseRSAPrivateKey(b)
	return b, err
}

// ParseRSAPrivateKey reads a merchant's RSA private key (ParsePrivateKey) of at least
// MinRSABits2048: Alipay's RSA2 and WeChat's WECHATPAY2-SHA256-RSA2048 both want 2048-bit merchant
// keys, and a smaller one is a configuration slip, found at start. Errors never include the key.
func ParseRSAPrivateKey(b []byte) (*rsa.PrivateKey, error) {
	k, err := ParsePrivateKey(b)
	if err != nil {
		return nil, err
	}
	if err := CheckRSAKey(&k.PublicKey, MinRSABits2048); err != nil {
		return nil, err
	}
	return k, nil
}

// ParsePrivateKey reads an RSA private key given as PEM, PKCS#1 "RSA PRIVATE KEY" or PKCS#8
// "PRIVATE KEY", whatever its size. Errors never include the key.
func ParsePrivateKey(b []byte) (*rsa.PrivateKey, error) {
	block, rest := pem.Decode(b)
	switch {
	case block == nil:
		return nil, errors.New("not PEM")
	case len(bytes.TrimSpace(rest)) != 0:
		return nil, errors.New("data after the PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("PEM type %q, want PRIVATE KEY or RSA PRIVATE KEY", block.Type)
	}
	if err != nil {
		return nil, errors.New("the PEM block is not a valid private key")
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T key, want RSA", key)
	}
	return rk, nil
}

// ReadCertificates reads every PEM certificate in a file.
func ReadCertificates(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path) // #nosec G304 -- the path is the operator's own configuration
	if err != nil {
		return nil, err
	}
	return ParseCertificates(b)
}

// ParseCertificates reads the certificates of a root_cert_file or intermediate_cert_file: one or
// more PEM CERTIFICATE blocks (UnionPay ships .cer files in PEM). Anything else in the file is an
// error, so a wrong file is noticed at start.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bytes.TrimSpace(data); len(rest) > 0; rest = bytes.TrimSpace(rest) {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		switch {
		case block == nil:
			return nil, errors.New("not PEM, or data between certificates")
		case block.Type != "CERTIFICATE":
			return nil, fmt.Errorf("PEM block %q, want CERTIFICATE", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return certs, nil
}
