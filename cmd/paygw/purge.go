package main

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/retention"
)

// retentionConfig is the retention of each table, from the configuration.
func retentionConfig(cfg *config.Config) retention.Config {
	return retention.Config{Records: cfg.Idempotency.Retention, Journal: cfg.Journal.Retention, Events: cfg.Events.Retention}
}

func (a *app) purgeCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "purge",
		Short: "delete idempotency records, journal rows and events past their retention",
		Long: `Delete the final idempotency records older than idempotency.retention, the journal rows
older than journal.retention and the numbered outbox events older than events.retention, at most ` + fmt.Sprint(repository.PurgeBatch) + ` rows a statement, now, whatever serve's daily lease
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
	r, err := retention.NewPurger(db, retentionConfig(cfg), zerolog.Nop()).Once(ctx)
	if asJSON {
		tables := map[string]purgedJSON{
			"idempotent_record": {Rows: r.Records.Rows, Batches: r.Records.Batches, OlderThan: cfg.Idempotency.Retention.String(),
				OlderThanSeconds: int64(cfg.Idempotency.Retention.Seconds())},
			"notify_journal": {Rows: r.Journal.Rows, Batches: r.Journal.Batches, OlderThan: cfg.Journal.Retention.String(),
				OlderThanSeconds: int64(cfg.Journal.Retention.Seconds())},
			"event": {Rows: r.Events.Rows, Batches: r.Events.Batches, OlderThan: cfg.Events.Retention.String(),
				OlderThanSeconds: int64(cfg.Events.Retention.Seconds())},
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
	fmt.Fprintf(a.stdout, "purged %d event row(s) older than %s in %d batch(es) of at most %d\n",
		r.Events.Rows, cfg.Events.Retention, r.Events.Batches, repository.PurgeBatch)
	return err
}
