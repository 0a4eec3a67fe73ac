package channels

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
)

// Channel is the shape every channel shares: verify raw bytes and headers into an event, render
// the three replies in the channel's own words, and say how long applying an event may take.
type Channel interface {
	Name() string
	Verify(body []byte, header http.Header, now time.Time) (payment.Event, error)
	Reply(r payment.Reply) Response
	// ApplyTimeout bounds the work on one verified notification, well inside the time the channel
	// waits for our reply: past it we answer "retry" rather than let the channel give up on us
	// while we are still working.
	ApplyTimeout() time.Duration
}

var (
	_ Channel = (*Alipay)(nil)
	_ Channel = (*WeChatPay)(nil)
	_ Channel = (*Stripe)(nil)
	_ Channel = (*UnionPay)(nil)
)

// FromConfig builds every enabled channel, reading the key and certificate files it names.
// Errors name the config key.
func FromConfig(c config.Channels) ([]Channel, error) {
	var chs []Channel
	if a := c.Alipay; a.Enabled {
		text := a.AlipayPublicKey
		if a.AlipayPublicKeyFile != "" {
			b, err := os.ReadFile(a.AlipayPublicKeyFile)
			if err != nil {
				return nil, fmt.Errorf("config channels.alipay.alipay_public_key_file: %w", err)
			}
			text = string(b)
		}
		key, err := ParseRSAPublicKey(text)
		if err != nil {
			return nil, fmt.Errorf("config channels.alipay.alipay_public_key: %w", err)
		}
		chs = append(chs, NewAlipay(a.AppID, a.SellerID, key))
	}
	if w := c.WeChatPay; w.Enabled {
		wc := WeChatPayConfig{MchID: w.MchID, AppID: w.AppID, AppIDs: w.AppIDs, APIv3Key: w.APIv3Key, PublicKeyID: w.PlatformPublicKeyID}
		if w.PlatformPublicKeyFile != "" {
			b, err := os.ReadFile(w.PlatformPublicKeyFile)
			if err != nil {
				return nil, fmt.Errorf("config channels.wechatpay.platform_public_key_file: %w", err)
			}
			if wc.PublicKey, err = ParseRSAPublicKey(string(b)); err != nil {
				return nil, fmt.Errorf("config channels.wechatpay.platform_public_key_file: %w", err)
			}
		}
		for i, f := range w.PlatformCertificateFiles {
			certs, err := readCertificates(f)
			if err != nil {
				return nil, fmt.Errorf("config channels.wechatpay.platform_certificate_files[%d]: %w", i, err)
			}
			wc.Certificates = append(wc.Certificates, certs...)
		}
		ch, err := NewWeChatPay(wc)
		if err != nil {
			return nil, err
		}
		chs = append(chs, ch)
	}
	if s := c.Stripe; s.Enabled {
		ch, err := NewStripe(s.WebhookSecrets, s.Tolerance)
		if err != nil {
			return nil, err
		}
		chs = append(chs, ch)
	}
	if u := c.UnionPay; u.Enabled {
		roots, err := readCertificates(u.RootCertFile)
		if err != nil {
			return nil, fmt.Errorf("config channels.unionpay.root_cert_file: %w", err)
		}
		mids, err := readCertificates(u.IntermediateCertFile)
		if err != nil {
			return nil, fmt.Errorf("config channels.unionpay.intermediate_cert_file: %w", err)
		}
		ch, err := NewUnionPay(UnionPayConfig{MerID: u.MerID, Roots: roots, Intermediates: mids, SignerName: u.SignerName})
		if err != nil {
			return nil, err
		}
		chs = append(chs, ch)
	}
	return chs, nil
}

// readCertificates reads every PEM certificate in a file.
func readCertificates(path string) ([]*x509.Certificate, error) {
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
