package main

import (
	"context"
	"fmt"
	"time"

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
		Short: "delete idempotency records, journal rows, events and webhook deliveries past their retention",
		Long: `Delete the final idempotency records older than idempotency.retention, the journal rows
older than journal.retention, and the numbered outbox events, webhook attempts and ended webhook
deliveries older than events.retention, at most ` + fmt.Sprint(repository.PurgeBatch) + ` rows a statement, now, whatever serve's daily lease
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

// purgedTable is one table's count in purge's output.
type purgedTable struct {
	name      string
	purged    repository.Purged
	olderThan time.Duration
}

// purge is one pass, now.
func (a *app) purge(ctx context.Context, cfg *config.Config, asJSON bool) error {
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := retention.NewPurger(db, retentionConfig(cfg), zerolog.Nop()).Once(ctx)
	rows := map[string]int64{"idempotent_record": r.Records.Rows, "notify_journal": r.Journal.Rows, "event": r.Events.Rows,
		"webhook_attempt": r.Attempts.Rows, "webhook_delivery": r.Deliveries.Rows}
	if aerr := audit(ctx, db, "retention.purge", "retention", nil, map[string]any{"purged": rows}); aerr != nil && err == nil {
		err = fmt.Errorf("purge: audit: %w", aerr)
	}
	tables := []purgedTable{
		{"idempotent_record", r.Records, cfg.Idempotency.Retention},
		{"notify_journal", r.Journal, cfg.Journal.Retention},
		{"event", r.Events, cfg.Events.Retention},
		{"webhook_attempt", r.Attempts, cfg.Events.Retention},
		{"webhook_delivery", r.Deliveries, cfg.Events.Retention},
	}
	if asJSON {
		byName := map[string]purgedJSON{}
		for _, t := range tables {
			byName[t.name] = purgedJSON{Rows: t.purged.Rows, Batches: t.purged.Batches,
				OlderThan: t.olderThan.String(), OlderThanSeconds: int64(t.olderThan.Seconds())}
		}
		if werr := writeJSON(a.stdout, struct {
			Tables   map[string]purgedJSON `json:"tables"`
			BatchMax int                   `json:"batch_max"`
		}{byName, repository.PurgeBatch}); err == nil {
			err = werr
		}
		return err
	}
	for _, t := range tables {
		fmt.Fprintf(a.stdout, "purged %d %s row(s) older than %s in %d batch(es) of at most %d\n",
			t.purged.Rows, t.name, t.olderThan, t.purged.Batches, repository.PurgeBatch)
	}
	return err
}
