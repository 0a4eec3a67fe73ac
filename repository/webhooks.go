package repository

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Webhook delivery statuses (webhook_delivery.status).
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliveryDisabled  = "disabled"
)

// WebhookEndpoint is a webhook_endpoint row: an endpoint paygw has seen in its configuration.
type WebhookEndpoint struct {
	Name     string       `db:"name"`
	URL      string       `db:"url"`
	StartSeq int64        `db:"start_seq"`
	Disabled sql.NullTime `db:"disabled_time"`
}

// EnsureWebhookEndpoint adds the endpoint, starting after the largest event seq now (no
// backfill), unless it exists; an existing endpoint whose url changed takes the new url and is
// enabled again. Both statements write only when something changes, so every replica may call it
// at start.
func (db *DB) EnsureWebhookEndpoint(ctx context.Context, name, url string, now time.Time) error {
	const q = `INSERT IGNORE INTO webhook_endpoint (name, url, start_seq, created_time)
		SELECT ?, ?, COALESCE(MAX(seq), 0), ? FROM event`
	if _, err := db.x.ExecContext(ctx, q, name, url, now); err != nil {
		return err
	}
	const qURL = `UPDATE webhook_endpoint SET url = ?, disabled_time = NULL WHERE name = ? AND url <> ?`
	_, err := db.x.ExecContext(ctx, qURL, url, name, url)
	return err
}

// WebhookEndpoints reads every endpoint row.
func (db *DB) WebhookEndpoints(ctx context.Context) ([]WebhookEndpoint, error) {
	const q = `SELECT name, url, start_seq, disabled_time FROM webhook_endpoint ORDER BY name`
	var rows []WebhookEndpoint
	return rows, db.x.SelectContext(ctx, &rows, q)
}

// DisableWebhookEndpoint marks the endpoint disabled at at, unless it is already.
func (db *DB) DisableWebhookEndpoint(ctx context.Context, name string, at time.Time) error {
	const q = `UPDATE webhook_endpoint SET disabled_time = ? WHERE name = ? AND disabled_time IS NULL`
	_, err := db.x.ExecContext(ctx, q, at, name)
	return err
}

// EnableWebhookEndpoint clears the endpoint's disabled mark.
func (db *DB) EnableWebhookEndpoint(ctx context.Context, name string) error {
	const q = `UPDATE webhook_endpoint SET disabled_time = NULL WHERE name = ? AND disabled_time IS NOT NULL`
	_, err := db.x.ExecContext(ctx, q, name)
	return err
}

// WebhookCursor reads how far shard has fanned events out to endpoint, adding the cursor at the
// endpoint's start_seq on first use; payment.ErrNotFound if the endpoint has no row.
func (db *DB) WebhookCursor(ctx context.Context, endpoint string, shard int) (int64, error) {
	const qAdd = `INSERT IGNORE INTO webhook_cursor (endpoint, shard, seq)
		SELECT name, ?, start_seq FROM webhook_endpoint WHERE name = ?`
	if _, err := db.x.ExecContext(ctx, qAdd, shard, endpoint); err != nil {
		return 0, err
	}
	const q = `SELECT seq FROM webhook_cursor WHERE endpoint = ? AND shard = ?`
	var seq int64
	return seq, notFound(db.x.GetContext(ctx, &seq, q, endpoint, shard))
}

// SequencedEvent is an event row that has its seq, without its body.
type SequencedEvent struct {
	EventID string    `db:"event_id"`
	Seq     int64     `db:"seq"`
	Type    string    `db:"type"`
	TradeNo string    `db:"trade_no"`
	Created time.Time `db:"created_time"`
}

// EventsAfter reads up to limit sequenced events after seq, in seq order.
func (db *DB) EventsAfter(ctx context.Context, after int64, limit int) ([]SequencedEvent, error) {
	const q = `SELECT event_id, seq, type, trade_no, created_time FROM event WHERE seq > ? ORDER BY seq LIMIT ?`
	var rows []SequencedEvent
	return rows, db.x.SelectContext(ctx, &rows, q, after, limit)
}

