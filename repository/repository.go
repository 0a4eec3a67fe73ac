// Package repository is paygw's MySQL storage: orders and stock, idempotency records, refunds,
// the notification journal and anomalies. It decides nothing; callers compose its statements
// inside one transaction and read the affected-row counts it reports. Rows are private structs
// turned into payment's domain types, and MySQL's errors into payment's sentinels.
package repository

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	migrations "github.com/paygw/paygw/sql"
)

// ErrFenced means a conditional update found the row no longer in the state the caller owned. The
// other errors this package returns are payment's sentinels (ErrNotFound, ErrConflict,
// ErrOutOfStock) or the driver's own.
var ErrFenced = errors.New("fenced: the row changed under us")

// DB is the MySQL handle. Every timestamp it writes and reads is UTC.
type DB struct {
	x *sqlx.DB

	// Metrics times transactions and counts their retries; nil counts nothing. Set before use.
	Metrics *metrics.Metrics

	// galera: the server is a Galera node (wsrep_on), whose reads may lag another node's commit;
	// the reads that must see such a commit wait for it (causalRead).
	galera bool
}

// Session settings Open gives every connection.
const (
	Isolation       = "READ-COMMITTED"
	LockWaitTimeout = 5 // seconds, innodb_lock_wait_timeout
)

// Session is what a connection of the pool reports of itself and the server.
type Session struct {
	Version         string
	Isolation       string // the session's transaction isolation, e.g. READ-COMMITTED
	LockWaitTimeout int    // seconds
	Now             time.Time
}

// Session reads one connection's settings and the server's clock (NOW(6), UTC).
func (db *DB) Session(ctx context.Context) (Session, error) {
	var s Session
	var err error
	// MySQL 8 knows only transaction_isolation, MariaDB before 11.1 only tx_isolation.
	for _, name := range []string{"transaction_isolation", "tx_isolation"} {
		err = db.x.QueryRowContext(ctx, `SELECT VERSION(), @@session.`+name+`, @@session.innodb_lock_wait_timeout, NOW(6)`).
			Scan(&s.Version, &s.Isolation, &s.LockWaitTimeout, &s.Now)
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || me.Number != 1193 {
			break
		}
	}
	return s, err
}

// Open connects with the session settings paygw relies on and checks the server answers.
func Open(ctx context.Context, dsn string, maxOpen int) (*DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("mysql.dsn is not a valid DSN")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	// A notification waits at most this long for a row lock (MariaDB's default is 50 s): long
	// enough for a twin's transaction, short enough to answer "retry" well inside the channel's
	// reply timeout.
	cfg.Params["innodb_lock_wait_timeout"] = fmt.Sprint(LockWaitTimeout)
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	// READ COMMITTED: a conditional update and the read that follows it see the latest committed
	// row, and no gap locks turn concurrent first inserts into deadlocks. MariaDB before 11.1 names
	// the session variable tx_isolation, MySQL 8 only transaction_isolation: try one, then the other.
	var lastErr error
	for _, name := range []string{"tx_isolation", "transaction_isolation"} {
		cfg.Params[name] = "'" + Isolation + "'"
		db, err := open(ctx, cfg, maxOpen)
		if err == nil {
			return db, nil
		}
		delete(cfg.Params, name)
		lastErr = err
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1193 { // 1193: unknown system variable
			break
		}
	}
	return nil, fmt.Errorf("mysql at %s: %w", cfg.Addr, lastErr)
}

func open(ctx context.Context, cfg *mysql.Config, maxOpen int) (*DB, error) {
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	x := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	x.SetMaxOpenConns(maxOpen)
	x.SetMaxIdleConns(maxOpen)
	x.SetConnMaxLifetime(30 * time.Minute)
	db := &DB{x: x}
	if err := db.Ping(ctx); err != nil {
		_ = x.Close() // the Ping error is the one to report
		return nil, err
	}
	if db.galera, err = wsrepOn(ctx, x); err != nil {
		_ = x.Close()
		return nil, err
	}
	return db, nil
}

// wsrepOn reports whether the server replicates by Galera: @@wsrep_on is 1 on a Galera node, 0 on
// a MariaDB without a provider, and unknown (1193) on MySQL.
func wsrepOn(ctx context.Context, x *sqlx.DB) (bool, error) {
	var on bool
	err := x.QueryRowContext(ctx, `SELECT @@global.wsrep_on`).Scan(&on)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1193 {
		return false, nil
	}
	return on, err
}

// Galera reports whether Open found a Galera node (wsrep_on), whose causal reads wait for the
// cluster.
func (db *DB) Galera() bool { return db.galera }

// causalRead prefixes a SELECT that must see every transaction committed on any node before it
// began. A Galera node applies other nodes' write sets asynchronously, so a plain read can miss a
// commit the client has already been told of (by a duplicate key, or by a certification failure
// that was the other node's win); wsrep_sync_wait=1 makes this one statement wait until the node
// has applied them. Elsewhere reads are already causal and the query is left as it is.
func (db *DB) causalRead(q string) string {
	if db.galera {
		return "SET STATEMENT wsrep_sync_wait=1 FOR " + q
	}
	return q
}

