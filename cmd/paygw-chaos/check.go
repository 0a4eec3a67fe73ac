package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"time"
)

var channelNames = []string{"alipay", "wechatpay", "stripe", "unionpay"}

// seed inserts n WAIT_PAY orders named prefix000001... with random amounts (1 to 5000 yuan), spread over the
// channels, in bulk.
func seed(ctx context.Context, db *sql.DB, prefix string, n int) ([]order, error) {
	orders := make([]order, n)
	for i := range orders {
		orders[i] = order{
			TradeNo:   fmt.Sprintf("%s%06d", prefix, i+1),
			AmountFen: 100 + rand.Int64N(500000), // #nosec G404 -- test amounts for load shaping, not secrets
			Channel:   channelNames[i%len(channelNames)],
		}
	}
	const batch = 500
	for lo := 0; lo < n; lo += batch {
		hi := min(n, lo+batch)
		var q strings.Builder
		q.WriteString(`INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status) VALUES `)
		args := make([]any, 0, 2*(hi-lo))
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			q.WriteString(`(?, 4242, 'CHAOS', 1, ?, 'CNY', 'WAIT_PAY')`)
			args = append(args, orders[i].TradeNo, orders[i].AmountFen)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return nil, fmt.Errorf("seed %s: %w", prefix, err)
		}
	}
	return orders, nil
}

// verdict is what the database says about one phase's orders, and (answers) what the replicas
// answered about them.
type verdict struct {
	orders int
	paid   int
	lost   int // notified as paid, not PAID
	wrong  []string

	// From the replicas' answers (appliedAnswers), not from the database: the unique keys make
	// a second record or APPLIED journal row impossible, so counting those would only restate
	// the schema. Two replicas each answering APPLIED for one payment (each believing it made
	// the WAIT_PAY -> PAID transition) is what a broken protocol would do.
	doubleApplies int // payments answered APPLIED more than once across the replicas
	unanswered    int // payments never answered APPLIED: the replica died between COMMIT and its answer
}

// payDigest is idem_digest of an order's payment record (sql/00009_compact_idem_key.sql), so
// that the lookup goes through uk_idem_key.
const payDigest = `LEFT(UNHEX(SHA2(CONCAT(LENGTH('pay_notify'), ':pay_notify', LENGTH(o.channel), ':', o.channel, o.channel_txn_id), 256)), 16)`

