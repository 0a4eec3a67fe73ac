package config

import (
	"fmt"
	"math/big"
	"strings"
	"testing"
)

func TestParseFeeRate(t *testing.T) {
	ok := map[string]int64{"0": 0, "0.0": 0, "0.006": 6000, "0.0038": 3800, "0.6": 600000, "0.000001": 1, "0.999999": 999999,
		"0.00600": 6000}
	for s, want := range ok {
		if got, err := ParseFeeRate(s); err != nil || got != want {
			t.Errorf("ParseFeeRate(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1", "1.0", "0.0000001", ".006", "0.", "00.006", "-0.006", "+0.006", "0.6%", "6e-3",
		"0,006", " 0.006", "0.006 ", "0.00a", "0x1", "１"} {
		if got, err := ParseFeeRate(s); err == nil {
			t.Errorf("ParseFeeRate(%q) = %d; want an error", s, got)
		}
	}
}

// A fee_rate Validate refuses is named by its key; one it accepts is in FeeRates.
func TestFeeRateConfig(t *testing.T) {
	c, err := Load(writeConfig(t, "channels:\n  alipay: {fee_rate: \"0.006\"}\n  unionpay: {fee_rate: \"0\"}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Channels.FeeRates(); len(got) != 2 || got["alipay"] != 6000 || got["unionpay"] != 0 {
		t.Fatalf("FeeRates %v: want alipay 6000 and unionpay 0 only", got)
	}
	for _, rate := range []string{"0.6%", "1.5", "0.0000001"} {
		_, err := Load(writeConfig(t, "channels:\n  wechatpay: {fee_rate: \""+rate+"\"}\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "channels.wechatpay.fee_rate") {
			t.Errorf("fee_rate %q: error %v, want one naming channels.wechatpay.fee_rate", rate, err)
		}
	}
}

// FuzzParseFeeRate holds ParseFeeRate to math/big.Rat: what it accepts is the input's exact
// value in parts per million, in [0, 1); and every rate of its grammar, written back, reads the same.
func FuzzParseFeeRate(f *testing.F) {
	for _, s := range []string{"0.006", "0", "0.0038", "1", "0.0000001", "6e-3", "0.6%", "-0.1", "0.", ".5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ppm, err := ParseFeeRate(s)
		if err != nil {
			return
		}
		if ppm < 0 || ppm >= FeeRatePPMScale {
			t.Fatalf("%q: %d ppm out of [0, 1)", s, ppm)
		}
		r, ok := new(big.Rat).SetString(s)
		want := new(big.Rat).Mul(r, big.NewRat(FeeRatePPMScale, 1))
		if !ok || !want.IsInt() || want.Num().Cmp(big.NewInt(ppm)) != 0 {
			t.Fatalf("%q read as %d ppm", s, ppm)
		}
		back := fmt.Sprintf("0.%06d", ppm)
		if again, err := ParseFeeRate(back); err != nil || again != ppm {
			t.Fatalf("%q: %d ppm, written back %q reads %d, %v", s, ppm, back, again, err)
		}
	})
}
