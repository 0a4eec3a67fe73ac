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

// `paygw why` takes what a complaint comes with: the channel's transaction, the merchant's own
// order id or the user; one match is explained, several are listed, none is exit 1, and no key
// or two is a usage error.
func TestWhyByOtherKeys(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	path := migratedConfig(t, settings{dsn: dsn})
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, channel, channel_txn_id,
			merchant_order_id, paid_time, create_time, update_time)
		VALUES ('PWHY1', 7, 'S', 1, 1999, 'CNY', 'PAID', 'alipay', '2026120522001', 'ERP-1', NOW(3), NOW(3) - INTERVAL 1 MINUTE, NOW(3)),
		       ('PWHY2', 7, 'S', 1, 500, 'USD', 'WAIT_PAY', NULL, NULL, NULL, NULL, NOW(3), NOW(3))`)
	for _, args := range [][]string{{"--channel-txn-id", "2026120522001"}, {"--merchant-order-id", "ERP-1"}} {
		r := runPaygw(t, nil, append([]string{"why", "--config", path}, args...)...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "PWHY1 PAID\n") {
			t.Errorf("why %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
		}
	}
	r := runPaygw(t, nil, "why", "--config", path, "--user-id", "7")
	if r.code != 0 || !strings.Contains(r.stdout, "2 orders match") || strings.Index(r.stdout, "PWHY2") > strings.Index(r.stdout, "PWHY1") ||
		!strings.Contains(r.stdout, "5.00 USD") {
		t.Errorf("why --user-id 7: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	js := runPaygw(t, nil, "why", "--config", path, "--user-id", "7", "--json")
	var list struct {
		Orders []struct {
			TradeNo   string    `json:"trade_no"`
			Status    string    `json:"status"`
			AmountFen int64     `json:"amount_fen"`
			Currency  string    `json:"currency"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"orders"`
	}
	decodeJSON(t, js, &list)
	if js.code != 0 || len(list.Orders) != 2 || list.Orders[0].TradeNo != "PWHY2" || list.Orders[0].AmountFen != 500 || list.Orders[1].Status != "PAID" ||
		list.Orders[0].CreatedAt.Before(list.Orders[1].CreatedAt) {
		t.Errorf("why --user-id 7 --json: exit %d, %+v", js.code, list)
	}
	if r := runPaygw(t, nil, "why", "--config", path, "--user-id", "8"); r.code != 1 || !strings.Contains(r.stderr, "no order matches") {
		t.Errorf("why --user-id 8: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{}, {"PWHY1", "--user-id", "7"}, {"--merchant-order-id", "ERP-1", "--channel-txn-id", "x"}} {
		if r := runPaygw(t, nil, append([]string{"why", "--config", path}, args...)...); r.code != exitUsage || !strings.Contains(r.stderr, "name one order") {
			t.Errorf("why %v: exit %d, stderr %q; want a usage error", args, r.code, r.stderr)
		}
	}
}
