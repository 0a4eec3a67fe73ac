// Package money is paygw's one currency table: which ISO 4217 codes exist, how many minor-unit
// digits each has, and how an amount in minor units reads. The table is bojanz/currency's (ISO
// 4217 data generated from CLDR); nothing else in paygw keeps one.
//
// paygw counts every amount as an integer in the currency's ISO 4217 minor units (the `*_fen`
// fields keep their name). Where a channel counts a currency otherwise (Stripe's ISK and MGA), the
// channel's package converts at its edge and names the rule there.
package money

import (
	"fmt"

	"github.com/bojanz/currency"
)

// Default is the currency of an order or stock that names none.
const Default = "CNY"

// Valid reports whether code is an ISO 4217 currency code paygw knows: three upper-case letters
// in the table. The table leaves out funds and metals without minor units (XAU, XXX, XTS ...).
func Valid(code string) bool {
	if len(code) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if code[i] < 'A' || code[i] > 'Z' {
			return false
		}
	}
	_, ok := currency.GetDigits(code)
	return ok
}

// Exponent is the number of minor-unit digits of code (CNY 2, JPY 0, KWD 3, ISK 0); ok is false
// for a code that is not Valid.
func Exponent(code string) (exp int, ok bool) {
	if !Valid(code) {
		return 0, false
	}
	d, _ := currency.GetDigits(code)
	return int(d), true
}

// Format renders minor units of code exactly, without floating point: 1999 CNY is "19.99 CNY",
// 1999 JPY "1999 JPY", 1234 KWD "1.234 KWD". An unknown code is shown as raw minor units.
func Format(minor int64, code string) string {
	exp, ok := Exponent(code)
	if !ok {
		return fmt.Sprintf("%d minor units of %q", minor, code)
	}
	sign := ""
	u := uint64(minor)
	if minor < 0 {
		sign, u = "-", uint64(-minor) // -MinInt64 wraps to itself, and as uint64 it is right
	}
	if exp == 0 {
		return fmt.Sprintf("%s%d %s", sign, u, code)
	}
	pow := uint64(1)
	for range exp {
		pow *= 10
	}
	return fmt.Sprintf("%s%d.%0*d %s", sign, u/pow, exp, u%pow, code)
}
