package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/repository"
)

// purgeCheckEvery is how often serve looks whether the day's purge is due.
const purgeCheckEvery = time.Hour

// purgeLeaseTTL is the day between two purges: the lease is taken for it and kept, so whichever
// replica purged, none purges again before it runs out. A failed pass gives it back at once.
const purgeLeaseTTL = 24 * time.Hour

// purgeResult is one pass over both tables.
type purgeResult struct {
	Records, Journal repository.Purged
}

// purgeOnce deletes the idempotency records past idempotency.retention and the journal rows past
// journal.retention. onPurged, when not nil, is told of every batch's deleted rows (both tables).
func purgeOnce(ctx context.Context, cfg *config.Config, db *repository.DB, onPurged func(n int64)) (purgeResult, error) {
	var r purgeResult
	var err error
	if r.Records, err = db.PurgeRecords(ctx, cfg.Idempotency.Retention, onPurged); err != nil {
		return r, fmt.Errorf("purge idempotent_record: %w", err)
	}
	if r.Journal, err = db.PurgeJournal(ctx, cfg.Journal.Retention, onPurged); err != nil {
		return r, fmt.Errorf("purge notify_journal: %w", err)
	}
	return r, nil
}

func (a *app) purgeCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "purge",
		Short: "delete idempotency records and journal rows past their retention",
		Long: `Delete the final idempotency records older than idempotency.retention and the journal rows
older than journal.retention, at most ` + fmt.Sprint(repository.PurgeBatch) + ` rows a statement, now, whatever serve's daily lease
says (a purge is idempotent). serve does it once a day.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	asJSON := jsonFlag(c)
	return a.withConfig(c, func(ctx context.Context, cfg *config.Config, _ zerolog.Logger, _ []string) error {
		return a.purge(ctx, cfg, *asJSON)
	})
}

// purgedJSON is one table in `paygw purge --json`.
type purgedJSON struct {
	Rows             int64  `json:"rows"`
	Batches          int    `json:"batches"`
	OlderThan        string `json:"older_than"`
	OlderThanSeconds int64  `json:"older_than_seconds"`
}

// purge is one pass, now.
func (a *app) purge(ctx context.Context, cfg *config.Config, asJSON bool) error {
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := purgeOnce(ctx, cfg, db, nil)
	if asJSON {
		tables := map[string]purgedJSON{
			"idempotent_record": {Rows: r.Records.Rows, Batches: r.Records.Batches, OlderThan: cfg.Idempotency.Retention.String(),
				OlderThanSeconds: int64(cfg.Idempotency.Retention.Seconds())},
			"notify_journal": {Rows: r.Journal.Rows, Batches: r.Journal.Batches, OlderThan: cfg.Journal.Retention.String(),
				OlderThanSeconds: int64(cfg.Journal.Retention.Seconds())},
		}
		if werr := writeJSON(a.stdout, struct {
			Tables   map[string]purgedJSON `json:"tables"`
			BatchMax int                   `json:"batch_max"`
		}{tables, repository.PurgeBatch}); err == nil {
			err = werr
		}
		return err
	}
	fmt.Fprintf(a.stdout, "purged %d idempotent_record row(s) older than %s in %d batch(es) of at most %d\n",
		r.Records.Rows, cfg.Idempotency.Retention, r.Records.Batches, repository.PurgeBatch)
	fmt.Fprintf(a.stdout, "purged %d notify_journal row(s) older than %s in %d batch(es) of at most %d\n",
		r.Journal.Rows, cfg.Journal.Retention, r.Journal.Batches, repository.PurgeBatch)
	return err
}

// servePurge runs the daily purge in serve: it looks at start and then every purgeCheckEvery,
// and purges when it wins the day's lease.
func servePurge(ctx context.Context, cfg *config.Config, db *repository.DB, holder string, every time.Duration, onPurged func(n int64), log zerolog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		purgeIfDue(ctx, cfg, db, holder, onPurged, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// purgeIfDue runs one pass if the day's lease is free. The holder names the pass (not only the
// process), so the replica that purged yesterday cannot extend its own lease into a second pass.
func purgeIfDue(ctx context.Context, cfg *config.Config, db *repository.DB, holder string, onPurged func(n int64), log zerolog.Logger) {
	if err := db.EnsureLease(ctx, repository.PurgeLease); err != nil {
		log.Warn().Err(err).Msg("purge: the lease row")
		return
	}
	pass := fmt.Sprintf("%s@%d", holder, time.Now().Unix())
	if len(pass) > 64 {
		pass = pass[len(pass)-64:]
	}
	if ok, err := db.TakeLease(ctx, repository.PurgeLease, pass, purgeLeaseTTL); err != nil || !ok {
		return // purged within the day (here or elsewhere), or the database is away: next look
	}
	start := time.Now()
	r, err := purgeOnce(ctx, cfg, db, onPurged)
	ev := log.Info()
	if err != nil {
		// Give the day back so the next look tries again.
		_ = db.ReleaseLease(context.WithoutCancel(ctx), repository.PurgeLease, pass)
		ev = log.Warn().Err(err)
	}
	ev.Int64("idempotent_records", r.Records.Rows).Int("record_batches", r.Records.Batches).
		Int64("journal_rows", r.Journal.Rows).Int("journal_batches", r.Journal.Batches).
		Dur("took", time.Since(start)).Msg("purged rows past retention")
}

// holderName names this process in a lease.
func holderName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

func sweepEvery(ctx context.Context, every time.Duration, db *repository.DB, timeout time.Duration, met *metrics.Metrics, log zerolog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := db.SweepProcessing(ctx, timeout)
			if err != nil {
				log.Warn().Err(err).Msg("sweep failed; next pass in a minute")
			} else if n > 0 {
				met.SweeperFailed(n)
				log.Warn().Int64("failed", n).Dur("older_than", timeout).Msg("swept stale processing records")
			}
		}
	}
}
