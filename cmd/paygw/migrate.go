package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/repository"
)

func (a *app) migrateCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "migrate",
		Short: "apply the database migrations up to the latest",
		Long: `Apply the embedded migrations (sql/) up to the latest, then list every migration and its
state as ` + "`paygw migrate status`" + ` does. Running it again on a migrated database does nothing.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	asJSON := jsonFlag(c)
	a.withConfig(c, func(ctx context.Context, cfg *config.Config, _ zerolog.Logger, _ []string) error {
		return a.migrate(ctx, cfg, true, *asJSON)
	})
	status := exits(&cobra.Command{
		Use:   "status",
		Short: "list the migrations and whether each is applied",
		Args:  cobra.NoArgs,
	}, exitFailed)
	statusJSON := jsonFlag(status)
	a.withConfig(status, func(ctx context.Context, cfg *config.Config, _ zerolog.Logger, _ []string) error {
		return a.migrate(ctx, cfg, false, *statusJSON)
	})
	c.AddCommand(status)
	return c
}

// migrateUp applies the migrations and audits the versions before and after.
func (a *app) migrateUp(ctx context.Context, db *repository.DB) error {
	before, err := db.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := db.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	after, err := db.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := audit(ctx, db, "schema.migrate", "schema", map[string]int64{"version": before}, map[string]int64{"version": after}); err != nil {
		return fmt.Errorf("migrate: audit: %w", err)
	}
	return nil
}

// migrationJSON is one migration in --json output.
type migrationJSON struct {
	Version   int64      `json:"version"`
	File      string     `json:"file"`
	State     string     `json:"state"` // applied or pending
	AppliedAt *time.Time `json:"applied_at,omitempty"`
}

func (a *app) migrate(ctx context.Context, cfg *config.Config, up, asJSON bool) error {
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	if up {
		if err := a.migrateUp(ctx, db); err != nil {
			return err
		}
	}
	list, err := db.MigrationStatus(ctx)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	out := struct {
		Migrations []migrationJSON `json:"migrations"`
	}{Migrations: make([]migrationJSON, 0, len(list))}
	for _, m := range list {
		j := migrationJSON{Version: m.Source.Version, File: m.Source.Path, State: "pending"}
		if m.State == "applied" {
			at := m.AppliedAt.UTC()
			j.State, j.AppliedAt = "applied", &at
		}
		out.Migrations = append(out.Migrations, j)
	}
	if asJSON {
		return writeJSON(a.stdout, out)
	}
	for _, m := range out.Migrations {
		state := m.State
		if m.AppliedAt != nil {
			state += " " + m.AppliedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(a.stdout, "%05d %-28s %s\n", m.Version, m.File, state)
	}
	return nil
}
