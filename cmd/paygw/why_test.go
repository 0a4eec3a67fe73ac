package main

import (
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
)

// `paygw why` prints what GET /v1/payments explains, on a terminal.
func TestWhy(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	path := migratedConfig(t, settings{dsn: dsn})
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PWHY1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', NOW(3), NOW(3))`)
	r := runPaygw(t, nil, "why", "PWHY1", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "PWHY1 WAIT_PAY") || !strings.Contains(r.stdout, "Not paid: no notification has come") ||
		!strings.Contains(r.stdout, "order created for 19.99 CNY") {
		t.Fatalf("why: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	js := runPaygw(t, nil, "why", "PWHY1", "--config", path, "--json")
	var why struct {
		TradeNo string `json:"trade_no"`
		Status  string `json:"status"`
		Summary string `json:"summary"`
		Facts   []struct {
			At     time.Time `json:"at"`
			Source string    `json:"source"`
			Text   string    `json:"text"`
		} `json:"facts"`
	}
	decodeJSON(t, js, &why)
	if js.code != 0 || why.TradeNo != "PWHY1" || why.Status != "WAIT_PAY" || !strings.HasPrefix(why.Summary, "Not paid: no notification has come") ||
		len(why.Facts) == 0 || why.Facts[0].Source != "order" || why.Facts[0].Text != "order created for 19.99 CNY" || why.Facts[0].At.IsZero() {
		t.Fatalf("why --json: exit %d, %+v\nstdout:\n%s", js.code, why, js.stdout)
	}
	if r := runPaygw(t, nil, "why", "PNOSUCH", "--config", path); r.code != 1 || !strings.Contains(r.stderr, "no order PNOSUCH") {
		t.Fatalf("why of an unknown order: exit %d, stderr %q", r.code, r.stderr)
	}
}
