package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A channel's fee rate (channels.X.fee_rate, optional) is what the merchant's contract with the
// channel charges per payment, written as a decimal fraction: "0.006" is 0.6%. The bill run checks
// each payment line's fee against it (reconcile/fees.go). It is read exactly, into parts per
// million, never through a float.

// FeeRatePPMScale is one in parts per million: a rate of FeeRatePPMScale would be 100%.
const FeeRatePPMScale = 1_000_000

// ParseFeeRate reads a fee rate into parts per million: "0" or "0." and 1 to 6 digits ("0.006"
// is 6000, "0.0038" 3800). A rate of 1 or more, a sign, a percent sign, an exponent, a comma,
// more than 6 decimals and surrounding white space are refused: a guess at a rate is worse than
// a refused configuration.
func ParseFeeRate(s string) (int64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	switch {
	case s == "":
		return 0, errors.New("empty")
	case whole != "0":
		return 0, fmt.Errorf("%q: want a fraction below 1 written as 0.xxxxxx (0.006 is 0.6%%)", s)
	case !dot:
		return 0, nil
	case frac == "" || len(frac) > 6:
		return 0, fmt.Errorf("%q: want 1 to 6 digits after the point", s)
	}
	var ppm int64
	for i := range 6 {
		ppm *= 10
		if i < len(frac) {
			c := frac[i]
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("%q: want digits after the point", s)
			}
			ppm += int64(c - '0')
		}
	}
	return ppm, nil
}

// FeeRates is the fee rate of each channel that configures one, in parts per million. Validate
// has checked them; a channel absent from the map has none.
func (c Channels) FeeRates() map[string]int64 {
	rates := map[string]int64{}
	for channel, s := range c.feeRateStrings() {
		if ppm, err := ParseFeeRate(s); s != "" && err == nil {
			rates[channel] = ppm
		}
	}
	return rates
}

func (c Channels) feeRateStrings() map[string]string {
	return map[string]string{"alipay": c.Alipay.FeeRate, "wechatpay": c.WeChatPay.FeeRate, "stripe": c.Stripe.FeeRate,
		"unionpay": c.UnionPay.FeeRate}
}

// validateFeeRates checks each channel's fee_rate.
func (c Channels) validateFeeRates(bad func(key, format string, args ...any)) {
	rates := c.feeRateStrings()
	for _, channel := range slices.Sorted(maps.Keys(rates)) {
		s := rates[channel]
		if s == "" {
			continue
		}
		if _, err := ParseFeeRate(s); err != nil {
			bad("channels."+channel+".fee_rate", "%v", err)
		}
	}
}
