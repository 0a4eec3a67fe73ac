package wechatpay

import (
	"fmt"
	"os"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
)

// FromConfig builds the channel of c, reading its platform public key or certificate files.
// Errors name the config key.
func FromConfig(w config.WeChatPay) (*Channel, error) {
	wc := Config{MchID: w.MchID, AppID: w.AppID, AppIDs: w.AppIDs, APIv3Key: w.APIv3Key, PublicKeyID: w.PlatformPublicKeyID}
	if w.PlatformPublicKeyFile != "" {
		b, err := os.ReadFile(w.PlatformPublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("config channels.platform_public_key_file: %w", err)
		}
		if wc.PublicKey, err = channels.ParseRSAPublicKey(string(b)); err != nil {
			return nil, fmt.Errorf("config channels.platform_public_key_file: %w", err)
		}
	}
	for i, f := range w.PlatformCertificateFiles {
		certs, err := channels.ReadCertificates(f)
		if err != nil {
			return nil, fmt.Errorf("config channels.platform_certificate_files[%d]: %w", i, err)
		}
		wc.Certificates = append(wc.Certificates, certs...)
	}
	return New(wc)
}