// EventByID reads one event without its body; payment.ErrNotFound if there is none, or it has
// no seq yet (it is not part of the feed until it has).
func (db *DB) EventByID(ctx context.Context, eventID string) (SequencedEvent, error) {
	const q = `SELECT event_id, seq, type, trade_no, created_time FROM event WHERE event_id = ? AND seq IS NOT NULL`
	var row SequencedEvent
	return row, notFound(db.x.GetContext(ctx, &row, db.causalRead(q), eventID))
}

// NewDelivery is a delivery row to insert.
type NewDelivery struct {
	Endpoint string
	Event    SequencedEvent
	Shard    int
	Status   string // DeliveryPending or DeliveryDisabled
	Due      time.Time
}

// FanOut inserts the deliveries (an existing one for the same event and endpoint stays as it is)
// and moves the cursor of (endpoint, shard) from from to to, in one transaction: ErrFenced if the
// cursor is no longer at from (another holder moved it), and nothing is inserted. rows are in seq
// order. A pending delivery whose order has an earlier one pending to the endpoint is inserted
// waiting (next_attempt_at NULL): the earlier one's end makes it due (RecordAttempt), so the
// due reads never walk past a queue of waiting events.
func (db *DB) FanOut(ctx context.Context, endpoint string, shard int, from, to int64, rows []NewDelivery) error {
	return db.InTx(ctx, func(tx *Tx) error {
		const qCursor = `UPDATE webhook_cursor SET seq = ? WHERE endpoint = ? AND shard = ? AND seq = ?`
		res, err := tx.x.ExecContext(ctx, qCursor, to, endpoint, shard, from)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errorOr(err, ErrFenced)
		}
		if len(rows) == 0 {
			return nil
		}
		queued, err := tx.pendingOrders(ctx, endpoint, rows)
		if err != nil {
			return err
		}
		const q = `INSERT IGNORE INTO webhook_delivery
			(endpoint, event_id, seq, type, trade_no, shard, status, next_attempt_at, event_time) VALUES `
		var b strings.Builder
		b.WriteString(q)
		args := make([]any, 0, 9*len(rows))
		for i, r := range rows {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
			var due any
			if r.Status == DeliveryPending && !queued[r.Event.TradeNo] {
				due = r.Due
				queued[r.Event.TradeNo] = true
			}
			args = append(args, r.Endpoint, r.Event.EventID, r.Event.Seq, r.Event.Type, r.Event.TradeNo, r.Shard, r.Status, due,
				r.Event.Created)
		}
		_, err = tx.x.ExecContext(ctx, b.String(), args...)
		return err
	})
}

// pendingOrders answers which of the rows' orders have a delivery pending to endpoint. The read
// locks them: a RecordAttempt ending one of them either committed before (the read sees it
// ended) or waits for this transaction (and then makes the row inserted here due); without the
// lock it could end its delivery between this read and the insert and leave the new row waiting
// for ever.
func (tx *Tx) pendingOrders(ctx context.Context, endpoint string, rows []NewDelivery) (map[string]bool, error) {
	trades := make([]string, len(rows))
	for i, r := range rows {
		trades[i] = r.Event.TradeNo
	}
	const q = `SELECT trade_no FROM webhook_delivery WHERE endpoint = ? AND trade_no IN (?) AND status = 'pending' FOR UPDATE`
	var pending []string
	if err := selectIn(ctx, tx.x, &pending, q, endpoint, trades); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(pending))
	for _, t := range pending {
		out[t] = true
	}
	return out, nil
}

func errorOr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// DueDelivery is a pending delivery whose time has come and whose order has no earlier pending
// event to the same endpoint, with the event's body (nil if the event was purged).
type DueDelivery struct {
	ID       int64  `db:"id"`
	Endpoint string `db:"endpoint"`
	EventID  string `db:"event_id"`
	Seq      int64  `db:"seq"`
	Type     string `db:"type"`
	TradeNo  string `db:"trade_no"`
	Attempts int    `db:"attempts"`
	Version  int64  `db:"version"`
	Body     []byte `db:"body"`
}

