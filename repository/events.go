package repository

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/paygw/paygw/payment"
)

// The outbox (sql/00015_event_outbox.sql). Every state change of an order inserts its event in
// the change's own transaction, from inside the Tx method that makes the change (MarkPaid,
// MarkPaidWithPending, MarkPaidGroup, MarkClosed, SetRefunded, FlagAnomaly): a caller cannot
// make the change without the event, and the event commits or rolls back with it.
//
// The body is built by MariaDB, in the INSERT ... SELECT itself, from the order row as the
// transaction has just left it: the pay path gains one INSERT and no read, and the data can never
// disagree with what committed. eventData is the one list of the order's fields an event carries.

// eventField is one field of an event's data: its JSON key and the SQL expression of its value
// over the order row e (and k, the event's own trade_no and id; see eventInsert), or, for a field
// the caller gives (bound), a value.
type eventField struct {
	key  string
	expr string
	val  any
}

// eventData is the data every event carries, read from the order row e. An order field added
// later (merchant_order_id) is one line here.
var eventData = []eventField{
	{key: "trade_no", expr: "k.trade_no"},
	{key: "merchant_order_id", expr: "e.merchant_order_id"},
	{key: "user_id", expr: "e.user_id"},
	{key: "status", expr: "e.status"},
	{key: "amount_fen", expr: "e.amount_fen"},
	{key: "currency", expr: "e.currency"},
	{key: "refunded_fen", expr: "e.refunded_fen"},
	{key: "channel", expr: "COALESCE(e.channel, '')"},
	{key: "channel_txn_id", expr: "COALESCE(e.channel_txn_id, '')"},
}

// bound is a data field the caller gives: it replaces eventData's field of that key, or follows
// them.
func bound(key string, val any) eventField { return eventField{key: key, val: val} }

// errEventCount: an insert wrote another number of events than asked (a bug); it rolls the
// change back.
var errEventCount = errors.New("outbox: wrote another number of events than asked")

// eventInsert is the INSERT ... SELECT of n events of one type, one per order, and the args of
// its data fields after the type and timestamp.
func eventInsert(n int, fields []eventField) (string, []any) {
	var data []string
	var args []any
	used := map[string]bool{}
	for _, f := range eventData {
		expr := f.expr
		for _, b := range fields {
			if b.key == f.key {
				expr, used[b.key] = "?", true
				args = append(args, b.val)
			}
		}
		data = append(data, "'"+f.key+"', "+expr)
	}
	for _, b := range fields {
		if !used[b.key] {
			data = append(data, "'"+b.key+"', ?")
			args = append(args, b.val)
		}
	}
	keys := "SELECT ? AS trade_no, ? AS event_id" + strings.Repeat(" UNION ALL SELECT ?, ?", n-1)
	// The order is LEFT JOINed: an anomaly may name a trade_no with no order (a bill's line); its
	// event then carries the anomaly's fields and nulls for the order's. The bound trade_no is
	// compared as orders.trade_no is (utf8mb4_bin, by its unique key) whatever the connection's
	// character set.
	q := `INSERT INTO event (event_id, type, trade_no, body, created_time)
		SELECT k.event_id, ?, k.trade_no, JSON_OBJECT('id', k.event_id, 'type', ?, 'timestamp', ?,
			'data', JSON_OBJECT(` + strings.Join(data, ", ") + `)), ?
		FROM (` + keys + `) k LEFT JOIN orders e ON e.trade_no = CONVERT(k.trade_no USING utf8mb4) COLLATE utf8mb4_bin`
	return q, args
}

// insertEvents writes one event of type typ for each of the orders tradeNos (distinct), at, with
// the data fields given in fields (the same for all).
func (tx *Tx) insertEvents(ctx context.Context, typ string, tradeNos []string, at time.Time, fields ...eventField) error {
	q, data := eventInsert(len(tradeNos), fields)
	at = at.UTC().Truncate(time.Millisecond)
	args := make([]any, 0, 4+len(data)+2*len(tradeNos))
	args = append(args, typ, typ, at.Format(time.RFC3339Nano))
	args = append(args, data...)
	args = append(args, at)
	for _, tn := range tradeNos {
		args = append(args, tn, newEventID())
	}
	res, err := tx.x.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != int64(len(tradeNos)) {
		return fmt.Errorf("%w: %d of %d %s", errEventCount, n, len(tradeNos), typ)
	}
	return nil
}

// insertEvent is insertEvents for one order.
func (tx *Tx) insertEvent(ctx context.Context, typ, tradeNo string, at time.Time, fields ...eventField) error {
	return tx.insertEvents(ctx, typ, []string{tradeNo}, at, fields...)
}

// eventIDs spells an event id's 16 random bytes: lower-case base32, no padding (26 characters).
var eventIDs = base32.StdEncoding.WithPadding(base32.NoPadding)

// newEventID is "evt_" and 128 random bits: unique without coordination, fixed when the event
// is written and never changed.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "evt_" + strings.ToLower(eventIDs.EncodeToString(b[:]))
}

