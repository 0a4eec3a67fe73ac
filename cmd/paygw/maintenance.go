package main

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/repository"
)

func (a *app) sweepCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "sweep",
		Short: "one pass of the processing-timeout cleanup",
		Long: `Fail the processing idempotency records older than idempotency.db_timeout_clean_seconds, so
that the next request with the same key runs again. serve does it every minute.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	return a.withConfig(c, func(ctx context.Context, cfg *config.Config, _ zerolog.Logger, _ []string) error {
		db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		n, err := db.SweepProcessing(ctx, cfg.Idempotency.ProcessingTimeout())
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		if err := audit(ctx, db, "idempotency.sweep", "idempotent_record", nil, map[string]int64{"failed": n}); err != nil {
			return fmt.Errorf("sweep: audit: %w", err)
		}
		fmt.Fprintf(a.stdout, "swept %d processing record(s) older than %s\n", n, cfg.Idempotency.ProcessingTimeout())
		return nil
	})
}

func (a *app) markersCmd() *cobra.Command {
	flush := exits(&cobra.Command{
		Use:   "flush",
		Short: "start a new epoch: no Redis done marker written before is trusted",
		Long: `Start a new database epoch: every replica stops trusting the Redis done markers written
before, within ` + identity.Interval.String() + `. Run it after restoring the database from a backup.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	asJSON := jsonFlag(flush)
	a.withConfig(flush, func(ctx context.Context, cfg *config.Config, _ zerolog.Logger, _ []string) error {
		db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		epoch, err := db.BumpEpoch(ctx)
		if err != nil {
			return fmt.Errorf("markers flush: %w", err)
		}
		if err := audit(ctx, db, "markers.flush", "epoch", map[string]uint64{"epoch": epoch - 1}, map[string]uint64{"epoch": epoch}); err != nil {
			return fmt.Errorf("markers flush: audit: %w", err)
		}
		if *asJSON {
			return writeJSON(a.stdout, struct {
				Epoch         uint64  `json:"epoch"`
				WithinSeconds float64 `json:"within_seconds"`
			}{epoch, identity.Interval.Seconds()})
		}
		fmt.Fprintf(a.stdout, "database epoch is now %d: done markers written before are ignored by every replica within %s\n", epoch, identity.Interval)
		return nil
	})
	return a.group("markers", "the Redis done markers", flush)
}
