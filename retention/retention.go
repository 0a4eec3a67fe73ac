// Package retention keeps the tables within their retention: the daily purge of final
// idempotency records, journal rows and numbered outbox events past idempotency.retention,
// journal.retention and events.retention, and the
// sweeper that fails processing records stuck past idempotency.db_timeout_clean_seconds.
package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/repository"
)

// Store is what retention deletes and fails rows in (repository.DB).
type Store interface {
	lease.Store
	PurgeRecords(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (repository.Purged, error)
	PurgeJournal(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (repository.Purged, error)
	PurgeEvents(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (repository.Purged, error)
	PurgeWebhookAttempts(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (repository.Purged, error)
	PurgeWebhookDeliveries(ctx context.Context, olderThan time.Duration, onBatch func(n int64)) (repository.Purged, error)
	SweepProcessing(ctx context.Context, timeout time.Duration) (int64, error)
}

var _ Store = (*repository.DB)(nil)

// Config is how long rows are kept.
type Config struct {
	Records time.Duration // idempotency.retention: final idempotency records
	Journal time.Duration // journal.retention: notify_journal rows
	Events  time.Duration // events.retention: numbered outbox events; 0 keeps them all
}

// Purged is one pass over the tables.
type Purged struct {
	Records, Journal, Events repository.Purged
	// The webhook attempts and ended deliveries, by events.retention.
	Attempts, Deliveries repository.Purged
}

// PurgeCheckEvery is how often serve looks whether the day's purge is due.
const PurgeCheckEvery = time.Hour

// purgeLeaseTTL is the day between two purges: the lease is taken for it and kept, so whichever
// replica purged, none purges again before it runs out. A failed pass gives it back at once.
const purgeLeaseTTL = 24 * time.Hour

// Purger deletes what is past its retention.
type Purger struct {
	db  Store
	cfg Config
	log zerolog.Logger

	// OnPurged, when not nil, is told of every batch's deleted rows (every table). Set before use.
	OnPurged func(n int64)
}

// NewPurger builds the purge of db's tables.
func NewPurger(db Store, cfg Config, log zerolog.Logger) *Purger {
	return &Purger{db: db, cfg: cfg, log: log}
}

// Once deletes the idempotency records, the journal rows, the numbered events and their ended
// webhook deliveries past their retention, now, whatever the day's lease says (a purge is
// idempotent).
func (p *Purger) Once(ctx context.Context) (Purged, error) {
	var r Purged
	var err error
	if r.Records, err = p.db.PurgeRecords(ctx, p.cfg.Records, p.OnPurged); err != nil {
		return r, fmt.Errorf("purge idempotent_record: %w", err)
	}
	if r.Journal, err = p.db.PurgeJournal(ctx, p.cfg.Journal, p.OnPurged); err != nil {
		return r, fmt.Errorf("purge notify_journal: %w", err)
	}
	if p.cfg.Events <= 0 { // a Config built without it (config.Validate refuses below 72h)
		return r, nil
	}
	if r.Events, err = p.db.PurgeEvents(ctx, p.cfg.Events, p.OnPurged); err != nil {
		return r, fmt.Errorf("purge event: %w", err)
	}
	if r.Attempts, err = p.db.PurgeWebhookAttempts(ctx, p.cfg.Events, p.OnPurged); err != nil {
		return r, fmt.Errorf("purge webhook_attempt: %w", err)
	}
	if r.Deliveries, err = p.db.PurgeWebhookDeliveries(ctx, p.cfg.Events, p.OnPurged); err != nil {
		return r, fmt.Errorf("purge webhook_delivery: %w", err)
	}
	return r, nil
}

// Serve runs the daily purge in serve: it looks at start and then every interval, and purges when
// it wins the day's lease (lease.Purge), under holder.
func (p *Purger) Serve(ctx context.Context, every time.Duration, holder string) {
	lease.Every(ctx, every, true, func(ctx context.Context) { p.ifDue(ctx, holder) })
}

// ifDue runs one pass if the day's lease is free. The holder names the pass (not only the
// process), so the replica that purged yesterday cannot extend its own lease into a second pass.
func (p *Purger) ifDue(ctx context.Context, holder string) {
	if err := p.db.EnsureLease(ctx, lease.Purge); err != nil {
		p.log.Warn().Err(err).Msg("purge: the lease row")
		return
	}
	// By the nanosecond: two looks of one replica are two passes, however close.
	pass := fmt.Sprintf("%s@%d", holder, time.Now().UnixNano())
	if len(pass) > 64 {
		pass = pass[len(pass)-64:]
	}
	if ok, err := p.db.TakeLease(ctx, lease.Purge, pass, purgeLeaseTTL); err != nil || !ok {
		// Purged within the day (here or elsewhere), or the database is away: next look.
		p.log.Debug().Err(err).Msg("purge not due: the day's lease is held")
		return
	}
	start := time.Now()
	r, err := p.Once(ctx)
	ev := p.log.Info()
	if err != nil {
		// Give the day back so the next look tries again.
		_ = p.db.ReleaseLease(context.WithoutCancel(ctx), lease.Purge, pass)
		ev = p.log.Warn().Err(err)
	}
	ev.Int64("idempotent_records", r.Records.Rows).Int("record_batches", r.Records.Batches).
		Int64("journal_rows", r.Journal.Rows).Int("journal_batches", r.Journal.Batches).
		Int64("event_rows", r.Events.Rows).Int("event_batches", r.Events.Batches).
		Int64("webhook_attempts", r.Attempts.Rows).Int("attempt_batches", r.Attempts.Batches).
		Int64("webhook_deliveries", r.Deliveries.Rows).Int("delivery_batches", r.Deliveries.Batches).
		Dur("took", time.Since(start)).Msg("purged rows past retention")
}

// SweepEvery is how often serve sweeps.
const SweepEvery = time.Minute

// Sweep fails the processing records older than timeout every interval until ctx ends, on every
// replica (a sweep is idempotent and cheap), so that a retry of their key can run. onSwept, when
// not nil, is told how many each pass failed.
func Sweep(ctx context.Context, db Store, every, timeout time.Duration, onSwept func(n int64), log zerolog.Logger) {
	lease.Every(ctx, every, false, func(ctx context.Context) {
		n, err := db.SweepProcessing(ctx, timeout)
		switch {
		case err != nil:
			log.Warn().Err(err).Msg("sweep failed; next pass in a minute")
		case n > 0:
			if onSwept != nil {
				onSwept(n)
			}
			log.Warn().Int64("failed", n).Dur("older_than", timeout).Msg("swept stale processing records")
		}
	})
}