// eventRow is one event row as the feed reads it.
type eventRow struct {
	Seq         sql.NullInt64 `db:"seq"`
	EventID     string        `db:"event_id"`
	Type        string        `db:"type"`
	TradeNo     string        `db:"trade_no"`
	Body        []byte        `db:"body"`
	CreatedTime time.Time     `db:"created_time"`
}

func (r eventRow) event() payment.OutboxEvent {
	return payment.OutboxEvent{Seq: r.Seq.Int64, ID: r.EventID, Type: r.Type, TradeNo: r.TradeNo, Body: r.Body,
		CreatedTime: r.CreatedTime}
}

// FeedScanWindow bounds how many seqs one filtered read of the feed passes over, so that a type
// filter behind a long backlog is many short statements, never one that reads the whole table.
const FeedScanWindow = 10_000

// EventPage is one read of the feed.
type EventPage struct {
	Events []payment.OutboxEvent
	// Through is how far the read went: ask next with after = Through. Every numbered event up to
	// it was considered, matching the filter or not.
	Through int64
	// More says numbered events lie past Through: read again at once rather than wait.
	More bool
}

// Events reads up to limit numbered events after seq after, in seq order: of the given types, or
// of every type when types is empty. A filtered read passes over at most FeedScanWindow seqs.
// The page's Through is the last event's seq when it filled limit, else the end of what it
// passed over (never beyond the highest seq numbered when it began), and never less than after.
// A reader asks next with after = Through, so a filter that matches nothing does not read the
// same events again.
func (db *DB) Events(ctx context.Context, after int64, types []string, limit int) (EventPage, error) {
	const (
		top = `SELECT COALESCE(MAX(seq), 0) FROM event`
		q   = `SELECT seq, event_id, type, trade_no, body, created_time FROM event WHERE seq > ? AND seq <= ?`
	)
	// The highest seq first: every lower one has committed (numbering transactions commit in
	// order), so the read below may stop there and say it did.
	var high int64
	if err := db.x.GetContext(ctx, &high, top); err != nil {
		return EventPage{Through: after}, err
	}
	through := max(high, after)
	filter := ""
	if len(types) > 0 {
		through = min(through, after+FeedScanWindow)
		filter = ` AND type IN (` + placeholders(len(types), "?") + `)`
	}
	args := []any{after, through}
	for _, t := range types {
		args = append(args, t)
	}
	args = append(args, limit)
	evs, err := selectAll(ctx, db, eventRow.event, q+filter+` ORDER BY seq LIMIT ?`, args...)
	if err != nil {
		return EventPage{Through: after}, err
	}
	if len(evs) == limit {
		through = evs[len(evs)-1].Seq
	}
	return EventPage{Events: evs, Through: through, More: through < high}, nil
}

// EventsOf lists the events of one order, sequenced or not, in insertion order.
func (db *DB) EventsOf(ctx context.Context, tradeNo string) ([]payment.OutboxEvent, error) {
	const q = `SELECT seq, event_id, type, trade_no, body, created_time FROM event WHERE trade_no = ? ORDER BY id`
	return selectAll(ctx, db, eventRow.event, q, tradeNo)
}

// SequenceEvents numbers, in one transaction, up to max of the committed events that have no
// seq yet, after the highest seq so far and in id order, and returns how many it numbered. A
// transaction still open is invisible to it, so its event is numbered once it commits, after
// every event numbered before: a reader that pages by seq never passes an event that commits
// late. Meant for one caller at a time (a lease); a second one at once waits on the highest
// seq's row lock, and uk_seq refuses any seq given twice.
func (db *DB) SequenceEvents(ctx context.Context, max int) (int, error) {
	const (
		some = `SELECT EXISTS (SELECT 1 FROM event WHERE seq IS NULL)`
		top  = `SELECT seq FROM event WHERE seq IS NOT NULL ORDER BY seq DESC LIMIT 1 FOR UPDATE`
		next = `SELECT id FROM event WHERE seq IS NULL ORDER BY id LIMIT ?`
	)
	// The sequencer asks every 100 ms: an idle gateway answers with one indexed read, no
	// transaction.
	var waiting bool
	if err := db.x.GetContext(ctx, &waiting, some); err != nil || !waiting {
		return 0, err
	}
	var n int
	err := db.InTx(ctx, func(tx *Tx) error {
		var last int64 // 0: nothing sequenced yet
		if err := tx.x.GetContext(ctx, &last, top); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var ids []int64
		if err := tx.x.SelectContext(ctx, &ids, next, max); err != nil || len(ids) == 0 {
			n = 0
			return err
		}
		var b strings.Builder
		args := make([]any, 0, 3*len(ids))
		b.WriteString(`UPDATE event SET seq = CASE id`)
		for i, id := range ids {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, id, last+int64(i)+1)
		}
		b.WriteString(` END WHERE id IN (` + placeholders(len(ids), "?") + `) AND seq IS NULL`)
		for _, id := range ids {
			args = append(args, id)
		}
		res, err := tx.x.ExecContext(ctx, b.String(), args...)
		if err != nil {
			return err
		}
		if c, err := res.RowsAffected(); err != nil {
			return err
		} else if c != int64(len(ids)) {
			return fmt.Errorf("%w: sequenced %d of %d events", ErrFenced, c, len(ids))
		}
		n = len(ids)
		return nil
	})
	return n, err
}
