package repository

import (
	"context"
	"database/sql"
	"time"

	"github.com/paygw/paygw/payment"
)

// attemptRow is one payment_attempt row.
type attemptRow struct {
	TradeNo     string       `db:"trade_no"`
	Channel     string       `db:"channel"`
	ChannelRef  string       `db:"channel_ref"`
	CreatedTime time.Time    `db:"created_time"`
	NextQueryAt time.Time    `db:"next_query_at"`
	QueryCount  int          `db:"query_count"`
	LastQueryAt sql.NullTime `db:"last_query_at"`
	LastAnswer  string       `db:"last_answer"`
	LastStatus  string       `db:"last_status"`
}

const attemptColumns = `trade_no, channel, channel_ref, created_time, next_query_at, query_count, last_query_at,
	last_answer, last_status`

func (r attemptRow) attempt() payment.Attempt {
	a := payment.Attempt{
		TradeNo: r.TradeNo, Channel: r.Channel, ChannelRef: r.ChannelRef, CreatedTime: r.CreatedTime,
		NextQueryAt: r.NextQueryAt, QueryCount: r.QueryCount, LastAnswer: r.LastAnswer, LastStatus: r.LastStatus,
	}
	if r.LastQueryAt.Valid {
		t := r.LastQueryAt.Time
		a.LastQueryAt = &t
	}
	return a
}

// InsertAttempt records an attempt, first asked about at a.NextQueryAt. Returns
// payment.ErrConflict if the order already has this attempt (same channel and ref).
func (tx *Tx) InsertAttempt(ctx context.Context, a payment.Attempt) error {
	const q = `INSERT INTO payment_attempt (trade_no, channel, channel_ref, created_time, next_query_at)
		VALUES (?, ?, ?, ?, ?)`
	_, err := tx.x.ExecContext(ctx, q, a.TradeNo, a.Channel, a.ChannelRef, a.CreatedTime, a.NextQueryAt)
	return conflict(err)
}

// GetAttempt reads one attempt; payment.ErrNotFound if there is none.
func (db *DB) GetAttempt(ctx context.Context, tradeNo, channel, ref string) (payment.Attempt, error) {
	const q = `SELECT ` + attemptColumns + ` FROM payment_attempt WHERE trade_no = ? AND channel = ? AND channel_ref = ?`
	var r attemptRow
	if err := db.x.GetContext(ctx, &r, q, tradeNo, channel, ref); err != nil {
		return payment.Attempt{}, notFound(err)
	}
	return r.attempt(), nil
}

// Attempts lists an order's attempts, oldest first.
func (db *DB) Attempts(ctx context.Context, tradeNo string) ([]payment.Attempt, error) {
	const q = `SELECT ` + attemptColumns + ` FROM payment_attempt WHERE trade_no = ? ORDER BY id`
	return selectAll(ctx, db, attemptRow.attempt, q, tradeNo)
}

// SeedAttempts gives every WAIT_PAY order created in [from, to) that has no attempt an implicit
// one on channel, due at once: an order nobody said where it was paid is asked on every channel
// that can query. It returns how many it added. It runs in a transaction of its own, so that a
// deadlock on the table's AUTO-INC lock, which it holds to its end, is retried.
func (db *DB) SeedAttempts(ctx context.Context, channel string, from, to time.Time) (added int64, err error) {
	const q = `INSERT INTO payment_attempt (trade_no, channel, channel_ref, implicit, created_time, next_query_at)
		SELECT o.trade_no, ?, '', 1, o.create_time, o.create_time FROM orders o
		WHERE o.status = 'WAIT_PAY' AND o.create_time >= ? AND o.create_time < ?
		  AND NOT EXISTS (SELECT 1 FROM payment_attempt a WHERE a.trade_no = o.trade_no AND a.implicit = 0)
		ON DUPLICATE KEY UPDATE payment_attempt.id = payment_attempt.id`
	err = db.InTx(ctx, func(tx *Tx) error {
		res, err := tx.x.ExecContext(ctx, q, channel, from, to)
		if err == nil {
			added, err = res.RowsAffected()
		}
		return err
	})
	return added, err
}

