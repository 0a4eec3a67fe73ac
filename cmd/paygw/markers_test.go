package main

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
)

// `paygw markers flush` starts a new epoch in the database, which every replica binds within
// identity.Interval; before the migrations it says what to run.
func TestMarkersFlush(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn})
	if r := runPaygw(t, nil, "markers", "flush", "--config", path); r.code == 0 || !strings.Contains(r.stderr, "paygw migrate") {
		t.Fatalf("flush before migrate: exit %d, stderr %q; want a failure naming `paygw migrate`", r.code, r.stderr)
	}
	migrate(t, path)
	instance := func() (string, int) {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var id string
		var epoch int
		if err := db.QueryRow(`SELECT instance_id, epoch FROM db_identity`).Scan(&id, &epoch); err != nil {
			t.Fatal(err)
		}
		return id, epoch
	}
	id, epoch := instance()
	if len(id) != 32 || epoch != 1 {
		t.Fatalf("after migrate: instance %q epoch %d, want 32 hex digits and epoch 1", id, epoch)
	}
	r := runPaygw(t, nil, "markers", "flush", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "epoch is now 2") {
		t.Fatalf("markers flush: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if id2, epoch2 := instance(); id2 != id || epoch2 != 2 {
		t.Fatalf("after flush: instance %q epoch %d, want %q and 2", id2, epoch2, id)
	}
	js := runPaygw(t, nil, "markers", "flush", "--config", path, "--json")
	var flushed struct {
		Epoch         uint64  `json:"epoch"`
		WithinSeconds float64 `json:"within_seconds"`
	}
	decodeJSON(t, js, &flushed)
	if js.code != 0 || flushed.Epoch != 3 || flushed.WithinSeconds <= 0 {
		t.Fatalf("markers flush --json: exit %d, %+v", js.code, flushed)
	}
	if _, epoch3 := instance(); epoch3 != 3 {
		t.Fatalf("after flush --json: epoch %d, want 3", epoch3)
	}
	if r := runPaygw(t, nil, "markers", "--config", path); r.code != 2 {
		t.Fatal("`paygw markers` without flush succeeded")
	}
	other := testenv.EmptyDatabase(t)
	if r := runPaygw(t, nil, "migrate", "--config", writeConfig(t, settings{dsn: other})); r.code != 0 {
		t.Fatalf("migrate another database: exit %d\n%s", r.code, r.stderr)
	}
	if n := testenv.Count(t, other, `SELECT COUNT(*) FROM db_identity WHERE instance_id = ?`, id); n != 0 {
		t.Fatal("two databases migrated with the same instance id")
	}
}
