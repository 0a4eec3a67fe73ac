package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/paygw/paygw/webhook"
)

// schema is the consumer's own two tables. webhook_receipt's primary key is the idempotent
// record: one row per webhook-id, inserted in the same transaction as the business change, so
// the change happens once however often (and however concurrently) paygw delivers the event.
// fulfilment is the business change: one row per paid order, the parcel to ship.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS webhook_receipt (
		webhook_id  VARCHAR(64) NOT NULL,
		event_type  VARCHAR(32) NOT NULL,
		received_at DATETIME(3) NOT NULL,
		PRIMARY KEY (webhook_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
	`CREATE TABLE IF NOT EXISTS fulfilment (
		trade_no     VARCHAR(32) NOT NULL,
		event_id     VARCHAR(64) NOT NULL,
		user_id      BIGINT      NOT NULL,
		amount_fen   BIGINT      NOT NULL,
		currency     CHAR(3)     NOT NULL,
		refunded_fen BIGINT      NOT NULL DEFAULT 0,
		created_at   DATETIME(3) NOT NULL,
		PRIMARY KEY (trade_no)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
}

// Migrate creates the tables if they are missing.
func Migrate(ctx context.Context, db *sql.DB) error {
	for _, q := range schema {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

// Event is the part of paygw's event this consumer reads.
type Event struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		TradeNo     string `json:"trade_no"`
		UserID      int64  `json:"user_id"`
		AmountFen   int64  `json:"amount_fen"` // minor units of Currency
		Currency    string `json:"currency"`
		RefundedFen int64  `json:"refunded_fen"` // the order's refunded total after this event
	} `json:"data"`
}

// maxBody bounds a delivery; paygw's events are a few hundred bytes.
const maxBody = 64 << 10

// Fulfiller receives paygw's webhooks and fulfils paid orders once.
type Fulfiller struct {
	DB       *sql.DB
	Verifier *webhook.Verifier
	Now      func() time.Time
	Log      *slog.Logger
}

// errDuplicate: this webhook-id's receipt is committed already; the delivery is a repeat.
var errDuplicate = errors.New("already received")

// ServeHTTP answers one delivery: 400 when it does not verify or is not an event (paygw would
// send the same bytes again, so retrying cannot help), 500 when our own database failed (paygw
// retries), and 204 only after the receipt and the change committed, or for a repeat.
func (f *Fulfiller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body unreadable or too large", http.StatusBadRequest)
		return
	}
	// Verify the raw bytes first; parse only what verified.
	if err := f.Verifier.Verify(body, r.Header, f.Now()); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest) // the sentinels name no secret
		return
	}
	var e Event
	id := r.Header.Get(webhook.HeaderID)
	if err := json.Unmarshal(body, &e); err != nil || e.ID != id || e.Type == "" {
		http.Error(w, "not a paygw event with this webhook-id", http.StatusBadRequest)
		return
	}
	err = f.Apply(r.Context(), e)
	switch {
	case errors.Is(err, errDuplicate):
		f.Log.Info("repeat", "webhook_id", id, "type", e.Type)
	case err != nil:
		f.Log.Error("apply", "webhook_id", id, "err", err)
		http.Error(w, "try again", http.StatusInternalServerError)
		return
	default:
		f.Log.Info("applied", "webhook_id", id, "type", e.Type, "trade_no", e.Data.TradeNo)
	}
	w.WriteHeader(http.StatusNoContent)
}

// Apply records e's receipt and makes its change in one transaction. It returns errDuplicate
// when e's receipt exists: a concurrent repeat waits on the first one's uncommitted key and then
// finds it, so two deliveries of one event cannot both change anything.
func (f *Fulfiller) Apply(ctx context.Context, e Event) error {
	tx, err := f.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	const receipt = `INSERT INTO webhook_receipt (webhook_id, event_type, received_at) VALUES (?, ?, ?)`
	if _, err := tx.ExecContext(ctx, receipt, e.ID, e.Type, f.Now().UTC()); err != nil {
		if isDuplicateKey(err) {
			return errDuplicate
		}
		return fmt.Errorf("receipt: %w", err)
	}
	if err := change(ctx, tx, e, f.Now().UTC()); err != nil {
		return err
	}
	return tx.Commit()
}

// change is the business change of one event, inside Apply's transaction.
func change(ctx context.Context, tx *sql.Tx, e Event, now time.Time) error {
	switch e.Type {
	case "order.paid":
		// Keyed by the order as well: should an order ever be paid by two events, it still
		// ships once (the first one's row stays).
		const q = `INSERT INTO fulfilment (trade_no, event_id, user_id, amount_fen, currency, created_at)
			VALUES (?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE trade_no = trade_no`
		_, err := tx.ExecContext(ctx, q, e.Data.TradeNo, e.ID, e.Data.UserID, e.Data.AmountFen, e.Data.Currency, now)
		return wrap("fulfil", err)
	case "order.refunded":
		// The event states the refunded total, so the larger of the two wins whatever the order
		// of arrival; an order paid before this endpoint existed has no row and is left alone.
		const q = `UPDATE fulfilment SET refunded_fen = GREATEST(refunded_fen, ?) WHERE trade_no = ?`
		_, err := tx.ExecContext(ctx, q, e.Data.RefundedFen, e.Data.TradeNo)
		return wrap("refund", err)
	}
	return nil // order.closed, payment.anomaly, types added later: the receipt alone
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// isDuplicateKey: MySQL's ER_DUP_ENTRY.
func isDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}
