package unionpay

import (
	"fmt"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
)

// FromConfig builds the channel of c, reading its root and intermediate certificate files.
// Errors name the config key.
func FromConfig(c config.UnionPay) (*Channel, error) {
	roots, err := channels.ReadCertificates(c.RootCertFile)
	if err != nil {
		return nil, fmt.Errorf("config channels.unionpay.root_cert_file: %w", err)
	}
	mids, err := channels.ReadCertificates(c.IntermediateCertFile)
	if err != nil {
		return nil, fmt.Errorf("config channels.unionpay.intermediate_cert_file: %w", err)
	}
	return New(Config{MerID: c.MerID, Roots: roots, Intermediates: mids, SignerName: c.SignerName})
}
