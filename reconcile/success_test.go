package reconcile_test

import (
	"context"
	"slices"
	"testing"

	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/simulate"
)

// queriedOK lists the channels whose query success is stored, as the gauges read it.
func (w *world) queriedOK() []string {
	w.t.Helper()
	st, err := w.db.StoredState(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	var chs []string
	for k := range st.LastSuccess {
		if k[0] == metrics.JobQuery {
			chs = append(chs, k[1])
		}
	}
	slices.Sort(chs)
	return chs
}

// A query run stores its success per channel: a channel whose every answer failed has not
// succeeded while the others have, a channel with nothing due has, and dry runs and one-order
// runs store nothing.
func TestQuerySuccessIsPerChannel(t *testing.T) {
	w := newWorld(t)
	paid := w.order("alipay", 1999)
	w.trade("alipay", paid, 1999, simulate.FakePaid, false)
	broken := w.order("unionpay", 1999)
	w.trade("unionpay", broken, 1999, simulate.FakePaid, false)
	w.fake.Break("unionpay", true)

	w.run(reconcile.Options{DryRun: true})
	w.run(reconcile.Options{TradeNo: paid})
	if got := w.queriedOK(); len(got) != 0 {
		t.Fatalf("a dry run and a one-order run stored successes for %v", got)
	}

	w.run(reconcile.Options{OlderThan: 1})
	if got, want := w.queriedOK(), []string{"alipay", "stripe", "wechatpay"}; !slices.Equal(got, want) {
		t.Fatalf("successes %v, want %v: unionpay's every answer failed", got, want)
	}

	w.fake.Break("unionpay", false)
	w.run(reconcile.Options{OlderThan: 1, Channel: "unionpay"})
	if got, want := w.queriedOK(), channelNames; !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Fatalf("successes %v, want %v once unionpay answers", got, want)
	}
}
