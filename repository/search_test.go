package repository_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// Each filter of the order search is served by an index, on a table of 20,000 orders: EXPLAIN
// names the index sql/00018_order_search.sql (or an older one) made for it.
func TestSearchOrdersUsesIndexes(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, channel, channel_txn_id,
			merchant_order_id, create_time)
		SELECT CONCAT('T', seq), seq % 1000, 'S', 1, 100, 'CNY', IF(seq % 3 = 0, 'PAID', 'WAIT_PAY'),
			IF(seq % 3 = 0, ELT(1 + seq % 4, 'alipay', 'wechatpay', 'stripe', 'unionpay'), NULL),
			IF(seq % 3 = 0, CONCAT('X', seq), NULL), CONCAT('M', seq), NOW(3) - INTERVAL seq SECOND FROM seq_1_to_20000`)
	testenv.Exec(t, dsn, `ANALYZE TABLE orders`)
	raw := rawDB(t, dsn)
	db := testenv.Open(t, dsn)
	now := time.Now()
	for want, f := range map[string]repository.OrderFilter{
		"idx_user_created":   {UserID: 5, HasUserID: true},
		"idx_merchant_order": {MerchantOrderID: "M5"},
		"idx_channel_txn":    {ChannelTxnID: "X9"},
		"idx_status_create":  {Status: "PAID"},
		"idx_created":        {CreatedFrom: now.Add(-time.Hour), CreatedTo: now},
	} {
		if got, _, err := db.SearchOrders(context.Background(), f, 100); err != nil || len(got) == 0 {
			t.Fatalf("%+v: %d orders, %v", f, len(got), err)
		}
		q, args := repository.SearchQuery(f, []string{"alipay", "wechatpay", "stripe", "unionpay"}, 100)
		var key sql.NullString
		rows, err := raw.Query("EXPLAIN "+q, args...)
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			for i := range vals {
				vals[i] = new(sql.RawBytes)
			}
			if err := rows.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			for i, c := range cols {
				if c == "key" {
					key = sql.NullString{String: string(*vals[i].(*sql.RawBytes)), Valid: true}
				}
			}
		}
		rows.Close()
		if key.String != want {
			t.Errorf("%+v: MariaDB uses index %q, want %s\n%s", f, key.String, want, q)
		}
	}
}
