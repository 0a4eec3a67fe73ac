package channels

import (
	"errors"
	"net/http"

	"github.com/paygw/paygw/config"
)

// QueriersFromConfig builds the trade querier of every enabled channel from its outbound
// configuration, over hc. A channel whose merchant-side credentials are missing still verifies
// notifications: it is left out, and its ErrNoCredentials error (naming the key) is in skipped.
// Any other error is a configuration mistake and stops the start.
func QueriersFromConfig(c config.Channels, chs []Channel, hc *http.Client) (qs []Querier, skipped []error, err error) {
	add := func(q Querier, err error) error {
		switch {
		case errors.Is(err, ErrNoCredentials):
			skipped = append(skipped, err)
		case err != nil:
			return err
		default:
			qs = append(qs, q)
		}
		return nil
	}
	for _, ch := range chs {
		var err error
		switch v := ch.(type) {
		case *Alipay:
			err = add(NewAlipayQuerier(c.Alipay, v, hc))
		case *WeChatPay:
			err = add(NewWeChatPayQuerier(c.WeChatPay, v, hc))
		case *Stripe:
			err = add(NewStripeQuerier(c.Stripe, hc))
		case *UnionPay:
			err = add(NewUnionPayQuerier(c.UnionPay, v, hc))
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return qs, skipped, nil
}
