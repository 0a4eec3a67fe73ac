package main

import "testing"

func TestShortShapes(t *testing.T) {
	in := "  10ms 50% github.com/paygw/paygw/internal/batch.(*Queue[go.shape.struct { Raw []uint8; N int },go.shape.struct { err error }]).Do\n  5ms main.f\n"
	want := "  10ms 50% github.com/paygw/paygw/internal/batch.(*Queue[...]).Do\n  5ms main.f\n"
	if got := shortShapes(in); got != want {
		t.Fatalf("shortShapes:\n%q\nwant\n%q", got, want)
	}
}
