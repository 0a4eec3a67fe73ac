package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paygw/paygw/simulate"
)

// The double-apply figure comes from what the replicas answered: each replica's notification
// lines, across restarts, for the phase's orders only.
func TestAppliedAnswers(t *testing.T) {
	dir := t.TempDir()
	logs := map[string][]string{
		"replica-0.log": {
			`{"level":"info","channel":"alipay","trade_no":"S000001","notify_id":"n1","event":"PAID","latency":3,"outcome":"APPLIED","time":"2026-12-04T15:00:00Z","message":"notification"}`,
			`{"level":"info","channel":"alipay","trade_no":"S000002","outcome":"REPEAT","message":"notification"}`,
			`{"level":"info","channel":"alipay","trade_no":"R000001","outcome":"APPLIED","message":"notification"}`, // another phase
			`{"level":"warn","outcome":"APPLIED","message":"something else"}`,
			`not json "outcome":"APPLIED"`,
		},
		"replica-1.log": {
			`{"level":"info","channel":"stripe","trade_no":"S000002","outcome":"APPLIED","message":"notification"}`,
			`{"level":"info","channel":"stripe","trade_no":"S000003","outcome":"APPLIED","message":"notification"}`,
		},
		"replica-2.log": { // restarted: its log goes on
			`{"level":"info","channel":"stripe","trade_no":"S000003","outcome":"APPLIED","message":"notification"}`,
		},
	}
	var paths []string
	for name, lines := range logs {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	paths = append(paths, filepath.Join(dir, "never-started.log"))
	applied, err := appliedAnswers(paths, "S")
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 3 || applied["S000001"] != 1 || applied["S000002"] != 1 || applied["S000003"] != 2 {
		t.Fatalf("APPLIED answers %v; want S000001 1, S000002 1, S000003 2", applied)
	}
	var v verdict
	v.countAnswers(applied, []order{{TradeNo: "S000001"}, {TradeNo: "S000002"}, {TradeNo: "S000003"}, {TradeNo: "S000004"}})
	if v.doubleApplies != 1 || v.unanswered != 1 || len(v.wrong) != 1 || !strings.HasPrefix(v.wrong[0], "S000003:") {
		t.Fatalf("double %d, unanswered %d, wrong %q; want 1, 1, S000003 named", v.doubleApplies, v.unanswered, v.wrong)
	}
}

// Each webhook check fires on a doctored sink record, names the order or event, and stays quiet
// on a clean one with duplicates (at least once allows them).
func TestCheckHooks(t *testing.T) {
	events := []hookEvent{
		{"evt_p1", "order.paid", "T1", 1},
		{"evt_r1", "order.refunded", "T1", 4},
		{"evt_r2", "order.refunded", "T1", 7},
		{"evt_p2", "order.paid", "T2", 2},
	}
	paid := []string{"T1", "T2"}
	rec := func(id, typ, tradeNo string) simulate.SinkRecord {
		return simulate.SinkRecord{WebhookID: id, Type: typ, TradeNo: tradeNo}
	}
	p1, r1, r2, p2 := rec("evt_p1", "order.paid", "T1"), rec("evt_r1", "order.refunded", "T1"),
		rec("evt_r2", "order.refunded", "T1"), rec("evt_p2", "order.paid", "T2")
	for name, c := range map[string]struct {
		recs  []simulate.SinkRecord
		check func(v hookVerdict) bool
		names string // in the first problem
	}{
		"clean, with duplicates": {[]simulate.SinkRecord{p1, p2, p1, r1, r1, r2},
			func(v hookVerdict) bool { return v.duplicates == 2 && v.distinct == 4 }, ""},
		"a second order.paid id": {[]simulate.SinkRecord{p1, p2, r1, r2, rec("evt_p9", "order.paid", "T2")},
			func(v hookVerdict) bool { return v.paidTwice == 1 && v.unknown == 1 }, "T2: PAID, and the sink received 2 distinct order.paid event ids ([evt_p2 evt_p9])"},
		"an event never received": {[]simulate.SinkRecord{p1, p2, r1},
			func(v hookVerdict) bool { return v.missing == 1 }, "evt_r2 (order.refunded of T1): never received"},
		"a PAID order without its order.paid": {[]simulate.SinkRecord{p1, r1, r2},
			func(v hookVerdict) bool { return v.paidTwice == 1 && v.missing == 1 }, "T2: PAID, and the sink received 0 distinct"},
		"a refund before its payment": {[]simulate.SinkRecord{p2, r1, p1, r2, r1},
			func(v hookVerdict) bool { return v.outOfOrder == 1 }, "T1: evt_r1 (order.refunded, seq 4) first received before its predecessor evt_p1"},
		"refunds swapped, the later one redelivered in order": {[]simulate.SinkRecord{p1, p2, r2, r1, r2},
			func(v hookVerdict) bool { return v.outOfOrder == 1 }, "T1: evt_r2 (order.refunded, seq 7) first received before its predecessor evt_r1"},
	} {
		v := checkHooks(events, paid, c.recs)
		if !c.check(v) {
			t.Errorf("%s: %+v", name, v)
			continue
		}
		switch {
		case c.names == "" && len(v.problems) > 0:
			t.Errorf("%s: problems %q on a clean record", name, v.problems)
		case c.names != "" && (len(v.problems) == 0 || !strings.Contains(strings.Join(v.problems, "\n"), c.names)):
			t.Errorf("%s: problems %q, want one naming %q", name, v.problems, c.names)
		}
	}
}
