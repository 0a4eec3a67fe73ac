package channels

import (
	"errors"
	"fmt"
)

// ErrCurrency means a channel takes no payments in the currency asked: the order or the attempt
// is refused (400), nothing stored.
var ErrCurrency = errors.New("currency not taken by the channel")

// Currencies is a channel's rule on the currencies it takes payments in. Each channel's package
// holds its own rule; the order service asks it when an order or an attempt names the channel.
type Currencies interface {
	// AcceptsCurrency returns nil for an ISO 4217 code (upper case) the channel takes payments
	// in, and ErrCurrency, wrapped with a detail naming the channel and the currency, otherwise.
	AcceptsCurrency(code string) error
}

// CNYOnly is the rule of a channel that takes yuan alone (Alipay, WeChat Pay, UnionPay as
// paygw integrates them: their notifications and bills state CNY fen).
func CNYOnly(channel, code string) error {
	if code == "CNY" {
		return nil
	}
	return RefuseCurrency(channel, code)
}

// RefuseCurrency is ErrCurrency naming channel and code.
func RefuseCurrency(channel, code string) error {
	return fmt.Errorf("%w: channel %s takes no payments in %q", ErrCurrency, channel, code)
}
