package main

import (
	"database/sql"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	migrations "github.com/paygw/paygw/sql"
)

// statusLines returns the migration lines of `migrate` / `migrate status` output.
func statusLines(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestMigrateStatus(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn})

	for i := 1; i <= 2; i++ { // the second run has nothing to do and must still succeed
		r := runPaygw(t, nil, "migrate", "--config", path)
		if r.code != 0 {
			t.Fatalf("migrate run %d: exit %d\nstdout:\n%s\nstderr:\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
	r := runPaygw(t, nil, "migrate", "status", "--config", path)
	if r.code != 0 {
		t.Fatalf("migrate status: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	lines := statusLines(t, r.stdout)
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) < 4 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	if len(lines) != len(files) {
		t.Fatalf("migrate status: %d lines, want %d:\n%s", len(lines), len(files), r.stdout)
	}
	for i, l := range lines {
		// Numbers may have gaps (each branch takes its own); the list follows the files.
		if !strings.HasPrefix(l, files[i][:5]+" ") || !strings.Contains(l, " applied ") {
			t.Errorf("migrate status line %d: %q, want migration %s applied", i+1, l, files[i][:5])
		}
	}
	for _, table := range []string{"idempotent_record", "orders", "stock"} {
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, table); n != 1 {
			t.Errorf("table %s: not created by migrate", table)
		}
	}

	// --json: the same list, one document; a pending migration has no applied_at.
	js := runPaygw(t, nil, "migrate", "status", "--config", path, "--json")
	var status migrateStatusJSON
	decodeJSON(t, js, &status)
	if js.code != 0 || len(status.Migrations) != len(files) {
		t.Fatalf("migrate status --json: exit %d, %d migrations, want %d:\n%s", js.code, len(status.Migrations), len(files), js.stdout)
	}
	for i, m := range status.Migrations {
		if fmt.Sprintf("%05d", m.Version) != files[i][:5] || m.File != files[i] || m.State != "applied" || m.AppliedAt == nil || !strings.Contains(lines[i], m.AppliedAt.Format(time.RFC3339)) {
			t.Errorf("migrate status --json [%d] = %+v, want %s applied as the text says: %q", i, m, files[i], lines[i])
		}
	}
	fresh := writeConfig(t, settings{dsn: testenv.EmptyDatabase(t)})
	var before migrateStatusJSON
	decodeJSON(t, runPaygw(t, nil, "migrate", "status", "--config", fresh, "--json"), &before)
	for _, m := range before.Migrations {
		if m.State != "pending" || m.AppliedAt != nil {
			t.Errorf("migrate status --json before migrate: %+v, want pending", m)
		}
	}
	if len(before.Migrations) != len(files) {
		t.Errorf("migrate status --json before migrate: %d migrations, want %d", len(before.Migrations), len(files))
	}
}

func TestSweep(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	path := writeConfig(t, settings{dsn: dsn})

	sweep := func(env ...string) string {
		t.Helper()
		r := runPaygw(t, env, "sweep", "--config", path)
		if r.code != 0 {
			t.Fatalf("sweep: exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		return r.stdout
	}
	if out := sweep(); !strings.HasPrefix(out, "swept 0 ") {
		t.Fatalf("sweep on an empty table: %q, want \"swept 0 ...\"", out)
	}

	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// One record stuck for an hour, one that is processing right now; the times are the
	// database's own, as the sweeper's are.
	const insert = `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, update_time)
		VALUES (?, 'order_create', 'order-service', ?, 0, NOW(3) - INTERVAL ? SECOND)`
	hash := strings.Repeat("a", 64)
	if _, err := db.Exec(insert, "stale-1", hash, 3600); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(insert, "fresh-1", hash, 0); err != nil {
		t.Fatal(err)
	}

	if out := sweep("PAYGW_IDEMPOTENCY__DB_TIMEOUT_CLEAN_SECONDS=60"); !strings.HasPrefix(out, "swept 1 ") {
		t.Fatalf("sweep with a 60s timeout: %q, want \"swept 1 ...\"", out)
	}
	if n := testenv.Count(t, dsn, `SELECT status FROM idempotent_record WHERE idem_key = 'stale-1'`); n != 2 {
		t.Errorf("stale record status %d after the sweep, want 2 (failed)", n)
	}
	if n := testenv.Count(t, dsn, `SELECT status FROM idempotent_record WHERE idem_key = 'fresh-1'`); n != 0 {
		t.Errorf("fresh record status %d after the sweep, want 0 (still processing)", n)
	}
}

// migrateStatusJSON is `paygw migrate status --json`.
type migrateStatusJSON struct {
	Migrations []struct {
		Version   int64      `json:"version"`
		File      string     `json:"file"`
		State     string     `json:"state"`
		AppliedAt *time.Time `json:"applied_at"`
	} `json:"migrations"`
}
