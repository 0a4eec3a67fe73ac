package stripe

import (
	"fmt"
	"strings"

	"github.com/stripe/stripe-go/v82"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/money"
)

// Stripe's currencies, and the one place where Stripe counts an amount in other units than paygw.
//
// paygw counts every amount in the ISO 4217 minor units of its currency (money.Exponent). Stripe's
// API counts most currencies the same way, but not all (docs.stripe.com/currencies, "Zero-decimal
// currencies", "Three-decimal currencies", "Special cases"):
//
//   - ISK: a two-decimal currency in Stripe's API (100 is 1 króna; since April 2023 every ISK
//     amount must be a multiple of 100), zero-decimal in ISO 4217;
//   - MGA: zero-decimal in Stripe's API, two-decimal in ISO 4217.
//
// HUF and TWD are two-decimal in both (Stripe asks multiples of 100 only of payouts); UGX is
// zero-decimal in both; the three-decimal BHD, JOD, KWD, OMR, TND agree. Amounts from Stripe's
// notifications and queries pass through fromStripe at the edge, so the rest of paygw never sees
// Stripe's units. Stripe's bill reports state major units, and need no rule (bills/stripe.go).

// stripeExponent is the number of decimals of the minor unit Stripe's API counts code in.
func stripeExponent(code string) int {
	switch code {
	case "BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF":
		return 0
	case "BHD", "JOD", "KWD", "OMR", "TND":
		return 3
	}
	return 2
}

// fromStripe turns an amount in Stripe's minor units of code into paygw's (ISO 4217). An ISK
// amount with a fraction of a króna has no ISO 4217 amount: it is refused as malformed.
func fromStripe(amount int64, code string) (int64, error) {
	iso, ok := money.Exponent(code)
	if !ok { // no order is in it: kept as stated, it is recorded and matches nothing
		return amount, nil
	}
	for e := stripeExponent(code); e > iso; e-- {
		if amount%10 != 0 {
			return 0, fmt.Errorf("%w: stripe: %d (Stripe's minor units of %s) is no whole ISO 4217 amount", channels.ErrMalformed, amount, code)
		}
		amount /= 10
	}
	for e := stripeExponent(code); e < iso; e++ {
		amount *= 10 // bounded by channels.MaxFen before and after: the callers check
	}
	return amount, nil
}

// ToStripe turns an amount in paygw's minor units of code (ISO 4217) into Stripe's: what Stripe's
// API states for it, the inverse of fromStripe. ok is false when Stripe cannot state the amount
// (an MGA amount with a fraction of an ariary) or code is no ISO 4217 code. paygw reads what
// Stripe says and never needs this; it is what a caller of Stripe's API sends, and what the
// history check's Stripe states.
func ToStripe(amount int64, code string) (stripeAmount int64, ok bool) {
	iso, ok := money.Exponent(code)
	if !ok {
		return 0, false
	}
	for e := iso; e > stripeExponent(code); e-- {
		if amount%10 != 0 {
			return 0, false
		}
		amount /= 10
	}
	for e := iso; e < stripeExponent(code); e++ {
		amount *= 10
	}
	return amount, true
}