// DueDeliveries reads up to limit pending deliveries of shard to the endpoints named, due at now,
// oldest due first. A delivery waits while an earlier event (smaller seq) of its order to the
// same endpoint is pending: events of one order reach an endpoint in order. (FanOut inserts such
// a one waiting; the NOT EXISTS keeps the order also for an old event redelivered.)
func (db *DB) DueDeliveries(ctx context.Context, shard int, endpoints []string, now time.Time, limit int) ([]DueDelivery, error) {
	if len(endpoints) == 0 {
		return nil, nil
	}
	const q = `SELECT d.id, d.endpoint, d.event_id, d.seq, d.type, d.trade_no, d.attempts, d.version, e.body
		FROM webhook_delivery d LEFT JOIN event e ON e.event_id = d.event_id
		WHERE d.shard = ? AND d.status = 'pending' AND d.next_attempt_at <= ? AND d.endpoint IN (?)
		AND NOT EXISTS (SELECT 1 FROM webhook_delivery p
			WHERE p.endpoint = d.endpoint AND p.trade_no = d.trade_no AND p.status = 'pending' AND p.seq < d.seq)
		ORDER BY d.next_attempt_at LIMIT ?`
	var rows []DueDelivery
	return rows, selectIn(ctx, db.x, &rows, q, shard, now, endpoints, limit)
}

// WebhookAttempt is one POST of a delivery.
type WebhookAttempt struct {
	DeliveryID int64     `db:"delivery_id"`
	At         time.Time `db:"at"`
	StatusCode int       `db:"status_code"` // 0: no answer
	LatencyMS  int64     `db:"latency_ms"`
	Error      string    `db:"error"`
}

// RecordAttempt stores an attempt of the delivery and sets its status and next attempt (nil for
// none) in one transaction, if the delivery is still pending at the version the caller read;
// ErrFenced (and nothing stored) otherwise. A delivery that ends (any status but pending) makes
// the next waiting event of its order to the endpoint due at now.
func (db *DB) RecordAttempt(ctx context.Context, d DueDelivery, a WebhookAttempt, status string, next *time.Time, now time.Time) error {
	return db.InTx(ctx, func(tx *Tx) error {
		const qUpd = `UPDATE webhook_delivery SET status = ?, attempts = attempts + 1, version = version + 1, next_attempt_at = ?
			WHERE id = ? AND status = 'pending' AND version = ?`
		res, err := tx.x.ExecContext(ctx, qUpd, status, next, d.ID, d.Version)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return errorOr(err, ErrFenced)
		}
		const q = `INSERT INTO webhook_attempt (delivery_id, at, status_code, latency_ms, error) VALUES (?, ?, ?, ?, ?)`
		if _, err = tx.x.ExecContext(ctx, q, d.ID, a.At, a.StatusCode, a.LatencyMS, a.Error); err != nil || status == DeliveryPending {
			return err
		}
		const qNext = `UPDATE webhook_delivery SET next_attempt_at = ?, version = version + 1
			WHERE endpoint = ? AND trade_no = ? AND status = 'pending' AND next_attempt_at IS NULL ORDER BY seq LIMIT 1`
		_, err = tx.x.ExecContext(ctx, qNext, now, d.Endpoint, d.TradeNo)
		return err
	})
}

