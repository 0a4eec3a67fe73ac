package testenv

import (
	"testing"

	"github.com/paygw/paygw/metrics"
)

// Series calls fn with the labels and the value of each series of family name that m exports:
// a counter's or gauge's value, a histogram's sample count.
func Series(tb testing.TB, m *metrics.Metrics, name string, fn func(labels map[string]string, value float64)) {
	tb.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range mt.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case mt.Counter != nil:
				fn(labels, mt.GetCounter().GetValue())
			case mt.Gauge != nil:
				fn(labels, mt.GetGauge().GetValue())
			case mt.Histogram != nil:
				fn(labels, float64(mt.GetHistogram().GetSampleCount()))
			}
		}
	}
}