// supported are the presentment currencies Stripe takes: stripe-go's list, and the three-decimal
// currencies Stripe's documentation adds to it.
var supported = func() map[string]bool {
	m := map[string]bool{"BHD": true, "JOD": true, "KWD": true, "OMR": true, "TND": true}
	for _, c := range []stripe.Currency{
		stripe.CurrencyAED, stripe.CurrencyAFN, stripe.CurrencyALL, stripe.CurrencyAMD,
		stripe.CurrencyANG, stripe.CurrencyAOA, stripe.CurrencyARS, stripe.CurrencyAUD,
		stripe.CurrencyAWG, stripe.CurrencyAZN, stripe.CurrencyBAM, stripe.CurrencyBBD,
		stripe.CurrencyBDT, stripe.CurrencyBGN, stripe.CurrencyBIF, stripe.CurrencyBMD,
		stripe.CurrencyBND, stripe.CurrencyBOB, stripe.CurrencyBRL, stripe.CurrencyBSD,
		stripe.CurrencyBWP, stripe.CurrencyBZD, stripe.CurrencyCAD, stripe.CurrencyCDF,
		stripe.CurrencyCHF, stripe.CurrencyCLP, stripe.CurrencyCNY, stripe.CurrencyCOP,
		stripe.CurrencyCRC, stripe.CurrencyCVE, stripe.CurrencyCZK, stripe.CurrencyDJF,
		stripe.CurrencyDKK, stripe.CurrencyDOP, stripe.CurrencyDZD, stripe.CurrencyEEK,
		stripe.CurrencyEGP, stripe.CurrencyETB, stripe.CurrencyEUR, stripe.CurrencyFJD,
		stripe.CurrencyFKP, stripe.CurrencyGBP, stripe.CurrencyGEL, stripe.CurrencyGIP,
		stripe.CurrencyGMD, stripe.CurrencyGNF, stripe.CurrencyGTQ, stripe.CurrencyGYD,
		stripe.CurrencyHKD, stripe.CurrencyHNL, stripe.CurrencyHRK, stripe.CurrencyHTG,
		stripe.CurrencyHUF, stripe.CurrencyIDR, stripe.CurrencyILS, stripe.CurrencyINR,
		stripe.CurrencyISK, stripe.CurrencyJMD, stripe.CurrencyJPY, stripe.CurrencyKES,
		stripe.CurrencyKGS, stripe.CurrencyKHR, stripe.CurrencyKMF, stripe.CurrencyKRW,
		stripe.CurrencyKYD, stripe.CurrencyKZT, stripe.CurrencyLAK, stripe.CurrencyLBP,
		stripe.CurrencyLKR, stripe.CurrencyLRD, stripe.CurrencyLSL, stripe.CurrencyLTL,
		stripe.CurrencyLVL, stripe.CurrencyMAD, stripe.CurrencyMDL, stripe.CurrencyMGA,
		stripe.CurrencyMKD, stripe.CurrencyMNT, stripe.CurrencyMOP, stripe.CurrencyMRO,
		stripe.CurrencyMUR, stripe.CurrencyMVR, stripe.CurrencyMWK, stripe.CurrencyMXN,
		stripe.CurrencyMYR, stripe.CurrencyMZN, stripe.CurrencyNAD, stripe.CurrencyNGN,
		stripe.CurrencyNIO, stripe.CurrencyNOK, stripe.CurrencyNPR, stripe.CurrencyNZD,
		stripe.CurrencyPAB, stripe.CurrencyPEN, stripe.CurrencyPGK, stripe.CurrencyPHP,
		stripe.CurrencyPKR, stripe.CurrencyPLN, stripe.CurrencyPYG, stripe.CurrencyQAR,
		stripe.CurrencyRON, stripe.CurrencyRSD, stripe.CurrencyRUB, stripe.CurrencyRWF,
		stripe.CurrencySAR, stripe.CurrencySBD, stripe.CurrencySCR, stripe.CurrencySEK,
		stripe.CurrencySGD, stripe.CurrencySHP, stripe.CurrencySLL, stripe.CurrencySOS,
		stripe.CurrencySRD, stripe.CurrencySTD, stripe.CurrencySVC, stripe.CurrencySZL,
		stripe.CurrencyTHB, stripe.CurrencyTJS, stripe.CurrencyTOP, stripe.CurrencyTRY,
		stripe.CurrencyTTD, stripe.CurrencyTWD, stripe.CurrencyTZS, stripe.CurrencyUAH,
		stripe.CurrencyUGX, stripe.CurrencyUSD, stripe.CurrencyUYU, stripe.CurrencyUZS,
		stripe.CurrencyVEF, stripe.CurrencyVND, stripe.CurrencyVUV, stripe.CurrencyWST,
		stripe.CurrencyXAF, stripe.CurrencyXCD, stripe.CurrencyXOF, stripe.CurrencyXPF,
		stripe.CurrencyYER, stripe.CurrencyZAR, stripe.CurrencyZMW,
	} {
		m[strings.ToUpper(string(c))] = true
	}
	return m
}()

// AcceptsCurrency accepts any ISO 4217 currency Stripe takes payments in.
func (s *Channel) AcceptsCurrency(code string) error {
	if supported[code] && money.Valid(code) {
		return nil
	}
	return channels.RefuseCurrency(s.Name(), code)
}
