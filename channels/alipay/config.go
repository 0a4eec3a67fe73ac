package alipay

import (
	"fmt"
	"os"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
)

// FromConfig builds the channel of c, with the Alipay public key given inline or in a file.
// Errors name the config key.
func FromConfig(c config.Alipay) (*Channel, error) {
	text := c.AlipayPublicKey
	if c.AlipayPublicKeyFile != "" {
		b, err := os.ReadFile(c.AlipayPublicKeyFile)
		if err != nil {
			return nil, fmt.Errorf("config channels.alipay.alipay_public_key_file: %w", err)
		}
		text = string(b)
	}
	key, err := channels.ParseRSAPublicKey(text)
	if err != nil {
		return nil, fmt.Errorf("config channels.alipay.alipay_public_key: %w", err)
	}
	return New(c.AppID, c.SellerID, key), nil
}
