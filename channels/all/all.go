// Package all builds the enabled channels from the configuration: each channel's verifier, trade
// querier and bill downloader, from the channel packages. It is the one place that knows them
// all; package channels, which they import, does not.
package all

import (
	"errors"
	"net/http"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/alipay"
	"github.com/paygw/paygw/channels/stripe"
	"github.com/paygw/paygw/channels/unionpay"
	"github.com/paygw/paygw/channels/wechatpay"
	"github.com/paygw/paygw/config"
)

var (
	_ channels.Channel = (*alipay.Channel)(nil)
	_ channels.Channel = (*wechatpay.Channel)(nil)
	_ channels.Channel = (*stripe.Channel)(nil)
	_ channels.Channel = (*unionpay.Channel)(nil)
)

// FromConfig builds every enabled channel, reading the key and certificate files it names.
// Errors name the config key.
func FromConfig(c config.Channels) ([]channels.Channel, error) {
	var chs []channels.Channel
	add := func(ch channels.Channel, err error) error {
		if err == nil {
			chs = append(chs, ch)
		}
		return err
	}
	var err error
	if c.Alipay.Enabled {
		err = add(alipay.FromConfig(c.Alipay))
	}
	if c.WeChatPay.Enabled && err == nil {
		err = add(wechatpay.FromConfig(c.WeChatPay))
	}
	if c.Stripe.Enabled && err == nil {
		err = add(stripe.FromConfig(c.Stripe))
	}
	if c.UnionPay.Enabled && err == nil {
		err = add(unionpay.FromConfig(c.UnionPay))
	}
	if err != nil {
		return nil, err
	}
	return chs, nil
}

// QueriersFromConfig builds the trade querier of every enabled channel from its outbound
// configuration, over hc. A channel whose merchant-side credentials are missing still verifies
// notifications: it is left out, and its ErrNoCredentials error (naming the key) is in skipped.
// Any other error is a configuration mistake and stops the start.
func QueriersFromConfig(c config.Channels, chs []channels.Channel, hc *http.Client) (qs []channels.Querier, skipped []error, err error) {
	for _, ch := range chs {
		var q channels.Querier
		var err error
		switch v := ch.(type) {
		case *alipay.Channel:
			q, err = alipay.NewQuerier(c.Alipay, v, hc)
		case *wechatpay.Channel:
			q, err = wechatpay.NewQuerier(c.WeChatPay, v, hc)
		case *stripe.Channel:
			q, err = stripe.NewQuerier(c.Stripe, hc)
		case *unionpay.Channel:
			q, err = unionpay.NewQuerier(c.UnionPay, v, hc)
		default:
			continue
		}
		if skipped, err = keep(q, err, &qs, skipped); err != nil {
			return nil, nil, err
		}
	}
	return qs, skipped, nil
}

// BillDownloadersFromConfig builds the bill downloader of every enabled channel, as
// QueriersFromConfig builds the queriers: a channel without outbound credentials is left out and
// its ErrNoCredentials error is in skipped; any other error stops the start. stripeDay is the
// zone of Stripe's day (reconcile.stripe_timezone).
func BillDownloadersFromConfig(c config.Channels, chs []channels.Channel, stripeDay *time.Location, hc *http.Client) (ds []channels.BillDownloader, skipped []error, err error) {
	for _, ch := range chs {
		var d channels.BillDownloader
		var err error
		switch v := ch.(type) {
		case *alipay.Channel:
			d, err = alipay.NewBillDownloader(c.Alipay, v, hc)
		case *wechatpay.Channel:
			d, err = wechatpay.NewBillDownloader(c.WeChatPay, v, hc)
		case *stripe.Channel:
			d, err = stripe.NewBillDownloader(c.Stripe, stripeDay, hc)
		case *unionpay.Channel:
			d, err = unionpay.NewBillDownloader(c.UnionPay, v, hc)
		default:
			continue
		}
		if skipped, err = keep(d, err, &ds, skipped); err != nil {
			return nil, nil, err
		}
	}
	return ds, skipped, nil
}

// keep files what a constructor returned: built (into built), skipped for want of credentials
// (ErrNoCredentials, into skipped), or an error that stops the start (returned).
func keep[T any](v T, err error, built *[]T, skipped []error) ([]error, error) {
	switch {
	case errors.Is(err, channels.ErrNoCredentials):
		return append(skipped, err), nil
	case err != nil:
		return skipped, err
	}
	*built = append(*built, v)
	return skipped, nil
}
