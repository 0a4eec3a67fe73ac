package orders

import (
	"bytes"
	"errors"
	"testing"

	"github.com/paygw/paygw/money"
)

func TestCanonical(t *testing.T) {
	cases := []struct{ name, in, out string }{
		{"sorted keys, no space", ` {"b":1, "a":[true,null,"x"]} `, `{"a":[true,null,"x"],"b":1}`},
		{"nested objects sorted", `{"z":{"y":1,"x":2}}`, `{"z":{"x":2,"y":1}}`},
		{"numbers keep their text", `{"n":1.50,"m":1e3}`, `{"m":1e3,"n":1.50}`},
		{"strings re-escaped", `{"s":"\u0041\n"}`, `{"s":"A\n"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical([]byte(tc.in))
			if err != nil || string(got) != tc.out {
				t.Fatalf("Canonical(%s) = %s, %v; want %s", tc.in, got, err, tc.out)
			}
		})
	}
	bad := map[string]string{
		"duplicate key":  `{"a":1,"a":2}`,
		"nested dup":     `{"o":{"k":1,"k":1}}`,
		"trailing data":  `{"a":1} {}`,
		"invalid UTF-8":  "{\"a\":\"\xff\"}",
		"truncated":      `{"a":`,
		"empty":          ``,
		"too deep":       string(bytes.Repeat([]byte("["), 40)) + string(bytes.Repeat([]byte("]"), 40)),
		"bare word":      `nope`,
		"non-string key": `{1:2}`,
		"trailing comma": `{"a":1,}`,
	}
	for name, in := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := Canonical([]byte(in)); !errors.Is(err, ErrBadJSON) {
				t.Fatalf("Canonical(%q) err = %v, want ErrBadJSON", in, err)
			}
		})
	}
}

func TestParseNewOrder(t *testing.T) {
	good := `{"num":2,"sku":"A-100","user_id":7}`
	if o, err := ParseNewOrder([]byte(good)); err != nil || o != (NewOrder{UserID: 7, SKU: "A-100", Num: 2}) {
		t.Fatalf("ParseNewOrder(%s) = %+v, %v", good, o, err)
	}
	for in, want := range map[string]NewOrder{
		`{"amount_fen":1234,"currency":"KWD","user_id":7}`:                            {UserID: 7, AmountFen: 1234, Currency: "KWD"},
		`{"amount_fen":1,"currency":"JPY","merchant_order_id":"订单 1","user_id":7}`:    {UserID: 7, AmountFen: 1, Currency: "JPY", MerchantOrderID: "订单 1"},
		`{"merchant_order_id":"M","num":1,"sku":"A","user_id":7}`:                     {UserID: 7, SKU: "A", Num: 1, MerchantOrderID: "M"},
		`{"amount_fen":100000000000,"currency":"CNY","user_id":7,"channel":"alipay"}`: {UserID: 7, AmountFen: MaxAmountFen, Currency: "CNY", Channel: "alipay"},
	} {
		if o, err := ParseNewOrder([]byte(in)); err != nil || o != want {
			t.Errorf("ParseNewOrder(%s) = %+v, %v; want %+v", in, o, err, want)
		}
	}
	for _, in := range []string{
		`{"amount_fen":1,"currency":"CNY","user_id":1,"num":1}`, `{"amount_fen":1,"currency":"CNY","user_id":1,"sku":""}`,
		`{"amount_fen":1,"currency":"Cny","user_id":1}`, `{"amount_fen":1,"currency":"XAU","user_id":1}`,
		`{"amount_fen":100000000001,"currency":"CNY","user_id":1}`, `{"amount_fen":1,"user_id":1}`,
		`{"num":1,"sku":"A","user_id":1,"amount_fen":0}`, `{"num":1,"sku":"A","user_id":1,"currency":""}`,
		`{"num":1,"sku":"A","user_id":1,"merchant_order_id":""}`, `{"num":1,"sku":"A","user_id":1,"merchant_order_id":"a\u0000"}`,
		`{"num":1,"sku":"A","user_id":1,"merchant_order_id":null}`,
		`{"num":0,"sku":"A","user_id":1}`, `{"num":1,"sku":"","user_id":1}`, `{"num":1,"sku":"A","user_id":0}`,
		`{"num":1.5,"sku":"A","user_id":1}`, `{"num":1,"sku":"A;DROP","user_id":1}`, `{"num":1,"sku":"A","user_id":1,"x":1}`,
		`{"num":99999999999999999999,"sku":"A","user_id":1}`, `[]`, `{"num":"1","sku":"A","user_id":1}`,
	} {
		if _, err := ParseNewOrder([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseNewOrder(%s) err = %v, want ErrInvalid", in, err)
		}
	}
}

// FuzzCreateOrderBody: whatever the body, canonicalisation is stable (canonical of canonical is
// itself), and an accepted order is always within bounds.
func FuzzCreateOrderBody(f *testing.F) {
	for _, s := range []string{`{"user_id":123,"sku":"A-100","num":1}`, `{"a":[1,{"b":null}]}`, `{"a":1,"a":2}`, `[`, `"\ud800"`,
		`{"user_id":1,"amount_fen":1234,"currency":"KWD","merchant_order_id":"M-1"}`, `{"user_id":1,"amount_fen":1,"currency":"usd"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := Canonical(body)
		if err != nil {
			if !errors.Is(err, ErrBadJSON) {
				t.Fatalf("error %v does not wrap ErrBadJSON", err)
			}
			return
		}
		c2, err := Canonical(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("canonical form not stable: %s -> %s, %v", c, c2, err)
		}
		o, err := ParseNewOrder(c)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		fromStock := o.Num >= 1 && o.Num <= 10000 && skuPattern.MatchString(o.SKU) && o.AmountFen == 0 && o.Currency == ""
		stockless := o.SKU == "" && o.Num == 0 && o.AmountFen >= 1 && o.AmountFen <= MaxAmountFen && money.Valid(o.Currency)
		if o.UserID <= 0 || !(fromStock || stockless) || (o.MerchantOrderID != "" && !ValidMerchantOrderID(o.MerchantOrderID)) {
			t.Fatalf("accepted an out-of-bounds order %+v", o)
		}
	})
}