// SyncWait waits, on Galera, until this node has applied every transaction committed on any
// node before it was called; elsewhere it does nothing. Call it before a transaction whose reads
// must see such commits: MariaDB makes no causal read inside a transaction it has begun (a
// SET STATEMENT wsrep_sync_wait=1 there is a plain read), but the wait is the node's, so a
// transaction begun after it on any connection sees what it waited for.
func (db *DB) SyncWait(ctx context.Context) error {
	if !db.galera {
		return nil
	}
	_, err := db.x.ExecContext(ctx, db.causalRead(`SELECT 1`))
	return err
}

func (db *DB) Close() error { return db.x.Close() }

// Ping reports whether MySQL answers within the context.
func (db *DB) Ping(ctx context.Context) error { return db.x.PingContext(ctx) }

// ReadOnly reports whether this pool's writes would be refused: the server is read_only (a
// replica, or an operator fencing it) or the session's transactions are read-only, or, on
// Galera, the node is outside the primary component (wsrep_ready OFF: partitioned away, or
// still joining), where it still answers reads of variables but refuses every write. MariaDB
// before 11.1 names the session variable tx_read_only, MySQL 8 only transaction_read_only.
func (db *DB) ReadOnly(ctx context.Context) (bool, error) {
	if db.galera {
		var name, ready string
		if err := db.x.QueryRowContext(ctx, `SHOW STATUS LIKE 'wsrep_ready'`).Scan(&name, &ready); err != nil {
			return false, err
		}
		if ready != "ON" {
			return true, nil
		}
	}
	var err error
	for _, name := range []string{"tx_read_only", "transaction_read_only"} {
		var global, session bool
		err = db.x.QueryRowContext(ctx, `SELECT @@global.read_only, @@session.`+name).Scan(&global, &session)
		if err == nil {
			return global || session, nil
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1193 {
			break
		}
	}
	return false, err
}

// Migrate applies every embedded migration not yet applied.
func (db *DB) Migrate(ctx context.Context) error {
	p, err := db.migrator()
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// SchemaVersion is the latest migration applied (0 on a fresh database).
func (db *DB) SchemaVersion(ctx context.Context) (int64, error) {
	p, err := db.migrator()
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

// MigrationStatus lists each migration with whether it is applied.
func (db *DB) MigrationStatus(ctx context.Context) ([]*goose.MigrationStatus, error) {
	p, err := db.migrator()
	if err != nil {
		return nil, err
	}
	return p.Status(ctx)
}

func (db *DB) migrator() (*goose.Provider, error) {
	return goose.NewProvider(goose.DialectMySQL, db.x.DB, migrations.FS)
}

// Tx is one MySQL transaction; its methods are the statements the callers compose.
type Tx struct {
	x *sqlx.Tx
}

const maxTxAttempts = 4

// InTx runs fn in one transaction and commits it. Deadlocks (1213, and 1467 on an AUTO-INC lock)
// and lock-wait timeouts (1205) roll back and run fn again a few times; fn must therefore only
// touch the database through tx.
func (db *DB) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	start := time.Now()
	defer func() { db.Metrics.TxDone(time.Since(start)) }()
	var err error
	for attempt := 1; ; attempt++ {
		err = db.tryTx(ctx, fn)
		reason := transientReason(err)
		if reason == "" || attempt == maxTxAttempts {
			return err
		}
		db.Metrics.TxRetry(reason)
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt*attempt) * 5 * time.Millisecond):
		}
	}
}

func (db *DB) tryTx(ctx context.Context, fn func(tx *Tx) error) error {
	x, err := db.x.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	// Rollback after Commit is a no-op; deferred, it also ends the transaction if fn panics.
	defer x.Rollback() //nolint:errcheck // the error that made us roll back is the one worth reporting
	if err := fn(&Tx{x: x}); err != nil {
		return err
	}
	return x.Commit()
}

// transientReason names the retry an error calls for: a deadlock (1213) or a lock-wait timeout
// (1205); "" for any other error, nil included. InnoDB reports a deadlock whose victim waited for
// a table's AUTO-INC lock (held to its end by an INSERT ... SELECT: SeedAttempts) as 1467,
// "Failed to read auto-increment value from storage engine", the transaction rolled back all the
// same: a deadlock too.
func transientReason(err error) string {
	var me *mysql.MySQLError
	switch {
	case !errors.As(err, &me):
		return ""
	case me.Number == 1213, me.Number == 1467:
		return metrics.RetryDeadlock
	case me.Number == 1205:
		return metrics.RetryLockWait
	}
	return ""
}

// StorageFull reports a write the server refused for want of space: the disk is full (1021),
// a table or tablespace cannot grow (1114), or the storage engine got ENOSPC (1030, error 28).
func StorageFull(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1021, 1114:
		return true
	case 1030:
		return strings.Contains(me.Message, "error 28 ")
	}
	return false
}

// conflict turns a duplicate-key error (1062) into payment.ErrConflict.
func conflict(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1062 {
		return payment.ErrConflict
	}
	return err
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return payment.ErrNotFound
	}
	return err
}

// selectAll runs a query and turns each row into its domain type with conv.
func selectAll[R, T any](ctx context.Context, db *DB, conv func(R) T, q string, args ...any) ([]T, error) {
	var rows []R
	if err := db.x.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, err
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out, nil
}

// selectIn is SelectContext for a query with IN (?) lists: sqlx.In expands each slice argument
// into as many placeholders as it has values.
func selectIn(ctx context.Context, x reader, dest any, q string, args ...any) error {
	q, args, err := sqlx.In(q, args...)
	if err != nil {
		return err
	}
	return x.SelectContext(ctx, dest, q, args...)
}
