package repository_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/repository"
)

// On a MariaDB without a Galera provider Open finds no wsrep, and GetRecord is a plain read.
func TestOpenDetectsNoGalera(t *testing.T) {
	if testenv.DB(t).Galera() {
		t.Fatal("Galera() on the test MariaDB, which runs without a wsrep provider")
	}
}

// GetRecord after a duplicate key must see the record another node committed, even when this
// node has not applied that node's write set yet: a plain read on the lagging node misses it,
// GetRecord waits for node 2 to catch up (wsrep_sync_wait) and finds it.
func TestGaleraGetRecordIsCausal(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	n1, n2 := testenv.Open(t, dsns[0]), testenv.Open(t, dsns[1])
	if !n1.Galera() || !n2.Galera() {
		t.Fatal("Open did not detect Galera (wsrep_on)")
	}
	plain, release := lagging(t, dsns[1])

	key := "causal-" + testenv.Random(6)
	if _, err := n1.Claim(ctx, repository.BizPayNotify, "alipay", key, "h", "tok"); err != nil {
		t.Fatal(err)
	}
	requireLag(t, plain, "SELECT COUNT(*) FROM idempotent_record WHERE idem_key = ?", key)
	waitsForRelease(t, release, func() error {
		rec, err := n2.GetRecord(ctx, repository.BizPayNotify, "alipay", key)
		if err != nil || rec.Key != key {
			return fmt.Errorf("GetRecord = %+v, %v; want the record node 1 committed", rec, err)
		}
		return nil
	})
}

// The identity watcher's reads are causal too. Otherwise a node lagging behind the node where
// another replica committed (and raised the high-water mark, or moved the epoch on) looks like a
// database gone back in time, and the watcher starts a new epoch for nothing.
func TestGaleraWatcherReadsAreCausal(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	n1, n2 := testenv.Open(t, dsns[0]), testenv.Open(t, dsns[1])
	plain, release := lagging(t, dsns[1])

	key := "causal-" + testenv.Random(6)
	if _, err := n1.Claim(ctx, repository.BizPayNotify, "alipay", key, "h", "tok"); err != nil {
		t.Fatal(err)
	}
	wantID, err := n1.RecordHighWater(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEpoch, err := n1.BumpEpoch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	requireLag(t, plain, "SELECT COUNT(*) FROM idempotent_record WHERE id = ?", wantID)
	waitsForRelease(t, release, func() error {
		if id, err := n2.RecordHighWater(ctx); err != nil || id < wantID {
			return fmt.Errorf("RecordHighWater = %d, %v; want %d, node 1's commit", id, err, wantID)
		}
		return nil
	}, func() error {
		if id, err := n2.Identity(ctx); err != nil || id.Epoch != wantEpoch {
			return fmt.Errorf("Identity = %+v, %v; want epoch %d, node 1's", id, err, wantEpoch)
		}
		return nil
	})
}

// lagging holds back the appliers of the node at dsn (FLUSH TABLES WITH READ LOCK on a connection
// of its own) until release is called, at the latest when the test ends. plain reads that node
// without waiting.
func lagging(t *testing.T, dsn string) (plain *sql.DB, release func()) {
	t.Helper()
	ctx := context.Background()
	plain = rawDB(t, dsn)
	hold, err := plain.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := hold.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
				t.Error(err)
			}
			_ = hold.Close()
		})
	}
	t.Cleanup(release)
	return plain, release
}

// requireLag checks that a plain read on the held node does not see node 1's commit yet (q counts
// the rows that commit wrote): without the lag the test proves nothing.
func requireLag(t *testing.T, plain *sql.DB, q string, args ...any) {
	t.Helper()
	var n int
	if err := plain.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("node 2 applied node 1's commit despite the read lock: the lag this test needs did not happen")
	}
}

// waitsForRelease runs each causal read on the lagging node at once, requires that none answers
// within 300 ms, releases the node, and requires every read to succeed then.
func waitsForRelease(t *testing.T, release func(), reads ...func() error) {
	t.Helper()
	got := make(chan error, len(reads))
	start := time.Now()
	for _, read := range reads {
		go func() { got <- read() }()
	}
	select {
	case err := <-got:
		t.Fatalf("a causal read on the lagging node answered at once (%v); want it to wait for node 1's commit", err)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	for range reads {
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("a causal read did not return after the lock was released")
		}
	}
	t.Logf("the causal reads waited %s for node 2 to apply node 1's commit", time.Since(start).Round(time.Millisecond))
}

// Two nodes insert the same unique key: neither statement fails (each node sees only its own
// row), and the node that commits second gets 1213 at COMMIT, not 1062 — the certification
// failure InTx retries as a deadlock.
func TestGaleraDuplicateKeyFailsAtCommit(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	n1 := testenv.Open(t, dsns[0])
	raw := rawDB(t, dsns[1])
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

// A Galera node outside the primary component refuses every write, yet still answers
// `SELECT @@read_only` with 0: ReadOnly must say so from wsrep_ready, so that /readyz takes its
// replica out of the load balancer. The test partitions node 3 (gmcast.isolate) of a cluster of
// its own (on the shared one it would stall the other tests' commits for the eviction's 5 s),
// then lets it back.
func TestGaleraNodeOutsidePrimaryIsReadOnly(t *testing.T) {
	servers := testenv.OwnGalera(t, 3331)
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(servers[2])
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "paygw" // made by galera.sh up
	db := testenv.Open(t, cfg.FormatDSN())
	root := rawDB(t, servers[2])
	isolate := func(v string) {
		t.Helper()
		if _, err := root.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate="+v+"'"); err != nil {
			t.Fatal(err)
		}
	}
	readOnlyWithin := func(want bool, d time.Duration) {
		t.Helper()
		start := time.Now()
		testenv.EventuallyEvery(t, d, 200*time.Millisecond, func() error {
			ro, err := db.ReadOnly(ctx)
			if err == nil && ro != want {
				err = fmt.Errorf("ReadOnly = %v, want %v", ro, want)
			}
			return err
		})
		t.Logf("ReadOnly %v after %s", want, time.Since(start).Round(time.Millisecond))
	}
	readOnlyWithin(false, time.Second)
	isolate("1")
	t.Cleanup(func() { _, _ = root.Exec("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'") })
	readOnlyWithin(true, 30*time.Second)
	var globalRO bool
	if err := root.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&globalRO); err != nil || globalRO {
		t.Fatalf("@@global.read_only = %v, %v: the node was meant to look writable to that check", globalRO, err)
	}
	isolate("0")
	readOnlyWithin(false, 60*time.Second)
}
