package reconcile

import (
	"math/big"
	"testing"
)

// feeAt is the rate times the base, rounded half up, exact up to the largest amount a bill holds.
func TestFeeAt(t *testing.T) {
	cases := []struct{ base, ppm, want int64 }{
		{600, 6000, 4},  // a real WeChat line: 6.00 at 0.60% is 0.04 (3.6 fen)
		{1, 10000, 0},   // a real WeChat line: 0.01 at 1.00% is 0.00 (0.01 fen)
		{1000, 6000, 6}, // exact
		{250, 6000, 2},  // 1.5 fen: half up
		{2500, 2000, 5}, // exact
		{249, 6000, 1},  // 1.494
		{-600, 6000, 4}, // a base is an amount: its sign does not count
		{1000, 0, 0},    // a rate of 0 charges nothing
		{100_000_000_000_000, 999_999, 99_999_900_000_000},
		{99_999_999_999_999, 6000, 600_000_000_000}, // 599999999999.994
	}
	for _, c := range cases {
		if got := feeAt(c.base, c.ppm); got != c.want {
			t.Errorf("feeAt(%d, %d) = %d, want %d", c.base, c.ppm, got, c.want)
		}
	}
	if got := rateText(6000); got != "0.006" {
		t.Errorf("rateText(6000) = %q", got)
	}
	if got := rateText(0); got != "0" {
		t.Errorf("rateText(0) = %q", got)
	}
}

// FuzzFeeAt holds feeAt to math/big: floor(base × ppm / 10⁶ + ½) for every base a bill can hold
// and every rate below 1.
func FuzzFeeAt(f *testing.F) {
	f.Add(int64(600), int64(6000))
	f.Add(int64(100_000_000_000_000), int64(999_999))
	f.Fuzz(func(t *testing.T, base, ppm int64) {
		const maxMinor = 100_000_000_000_000
		if base < 0 || base > maxMinor || ppm < 0 || ppm >= 1_000_000 {
			return
		}
		num := new(big.Int).Mul(big.NewInt(base), big.NewInt(ppm))
		num.Add(num, big.NewInt(500_000))
		want := num.Div(num, big.NewInt(1_000_000))
		if got := feeAt(base, ppm); !want.IsInt64() || got != want.Int64() {
			t.Fatalf("feeAt(%d, %d) = %d, want %s", base, ppm, got, want)
		}
	})
}