// DueAttempt is an attempt to ask about, with what the query needs of its order.
type DueAttempt struct {
	payment.Attempt
	OrderTime time.Time
}

// AttemptFilter picks the attempts a run asks about: the open ones (see CloseAttempts) of WAIT_PAY
// orders, and of CLOSED orders (an order closed while one of its attempts was open, by an earlier
// paygw or by a close that raced the attempt's seeding: a payment found there is
// PAID_AFTER_CLOSE), made in [From, To), due by Now (unless AnyTime), on Channel and for TradeNo
// when set.
type AttemptFilter struct {
	From, To, Now    time.Time
	AnyTime          bool
	Channel, TradeNo string
	Limit            int
}

// dueFrom reads an attempt with its order's creation time, for DueAttempts and StaleAttempts.
const dueFrom = `SELECT a.trade_no, a.channel, a.channel_ref, a.created_time, a.next_query_at, a.query_count,
		a.last_query_at, a.last_answer, a.last_status, o.create_time AS order_time
	FROM payment_attempt a JOIN orders o ON o.trade_no = a.trade_no`

// DueAttempts lists the attempts f picks, the longest overdue first.
func (db *DB) DueAttempts(ctx context.Context, f AttemptFilter) ([]DueAttempt, error) {
	const q = dueFrom + `
		WHERE a.closed_time IS NULL AND a.created_time >= ? AND a.created_time < ?
		  AND o.status IN ('WAIT_PAY', 'CLOSED')
		  AND (? OR a.next_query_at <= ?) AND (? = '' OR a.channel = ?) AND (? = '' OR a.trade_no = ?)
		ORDER BY a.next_query_at LIMIT ?`
	return db.dueAttempts(ctx, q, f.From, f.To, f.AnyTime, f.Now, f.Channel, f.Channel, f.TradeNo, f.TradeNo, f.Limit)
}

// StaleFilter picks the attempts a run gives up on: open attempts made in [From, To) (To is
// now - reconcile.query_max_age: they are asked no more), of WAIT_PAY orders that another
// channel has closed and that have no open attempt made since To. Channel and TradeNo narrow it
// when set.
type StaleFilter struct {
	From, To         time.Time
	Channel, TradeNo string
	Limit            int
}

// StaleAttempts lists the attempts f picks, oldest first. Closing them (through apply, one close
// event each) closes their orders: nothing that can still be asked is open any more.
func (db *DB) StaleAttempts(ctx context.Context, f StaleFilter) ([]DueAttempt, error) {
	const q = dueFrom + `
		WHERE a.closed_time IS NULL AND a.created_time >= ? AND a.created_time < ? AND o.status = 'WAIT_PAY'
		  AND EXISTS (SELECT 1 FROM payment_attempt c WHERE c.trade_no = a.trade_no AND c.closed_time IS NOT NULL)
		  AND NOT EXISTS (SELECT 1 FROM payment_attempt y WHERE y.trade_no = a.trade_no AND y.closed_time IS NULL AND y.created_time >= ?)
		  AND (? = '' OR a.channel = ?) AND (? = '' OR a.trade_no = ?)
		ORDER BY a.created_time LIMIT ?`
	return db.dueAttempts(ctx, q, f.From, f.To, f.To, f.Channel, f.Channel, f.TradeNo, f.TradeNo, f.Limit)
}

func (db *DB) dueAttempts(ctx context.Context, q string, args ...any) ([]DueAttempt, error) {
	var rows []struct {
		attemptRow
		OrderTime time.Time `db:"order_time"`
	}
	if err := db.x.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, err
	}
	out := make([]DueAttempt, len(rows))
	for i, r := range rows {
		out[i] = DueAttempt{Attempt: r.attempt(), OrderTime: r.OrderTime}
	}
	return out, nil
}

