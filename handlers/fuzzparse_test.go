package handlers

import (
	"errors"
	"net/url"
	"testing"
)

// fuzzQuery is a fuzz target for a query-string parser: any raw query url.ParseQuery reads is
// parsed without a panic and refused with errBadQuery only; what parse accepts goes to check.
func fuzzQuery[Q any](f *testing.F, seeds []string, parse func(url.Values) (Q, error), check func(t *testing.T, raw string, v url.Values, q Q)) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parse(v)
		if accepted(t, raw, err) {
			check(t, raw, v, q)
		}
	})
}

// accepted reports whether a parser took input (err is nil); a refusal that is not errBadQuery
// fails t.
func accepted(t *testing.T, input any, err error) bool {
	t.Helper()
	if err != nil && !errors.Is(err, errBadQuery) {
		t.Fatalf("%q: %v is not errBadQuery", input, err)
	}
	return err == nil
}
