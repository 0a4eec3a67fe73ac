package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
