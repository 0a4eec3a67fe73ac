package money

import (
	"math"
	"testing"

	"github.com/bojanz/currency"
)

func TestExponent(t *testing.T) {
	cases := map[string]struct {
		code string
		exp  int
		ok   bool
	}{
		"CNY":                 {"CNY", 2, true},
		"USD":                 {"USD", 2, true},
		"JPY":                 {"JPY", 0, true},
		"KRW":                 {"KRW", 0, true},
		"KWD three":           {"KWD", 3, true},
		"BHD three":           {"BHD", 3, true},
		"ISK zero in ISO":     {"ISK", 0, true},
		"UGX zero":            {"UGX", 0, true},
		"HUF two":             {"HUF", 2, true},
		"TWD two":             {"TWD", 2, true},
		"MGA two in ISO":      {"MGA", 2, true},
		"CLF four":            {"CLF", 4, true},
		"lower case":          {"usd", 0, false},
		"mixed case":          {"Usd", 0, false},
		"unknown":             {"ABC", 0, false},
		"metal":               {"XAU", 0, false},
		"test code":           {"XTS", 0, false},
		"empty":               {"", 0, false},
		"too long":            {"USDD", 0, false},
		"non-ASCII":           {"ÜSD", 0, false},
		"withdrawn (ZWL)":     {"ZWL", 0, false},
		"spaces":              {"US ", 0, false},
		"digits (numeric id)": {"840", 0, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			exp, ok := Exponent(c.code)
			if exp != c.exp || ok != c.ok {
				t.Fatalf("Exponent(%q) = %d, %v; want %d, %v", c.code, exp, ok, c.exp, c.ok)
			}
			if Valid(c.code) != c.ok {
				t.Fatalf("Valid(%q) = %v, want %v", c.code, !c.ok, c.ok)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	cases := map[string]struct {
		minor int64
		code  string
		want  string
	}{
		"yuan":             {1999, "CNY", "19.99 CNY"},
		"one fen":          {1, "CNY", "0.01 CNY"},
		"zero":             {0, "USD", "0.00 USD"},
		"negative":         {-1999, "CNY", "-19.99 CNY"},
		"negative fen":     {-5, "CNY", "-0.05 CNY"},
		"yen":              {1999, "JPY", "1999 JPY"},
		"negative yen":     {-7, "JPY", "-7 JPY"},
		"dinar":            {1234, "KWD", "1.234 KWD"},
		"dinar small":      {5, "KWD", "0.005 KWD"},
		"krona whole":      {1000, "ISK", "1000 ISK"},
		"four digits":      {12345, "CLF", "1.2345 CLF"},
		"largest":          {math.MaxInt64, "USD", "92233720368547758.07 USD"},
		"smallest":         {math.MinInt64, "USD", "-92233720368547758.08 USD"},
		"unknown currency": {1999, "ABC", `1999 minor units of "ABC"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Format(c.minor, c.code); got != c.want {
				t.Fatalf("Format(%d, %q) = %q, want %q", c.minor, c.code, got, c.want)
			}
		})
	}
}

// TestFormatAgreesWithLibrary cross-checks Format against bojanz/currency's own decimal
// rendering for every code in the table.
func TestFormatAgreesWithLibrary(t *testing.T) {
	for _, code := range currency.GetCurrencyCodes() {
		if !Valid(code) {
			t.Fatalf("%s is in the library's table but not Valid", code)
		}
		for _, n := range []int64{0, 1, 7, 1999, 123456789, -1999} {
			a, err := currency.NewAmountFromInt64(n, code)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := Format(n, code), a.Number()+" "+code; got != want {
				t.Fatalf("Format(%d, %s) = %q, library says %q", n, code, got, want)
			}
		}
	}
}
