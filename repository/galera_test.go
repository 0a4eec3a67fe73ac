package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// On a MariaDB without a Galera provider Open finds no wsrep, and GetRecord is a plain read.
func TestOpenDetectsNoGalera(t *testing.T) {
	if testenv.DB(t).Galera() {
		t.Fatal("Galera() on the test MariaDB, which runs without a wsrep provider")
	}
}

// GetRecord after a duplicate key must see the record another node committed, even when this
// node has not applied that node's write set yet. Node 2's appliers are held back by FLUSH TABLES
// WITH READ LOCK while node 1 commits a record: a plain read on node 2 misses it, GetRecord waits
// for node 2 to catch up (wsrep_sync_wait) and finds it.
func TestGaleraGetRecordIsCausal(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	n1, n2 := testenv.Open(t, dsns[0]), testenv.Open(t, dsns[1])
	if !n1.Galera() || !n2.Galera() {
		t.Fatal("Open did not detect Galera (wsrep_on)")
	}

	raw, err := sql.Open("mysql", dsns[1])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	hold, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if _, err := hold.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			if _, err := hold.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
				t.Error(err)
			}
		}
	}
	defer unlock()

	key := "causal-" + testenv.Random(6)
	if _, err := n1.Claim(ctx, repository.BizPayNotify, "alipay", key, "h", "tok"); err != nil {
		t.Fatal(err)
	}
	var plain int
	if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM idempotent_record WHERE idem_key = ?", key).Scan(&plain); err != nil {
		t.Fatal(err)
	}
	if plain != 0 {
		t.Fatal("node 2 applied node 1's commit despite the read lock: the lag this test needs did not happen")
	}

	type answer struct {
		rec repository.Record
		err error
	}
	got := make(chan answer, 1)
	start := time.Now()
	go func() {
		rec, err := n2.GetRecord(ctx, repository.BizPayNotify, "alipay", key)
		got <- answer{rec, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("GetRecord on the lagging node answered at once: %+v, %v; want it to wait for the commit", a.rec, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case a := <-got:
		if errors.Is(a.err, payment.ErrNotFound) || a.err != nil || a.rec.Key != key {
			t.Fatalf("GetRecord = %+v, %v; want the record node 1 committed", a.rec, a.err)
		}
		t.Logf("GetRecord waited %s for node 2 to apply node 1's commit", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("GetRecord did not return after the lock was released")
	}
}

// Two nodes insert the same unique key: neither statement fails (each node sees only its own
// row), and the node that commits second gets 1213 at COMMIT, not 1062 — the certification
// failure InTx retries as a deadlock.
func TestGaleraDuplicateKeyFailsAtCommit(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	n1 := testenv.Open(t, dsns[0])
	raw, err := sql.Open("mysql", dsns[1])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	key := "cert-" + testenv.Random(6)
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // rolled back by the failed COMMIT already
	if _, err := tx.ExecContext(ctx, `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, lock_token)
		VALUES (?, ?, 'alipay', 'h', 0, 'node2')`, key, repository.BizPayNotify); err != nil {
		t.Fatalf("node 2 insert: %v", err)
	}
	if _, err := n1.Claim(ctx, repository.BizPayNotify, "alipay", key, "h", "node1"); err != nil {
		t.Fatalf("node 1 insert: %v", err)
	}
	err = tx.Commit()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1213 {
		t.Fatalf("node 2 COMMIT = %v; want 1213 (certification failure)", err)
	}
	rec, err := testenv.Open(t, dsns[1]).GetRecord(ctx, repository.BizPayNotify, "alipay", key)
	if err != nil || rec.Key != key {
		t.Fatalf("node 2 GetRecord after the failed commit = %+v, %v; want node 1's record", rec, err)
	}
}