// WakeWaiting makes due at now up to limit waiting deliveries of shard (next_attempt_at NULL)
// that have no earlier event of their order pending: the repair of a wake RecordAttempt did not
// make (a Galera node does not see another node's row locks). It answers how many it woke.
func (db *DB) WakeWaiting(ctx context.Context, shard int, now time.Time, limit int) (int64, error) {
	const q = `SELECT d.id FROM webhook_delivery d
		WHERE d.shard = ? AND d.status = 'pending' AND d.next_attempt_at IS NULL
		AND NOT EXISTS (SELECT 1 FROM webhook_delivery p
			WHERE p.endpoint = d.endpoint AND p.trade_no = d.trade_no AND p.status = 'pending' AND p.seq < d.seq)
		LIMIT ?`
	var ids []int64
	if err := db.x.SelectContext(ctx, &ids, q, shard, limit); err != nil || len(ids) == 0 {
		return 0, err
	}
	const qWake = `UPDATE webhook_delivery SET next_attempt_at = ?, version = version + 1
		WHERE id IN (?) AND status = 'pending' AND next_attempt_at IS NULL`
	query, args, err := sqlx.In(qWake, now, ids)
	if err != nil {
		return 0, err
	}
	res, err := db.x.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// DisableDeliveries turns the pending deliveries of shard to endpoint into disabled ones, if the
// endpoint is still disabled: a redelivery that enabled it meanwhile keeps its pending one.
func (db *DB) DisableDeliveries(ctx context.Context, endpoint string, shard int) (int64, error) {
	const q = `UPDATE webhook_delivery d JOIN webhook_endpoint e ON e.name = d.endpoint
		SET d.status = 'disabled', d.version = d.version + 1, d.next_attempt_at = NULL
		WHERE d.shard = ? AND d.status = 'pending' AND d.endpoint = ? AND e.disabled_time IS NOT NULL`
	res, err := db.x.ExecContext(ctx, q, shard, endpoint)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// OldestUndelivered reads, per endpoint with a pending delivery, the creation time of its oldest
// pending event.
func (db *DB) OldestUndelivered(ctx context.Context) (map[string]time.Time, error) {
	const q = `SELECT endpoint, MIN(event_time) AS oldest FROM webhook_delivery WHERE status = 'pending' GROUP BY endpoint`
	var rows []struct {
		Endpoint string    `db:"endpoint"`
		Oldest   time.Time `db:"oldest"`
	}
	if err := db.x.SelectContext(ctx, &rows, q); err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(rows))
	for _, r := range rows {
		out[r.Endpoint] = r.Oldest
	}
	return out, nil
}

// Redeliver makes the event pending again, due at now, to each endpoint named, with a fresh
// retry schedule; an endpoint it was never fanned out to gets a new delivery. Attempts made
// before stay.
func (db *DB) Redeliver(ctx context.Context, ev SequencedEvent, shard int, endpoints []string, now time.Time) error {
	if len(endpoints) == 0 {
		return nil
	}
	const q = `INSERT INTO webhook_delivery
		(endpoint, event_id, seq, type, trade_no, shard, status, next_attempt_at, event_time) VALUES %s
		ON DUPLICATE KEY UPDATE status = 'pending', attempts = 0, version = version + 1, next_attempt_at = VALUES(next_attempt_at)`
	vals := make([]string, len(endpoints))
	args := make([]any, 0, 9*len(endpoints))
	for i, ep := range endpoints {
		vals[i] = "(?, ?, ?, ?, ?, ?, 'pending', ?, ?)"
		args = append(args, ep, ev.EventID, ev.Seq, ev.Type, ev.TradeNo, shard, now, ev.Created)
	}
	_, err := db.x.ExecContext(ctx, fmt.Sprintf(q, strings.Join(vals, ", ")), args...)
	return err
}

// DeliveryFilter selects deliveries to list: by endpoint and status ("" for any), after the id
// After, at most Limit.
type DeliveryFilter struct {
	Endpoint string
	Status   string
	After    int64
	Limit    int
}

// WebhookDelivery is one delivery (event and endpoint) and its attempts, oldest first.
type WebhookDelivery struct {
	ID          int64        `db:"id"`
	EventID     string       `db:"event_id"`
	Type        string       `db:"type"`
	Endpoint    string       `db:"endpoint"`
	Status      string       `db:"status"`
	NextAttempt sql.NullTime `db:"next_attempt_at"`
	Attempts    []WebhookAttempt
}

// Deliveries lists deliveries by id, with their attempts. Only the filters given are in the
// statement, so that an endpoint (and a status) is read through idx_list.
func (db *DB) Deliveries(ctx context.Context, f DeliveryFilter) ([]WebhookDelivery, error) {
	q := `SELECT id, event_id, type, endpoint, status, next_attempt_at FROM webhook_delivery WHERE id > ?`
	args := []any{f.After}
	if f.Endpoint != "" {
		q += ` AND endpoint = ?`
		args = append(args, f.Endpoint)
	}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, f.Status)
	}
	var out []WebhookDelivery
	if err := db.x.SelectContext(ctx, &out, q+` ORDER BY id LIMIT ?`, append(args, f.Limit)...); err != nil {
		return nil, err
	}
	return db.withAttempts(ctx, out)
}