// CloseAttempts records, inside the transaction of a close event, that channel can no longer be
// paid for tradeNo: the order's open attempts on channel whose channel_ref is "" or ref (the
// close's channel transaction id: Stripe's PaymentIntent) are closed at at. When the order has
// attempts but none on channel that the close names, a closed one is recorded (ref "",
// implicit), so that the close is known when the others run out (StaleAttempts). An order with
// no attempt at all gets none. Returns how many of the order's attempts are still open. The
// caller holds the order's row lock, which every writer of its attempts but SeedAttempts takes
// first (SeedAttempts only adds attempts, and an order closed under it has them asked).
func (tx *Tx) CloseAttempts(ctx context.Context, tradeNo, channel, ref string, at time.Time) (open int, err error) {
	const closeQ = `UPDATE payment_attempt SET closed_time = ?
		WHERE trade_no = ? AND channel = ? AND channel_ref IN ('', ?) AND closed_time IS NULL`
	if _, err := tx.x.ExecContext(ctx, closeQ, at, tradeNo, channel, ref); err != nil {
		return 0, err
	}
	const countQ = `SELECT COUNT(*) AS total, COALESCE(SUM(closed_time IS NULL), 0) AS open,
			COALESCE(SUM(channel = ? AND channel_ref IN ('', ?)), 0) AS named
		FROM payment_attempt WHERE trade_no = ?`
	var n struct {
		Total int `db:"total"`
		Open  int `db:"open"`
		Named int `db:"named"`
	}
	if err := tx.x.GetContext(ctx, &n, countQ, channel, ref, tradeNo); err != nil {
		return 0, err
	}
	if n.Total > 0 && n.Named == 0 {
		const addQ = `INSERT INTO payment_attempt (trade_no, channel, channel_ref, implicit, created_time, next_query_at, closed_time)
			VALUES (?, ?, '', 1, ?, ?, ?) ON DUPLICATE KEY UPDATE closed_time = COALESCE(closed_time, VALUES(closed_time))`
		if _, err := tx.x.ExecContext(ctx, addQ, tradeNo, channel, at, at, at); err != nil {
			return 0, err
		}
	}
	return n.Open, nil
}

// RecordQuery stores what asking about an attempt gave, and when to ask next.
func (db *DB) RecordQuery(ctx context.Context, a payment.Attempt, at time.Time, answer, status string, next time.Time) error {
	const q = `UPDATE payment_attempt SET query_count = query_count + 1, last_query_at = ?, last_answer = ?,
		last_status = ?, next_query_at = ? WHERE trade_no = ? AND channel = ? AND channel_ref = ?`
	_, err := db.x.ExecContext(ctx, q, at, answer, clip(status, 128), next, a.TradeNo, a.Channel, a.ChannelRef)
	return err
}

// TakeLease takes (or extends) the named job's lease for holder until ttl from now by the
// database's clock, if it is free, expired or already holder's. ok reports whether holder has it.
// taken_at keeps when holder took it, across extensions.
func (db *DB) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (ok bool, err error) {
	// taken_at is set before holder: MySQL assigns left to right, so it still sees the old holder.
	const q = `UPDATE job_lease SET taken_at = IF(holder = ? AND expires_at >= NOW(3), taken_at, NOW(3)), holder = ?,
			expires_at = NOW(3) + INTERVAL ? MICROSECOND
		WHERE name = ? AND (expires_at < NOW(3) OR holder = ?)`
	res, err := db.x.ExecContext(ctx, q, holder, holder, ttl.Microseconds(), name, holder)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ReleaseLease gives the lease up if holder has it, so another replica need not wait it out.
func (db *DB) ReleaseLease(ctx context.Context, name, holder string) error {
	const q = `UPDATE job_lease SET expires_at = '1970-01-01 00:00:01' WHERE name = ? AND holder = ?`
	_, err := db.x.ExecContext(ctx, q, name, holder)
	return err
}
