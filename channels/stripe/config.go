package stripe

import "github.com/paygw/paygw/config"

// FromConfig builds the channel of c.
func FromConfig(c config.Stripe) (*Channel, error) {
	return New(c.WebhookSecrets, c.Tolerance)
}