// checkOrders verifies every order of a phase: PAID by its channel, exactly one pay_notify
// record for its channel transaction, exactly one journal row (APPLIED), and one record per
// applied notification.
func checkOrders(ctx context.Context, db *sql.DB, prefix string, want []order) (verdict, error) {
	const q = `SELECT o.trade_no, o.status, COALESCE(o.channel, ''), COALESCE(o.channel_txn_id, ''),
		  (SELECT COUNT(*) FROM idempotent_record r
		    WHERE r.idem_digest = ` + payDigest + ` AND r.biz_type = 'pay_notify' AND r.scope = o.channel AND r.idem_key = o.channel_txn_id),
		  (SELECT COUNT(*) FROM notify_journal j WHERE j.trade_no = o.trade_no AND j.outcome = 'APPLIED'),
		  (SELECT COUNT(*) FROM notify_journal j WHERE j.trade_no = o.trade_no)
		FROM orders o WHERE o.trade_no LIKE ?`
	rows, err := db.QueryContext(ctx, q, prefix+"%")
	if err != nil {
		return verdict{}, err
	}
	defer rows.Close()
	byNo := map[string]order{}
	for _, o := range want {
		byNo[o.TradeNo] = o
	}
	v := verdict{orders: len(want)}
	seen := 0
	bad := func(format string, args ...any) {
		if len(v.wrong) < 10 {
			v.wrong = append(v.wrong, fmt.Sprintf(format, args...))
		}
	}
	for rows.Next() {
		var tradeNo, status, channel, txn string
		var records, applied, journal int
		if err := rows.Scan(&tradeNo, &status, &channel, &txn, &records, &applied, &journal); err != nil {
			return v, err
		}
		o, ok := byNo[tradeNo]
		if !ok {
			continue
		}
		seen++
		if status != "PAID" {
			v.lost++
			bad("%s: status %s, want PAID", tradeNo, status)
			continue
		}
		v.paid++
		if channel != o.Channel {
			bad("%s: paid by %s, want %s", tradeNo, channel, o.Channel)
		}
		if records != 1 || applied != 1 || journal != 1 {
			bad("%s: %d pay_notify record(s), %d APPLIED journal row(s), %d journal row(s); want 1, 1, 1", tradeNo, records, applied, journal)
		}
	}
	if err := rows.Err(); err != nil {
		return v, err
	}
	if seen != len(want) {
		v.lost += len(want) - seen
		bad("%d seeded orders missing from the table", len(want)-seen)
	}
	var records int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM idempotent_record
		WHERE biz_type = 'pay_notify' AND JSON_VALUE(result_json, '$.trade_no') LIKE ?`, prefix+"%").Scan(&records); err != nil {
		return v, err
	}
	if records != v.paid {
		bad("%d pay_notify records for %d applied notifications", records, v.paid)
	}
	return v, nil
}

// appliedAnswers counts, per trade_no starting with prefix, the APPLIED answers the replicas
// gave: each replica logs one "notification" line per answered notification (JSON, level info)
// with the outcome its Apply returned, just before the reply goes out. Logs are appended across
// restarts, and a SIGKILL loses no line already written, so every answer decided is counted.
func appliedAnswers(paths []string, prefix string) (map[string]int, error) {
	n := map[string]int{}
	needle := []byte(`"outcome":"APPLIED"`)
	for _, path := range paths {
		f, err := os.Open(path) // #nosec G304 -- a replica log in the operator's --work directory
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !bytes.Contains(line, needle) {
				continue
			}
			var l struct {
				Message string `json:"message"`
				TradeNo string `json:"trade_no"`
				Outcome string `json:"outcome"`
			}
			if json.Unmarshal(line, &l) != nil || l.Message != "notification" || l.Outcome != "APPLIED" {
				continue
			}
			if strings.HasPrefix(l.TradeNo, prefix) {
				n[l.TradeNo]++
			}
		}
		err = sc.Err()
		_ = f.Close() // read only
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return n, nil
}

// countAnswers sets v's answer figures for want from the replicas' APPLIED answers, and names the
// payments answered APPLIED more than once.
func (v *verdict) countAnswers(applied map[string]int, want []order) {
	v.doubleApplies, v.unanswered = 0, 0
	for _, o := range want {
		switch n := applied[o.TradeNo]; {
		case n == 0:
			v.unanswered++
		case n > 1:
			v.doubleApplies++
			if len(v.wrong) < 10 {
				v.wrong = append(v.wrong, fmt.Sprintf("%s: answered APPLIED %d times across the replicas, want once", o.TradeNo, n))
			}
		}
	}
}

// global are the whole-database invariants.
type global struct {
	anomalies     int
	staleProc     int // processing records older than the timeout (after the sweep)
	orphanRecords int // pay_notify records matching no PAID order
	otherOutcomes int // journal rows neither APPLIED nor REFUNDED (clean traffic has one notify id per payment and per refund)
}

func checkGlobal(ctx context.Context, db *sql.DB, timeout time.Duration) (global, error) {
	var g global
	qs := []struct {
		dst *int
		q   string
		arg []any
	}{
		{&g.anomalies, `SELECT COUNT(*) FROM anomaly`, nil},
		{&g.staleProc, `SELECT COUNT(*) FROM idempotent_record WHERE status = 0 AND update_time < NOW(3) - INTERVAL ? MICROSECOND`, []any{timeout.Microseconds()}},
		{&g.orphanRecords, `SELECT COUNT(*) FROM idempotent_record r WHERE r.biz_type = 'pay_notify' AND NOT EXISTS
			(SELECT 1 FROM orders o WHERE o.status = 'PAID' AND o.channel = r.scope AND o.channel_txn_id = r.idem_key)`, nil},
		{&g.otherOutcomes, `SELECT COUNT(*) FROM notify_journal WHERE outcome NOT IN ('APPLIED', 'REFUNDED')`, nil},
	}
	for _, q := range qs {
		if err := db.QueryRowContext(ctx, q.q, q.arg...).Scan(q.dst); err != nil {
			return g, err
		}
	}
	return g, nil
}

func (g global) problems() []string {
	var p []string
	if g.anomalies > 0 {
		p = append(p, fmt.Sprintf("%d anomaly row(s) for clean traffic", g.anomalies))
	}
	if g.staleProc > 0 {
		p = append(p, fmt.Sprintf("%d processing record(s) older than the timeout after paygw sweep", g.staleProc))
	}
	if g.orphanRecords > 0 {
		p = append(p, fmt.Sprintf("%d pay_notify record(s) without a PAID order", g.orphanRecords))
	}
	if g.otherOutcomes > 0 {
		p = append(p, fmt.Sprintf("%d journal row(s) with an outcome other than APPLIED or REFUNDED", g.otherOutcomes))
	}
	return p
}
