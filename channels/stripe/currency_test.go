package stripe

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/money"
)

// The currencies where Stripe's API counts otherwise than ISO 4217 are exactly the ones the
// package comment names: a currency added to Stripe's lists, or an ISO 4217 change in
// bojanz/currency, fails here rather than paying an order ten or a hundred times over.
func TestStripeUnitsDifferOnlyForISKAndMGA(t *testing.T) {
	var differ []string
	for code := range supported {
		if iso, ok := money.Exponent(code); ok && iso != stripeExponent(code) {
			differ = append(differ, code)
		}
	}
	sort.Strings(differ)
	if got := strings.Join(differ, " "); got != "ISK MGA" {
		t.Fatalf("Stripe's units differ from ISO 4217 for %q, want \"ISK MGA\"", got)
	}
}

func TestFromStripe(t *testing.T) {
	cases := map[string]struct {
		amount int64
		code   string
		want   int64
		bad    bool
	}{
		"USD as is":             {1999, "USD", 1999, false},
		"JPY as is":             {5000, "JPY", 5000, false},
		"KWD as is":             {1234, "KWD", 1234, false},
		"HUF as is":             {100000, "HUF", 100000, false},
		"TWD as is":             {100000, "TWD", 100000, false},
		"UGX as is":             {5000, "UGX", 5000, false},
		"ISK hundredths":        {100000, "ISK", 1000, false},
		"ISK zero":              {0, "ISK", 0, false},
		"ISK a fraction":        {100050, "ISK", 0, true},
		"ISK a tenth":           {10, "ISK", 0, true},
		"MGA whole ariary":      {500, "MGA", 50000, false},
		"not ISO 4217: as is":   {77, "XYZ", 77, false},
		"MGA largest, no wrap":  {math.MaxInt64 / 1000, "MGA", math.MaxInt64 / 1000 * 100, false},
		"ISK negative fraction": {-150, "ISK", 0, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := fromStripe(c.amount, c.code)
			if c.bad {
				if !errors.Is(err, channels.ErrMalformed) {
					t.Fatalf("fromStripe(%d, %s) = %d, %v; want ErrMalformed", c.amount, c.code, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("fromStripe(%d, %s) = %d, %v; want %d", c.amount, c.code, got, err, c.want)
			}
		})
	}
}

func TestStripeAcceptsCurrency(t *testing.T) {
	s := newTestStripe(t)
	for code, ok := range map[string]bool{
		"USD": true, "CNY": true, "JPY": true, "KWD": true, "BHD": true, "ISK": true, "MGA": true, "EUR": true,
		"IQD": false, // ISO 4217, not a Stripe presentment currency
		"XAU": false, "ABC": false, "usd": false, "": false,
		"EEK": false, // in stripe-go's list, withdrawn from ISO 4217
	} {
		err := s.AcceptsCurrency(code)
		if (err == nil) != ok || (err != nil && !errors.Is(err, channels.ErrCurrency)) {
			t.Errorf("AcceptsCurrency(%q) = %v, want ok=%v", code, err, ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "stripe") || !strings.Contains(err.Error(), `"`+code+`"`)) {
			t.Errorf("AcceptsCurrency(%q) = %q: name the channel and the currency", code, err)
		}
	}
}

// The bill's lines are in paygw's units too, as the notifications' are.
func TestStripeBillRowInISOUnits(t *testing.T) {
	charge := &stripe.BalanceTransaction{ID: "txn_1", Type: stripe.BalanceTransactionTypeCharge, Created: 1714550400,
		Source: &stripe.BalanceTransactionSource{Charge: &stripe.Charge{ID: "ch_1", Amount: 100000, Currency: "isk",
			PaymentIntent: &stripe.PaymentIntent{ID: "pi_1", Metadata: map[string]string{"trade_no": "T1"}}}}}
	refund := &stripe.BalanceTransaction{ID: "txn_2", Type: stripe.BalanceTransactionTypeRefund, Created: 1714550400,
		Source: &stripe.BalanceTransactionSource{Refund: &stripe.Refund{ID: "re_2", Amount: 5, Currency: "mga",
			PaymentIntent: &stripe.PaymentIntent{ID: "pi_2", Metadata: map[string]string{"trade_no": "T2"}}}}}
	for bt, want := range map[*stripe.BalanceTransaction]string{charge: "T1 pi_1 PAY 1000 ISK", refund: "T2 pi_2 REFUND 500 MGA"} {
		row, ok, err := stripeBillRow(bt, time.UTC)
		if err != nil || !ok || strings.Join(row[:5], " ") != want {
			t.Errorf("%s: %q, %v, %v; want %q", bt.ID, row, ok, err, want)
		}
	}
	charge.Source.Charge.Amount = 100050 // a fraction of a krona: no ISO 4217 amount
	if _, _, err := stripeBillRow(charge, time.UTC); !errors.Is(err, channels.ErrMalformed) {
		t.Fatalf("fractional ISK: %v, want ErrMalformed", err)
	}
}

// ToStripe is fromStripe's inverse: every amount Stripe can state of a currency comes back as it
// was, and the rules of the package comment hold (ISK in hundredths, MGA whole).
func TestToStripe(t *testing.T) {
	cases := map[string]struct {
		amount int64
		code   string
		want   int64
		ok     bool
	}{
		"USD as is":            {1999, "USD", 1999, true},
		"JPY as is":            {5000, "JPY", 5000, true},
		"KWD as is":            {1234, "KWD", 1234, true},
		"ISK hundredths":       {1000, "ISK", 100000, true},
		"MGA whole ariary":     {50000, "MGA", 500, true},
		"MGA a fraction":       {50050, "MGA", 0, false},
		"not ISO 4217":         {77, "XYZ", 0, false},
		"MGA negative, whole":  {-200, "MGA", -2, true},
		"ISK negative as well": {-3, "ISK", -300, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ToStripe(c.amount, c.code)
			if ok != c.ok || ok && got != c.want {
				t.Fatalf("ToStripe(%d, %s) = %d, %v; want %d, %v", c.amount, c.code, got, ok, c.want, c.ok)
			}
		})
	}
	for code := range supported {
		if !money.Valid(code) {
			continue
		}
		for _, amount := range []int64{0, 1, 7, 100, 1999, 50000, 123456700} {
			s, ok := ToStripe(amount, code)
			if !ok {
				continue
			}
			if back, err := fromStripe(s, code); err != nil || back != amount {
				t.Errorf("fromStripe(ToStripe(%d, %s) = %d) = %d, %v", amount, code, s, back, err)
			}
		}
	}
}
