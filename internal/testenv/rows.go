package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// InsertOrder inserts a WAIT_PAY order of fen CNY under tradeNo (user 1, one of SKU "S",
// created now, no idempotency key) and returns tradeNo.
func InsertOrder(tb testing.TB, db *repository.DB, tradeNo string, fen int64) string {
	tb.Helper()
	o := payment.Order{TradeNo: tradeNo, UserID: 1, SKU: "S", Num: 1, AmountFen: fen, Currency: "CNY",
		CreateTime: time.Now().UTC().Truncate(time.Millisecond)}
	err := db.InTx(context.Background(), func(tx *repository.Tx) error {
		return tx.InsertOrder(context.Background(), o, "", "", "")
	})
	if err != nil {
		tb.Fatalf("insert order %s: %v", tradeNo, err)
	}
	return tradeNo
}

// GetOrder reads the order tradeNo, failing tb when it cannot.
func GetOrder(tb testing.TB, db *repository.DB, tradeNo string) payment.Order {
	tb.Helper()
	o, err := db.GetOrder(context.Background(), tradeNo)
	if err != nil {
		tb.Fatalf("order %s: %v", tradeNo, err)
	}
	return o
}

// OldRecords adds n idempotent_record rows of status created age ago (UTC, the database's session
// zone for paygw), keys prefix-0, prefix-1, ...: what purge finds.
func OldRecords(tb testing.TB, dsn, prefix string, n, status int, age time.Duration) {
	tb.Helper()
	for start := 0; start < n; start += 500 {
		var rows []string
		for i := start; i < min(n, start+500); i++ {
			rows = append(rows, fmt.Sprintf("('%s-%d', 'pay_notify', 'alipay', REPEAT('0', 64), %d, UTC_TIMESTAMP(3) - INTERVAL %d SECOND)",
				prefix, i, status, int64(age.Seconds())))
		}
		Exec(tb, dsn, `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, create_time) VALUES `+
			strings.Join(rows, ", "))
	}
}

// OldJournal adds n APPLIED notify_journal rows received age ago, notify ids prefix-0,
// prefix-1, ...
func OldJournal(tb testing.TB, dsn, prefix string, n int, age time.Duration) {
	tb.Helper()
	var rows []string
	for i := 0; i < n; i++ {
		rows = append(rows, fmt.Sprintf("('alipay', '%s-%d', 'P1', 'T1', 'PAID', 'TRADE_SUCCESS', 1, 'CNY', 'body', 'APPLIED', UTC_TIMESTAMP(3) - INTERVAL %d SECOND)",
			prefix, i, int64(age.Seconds())))
	}
	Exec(tb, dsn, `INSERT INTO notify_journal (channel, notify_id, trade_no, channel_txn_id, event, channel_status, amount_fen,
		currency, raw_body, outcome, received_time) VALUES `+strings.Join(rows, ", "))
}

// OldEvents adds n order.paid outbox events written age ago, event ids evt_prefix-0, ...,
// numbered from seq on (seq 0: not numbered yet).
func OldEvents(tb testing.TB, dsn, prefix string, n int, seq int64, age time.Duration) {
	tb.Helper()
	for start := 0; start < n; start += 500 {
		var rows []string
		for i := start; i < min(n, start+500); i++ {
			s := "NULL"
			if seq > 0 {
				s = fmt.Sprint(seq + int64(i))
			}
			rows = append(rows, fmt.Sprintf("('evt_%s-%d', %s, 'order.paid', 'P1', '{}', UTC_TIMESTAMP(3) - INTERVAL %d SECOND)",
				prefix, i, s, int64(age.Seconds())))
		}
		Exec(tb, dsn, `INSERT INTO event (event_id, seq, type, trade_no, body, created_time) VALUES `+strings.Join(rows, ", "))
	}
}