// DeliveriesOf lists the deliveries of one order's events to every endpoint, by id, with their
// attempts: read through idx_order, which leads with the endpoint, so every endpoint is named.
func (db *DB) DeliveriesOf(ctx context.Context, tradeNo string) ([]WebhookDelivery, error) {
	var names []string
	if err := db.x.SelectContext(ctx, &names, `SELECT name FROM webhook_endpoint`); err != nil || len(names) == 0 {
		return nil, err
	}
	const q = `SELECT id, event_id, type, endpoint, status, next_attempt_at FROM webhook_delivery
		WHERE endpoint IN (?) AND trade_no = ? ORDER BY id`
	var out []WebhookDelivery
	if err := selectIn(ctx, db.x, &out, q, names, tradeNo); err != nil {
		return nil, err
	}
	return db.withAttempts(ctx, out)
}

// withAttempts reads the attempts of the deliveries out, oldest first.
func (db *DB) withAttempts(ctx context.Context, out []WebhookDelivery) ([]WebhookDelivery, error) {
	if len(out) == 0 {
		return out, nil
	}
	ids := make([]int64, len(out))
	at := make(map[int64]int, len(out))
	for i, d := range out {
		ids[i] = d.ID
		at[d.ID] = i
	}
	const qAttempts = `SELECT delivery_id, at, status_code, latency_ms, error FROM webhook_attempt
		WHERE delivery_id IN (?) ORDER BY delivery_id, id`
	var attempts []WebhookAttempt
	if err := selectIn(ctx, db.x, &attempts, qAttempts, ids); err != nil {
		return nil, err
	}
	for _, a := range attempts {
		i := at[a.DeliveryID]
		out[i].Attempts = append(out[i].Attempts, a)
	}
	return out, nil
}

// WebhookReplicas renews holder's presence for ttl (by the database's clock) and answers how many
// replicas are present, holder included. Rows a day past their time are deleted, best effort
// (two replicas deleting the same rows on two Galera nodes may conflict; the next call retries).
func (db *DB) WebhookReplicas(ctx context.Context, holder string, ttl time.Duration) (int, error) {
	const q = `INSERT INTO webhook_replica (holder, expires_at) VALUES (?, NOW(3) + INTERVAL ? MICROSECOND)
		ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)`
	if _, err := db.x.ExecContext(ctx, q, holder, ttl.Microseconds()); err != nil {
		return 0, err
	}
	const qOld = `DELETE FROM webhook_replica WHERE expires_at < NOW(3) - INTERVAL 1 DAY`
	_, _ = db.x.ExecContext(ctx, qOld)
	const qLive = `SELECT COUNT(*) FROM webhook_replica WHERE expires_at > NOW(3)`
	var n int
	return n, db.x.GetContext(ctx, &n, qLive)
}

// LeaveWebhookReplicas removes holder's presence: the others take its shards without waiting.
func (db *DB) LeaveWebhookReplicas(ctx context.Context, holder string) error {
	const q = `DELETE FROM webhook_replica WHERE holder = ?`
	_, err := db.x.ExecContext(ctx, q, holder)
	return err
}

var (
	webhookAttemptTable  = purgeTable{name: "webhook_attempt", timeCol: "at"}
	webhookDeliveryTable = purgeTable{name: "webhook_delivery", timeCol: "event_time", keep: "status <> 'pending'"}
)

// PurgeWebhookAttempts deletes the webhook attempts made longer ago than olderThan (by the
// database's clock), in batches like PurgeJournal. Run it with the events' retention.
func (db *DB) PurgeWebhookAttempts(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (Purged, error) {
	return db.purge(ctx, webhookAttemptTable, olderThan, PurgeBatch, onBatch)
}

// PurgeWebhookDeliveries deletes the deliveries of events created longer ago than olderThan,
// in batches like PurgeJournal; a pending delivery stays, whatever its age. Run it with the
// events' retention: a delivery outlives its event only as a pending one, which fails with
// "the event is no longer stored".
func (db *DB) PurgeWebhookDeliveries(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (Purged, error) {
	return db.purge(ctx, webhookDeliveryTable, olderThan, PurgeBatch, onBatch)
}
