package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// The bench's databases: the main one, and one holding the growth scenario's full table. --db
// names them (so two runs can share a server); set once, before the run starts.
var (
	benchDB  = "paygw_bench"
	growthDB = "paygw_bench_growth"
)

// admin is the load tool's own connection to MariaDB: databases, the growth table, Questions.
type admin struct {
	server string // DSN without a database
	db     *sqlx.DB
}

func openAdmin(ctx context.Context, serverDSN string) (*admin, error) {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return nil, fmt.Errorf("mysql DSN: %w", err)
	}
	cfg.DBName = ""
	cfg.MultiStatements = false
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close() // the Ping error is the one to report
		return nil, fmt.Errorf("MariaDB at %s: %w (start it with scripts/services.sh up)", cfg.Addr, err)
	}
	return &admin{server: cfg.FormatDSN(), db: db}, nil
}

// dsn is the DSN of one of the bench's databases, as the gateway and the raw ceiling use it.
func (a *admin) dsn(name string) string {
	cfg, _ := mysql.ParseDSN(a.server)
	cfg.DBName = name
	return cfg.FormatDSN()
}

func (a *admin) recreate(ctx context.Context, name string) error {
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name + " CHARACTER SET utf8mb4"} {
		if _, err := a.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return a.migrate(ctx, name)
}

// migrate brings a database to the latest schema.
func (a *admin) migrate(ctx context.Context, name string) error {
	db, err := repository.Open(ctx, a.dsn(name), 2)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Migrate(ctx)
}

func (a *admin) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, name := range []string{benchDB, growthDB, unseqDB, bDB, hooksDB, lookupDB} {
		_, _ = a.db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
	}
}

// questions reads the server's global Questions counter. The SHOW itself counts as one.
func (a *admin) questions(ctx context.Context) (int64, error) {
	var name string
	var v int64
	err := a.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &v)
	return v, err
}

// status is one reading of Questions and then of the status counters (counterNames), in that
// order: measure's arithmetic counts on it.
func (a *admin) status(ctx context.Context) (int64, map[string]int64, error) {
	q, err := a.questions(ctx)
	if err != nil {
		return 0, nil, err
	}
	c, err := a.counters(ctx)
	return q, c, err
}

// measure runs fn between two status readings and stores the deltas; the Questions delta less
// the measurement's own second SHOW and the first counters' read.
func (a *admin) measure(ctx context.Context, fn func() result) (result, error) {
	before, cBefore, err := a.status(ctx)
	if err != nil {
		return result{}, err
	}
	r := fn()
	after, cAfter, err := a.status(ctx)
	if err != nil {
		return result{}, err
	}
	r.Questions = after - before - 2
	r.Counters = delta(cBefore, cAfter)
	return r, nil
}

// background counts the statements other clients of the shared server issue while we idle.
func (a *admin) background(ctx context.Context, d time.Duration) (float64, error) {
	r, err := a.measure(ctx, func() result { time.Sleep(d); return result{} })
	return float64(r.Questions) / d.Seconds(), err
}

// order is one seeded WAIT_PAY order.
type order struct {
	tradeNo   string
	amountFen int64
	status    string // what its notification says (simulate.Status*; "" paid)
}

// seedOrders inserts WAIT_PAY orders with the repository's own InsertOrder, so they are the
// rows the gateway's create makes; a thousand to a transaction, four transactions at a time.
func (a *admin) seedOrders(ctx context.Context, db string, orders []order) error {
	const per, workers = 1000, 4
	repo, err := repository.Open(ctx, a.dsn(db), workers)
	if err != nil {
		return err
	}
	defer repo.Close()
	now := time.Now().UTC().Truncate(time.Millisecond)
	return parallel((len(orders)+per-1)/per, workers, func(c int) error {
		return repo.InTx(ctx, func(tx *repository.Tx) error {
			for i := c * per; i < min((c+1)*per, len(orders)); i++ {
				o := payment.Order{TradeNo: orders[i].tradeNo, UserID: int64(i + 1), SKU: "BENCH-SKU", Num: 1,
					AmountFen: orders[i].amountFen, Currency: "CNY", CreateTime: now}
				if err := tx.InsertOrder(ctx, o, "", "", ""); err != nil {
					return fmt.Errorf("seed order %s: %w", o.TradeNo, err)
				}
			}
			return nil
		})
	})
}

// growRecords fills idempotent_record with n rows of payment records, 1 M rows a statement,
// from MariaDB's SEQUENCE engine. Keys are ascending (the inserts append to every index, so
// generation is fast) yet spread over the whole key space of real Alipay transaction ids
// ("2026" + 24 hex digits), so the bench's own keys land on random leaves of a full index.
// Millions of rows cannot take one repository statement each: the server generates them, in the
// columns InsertDoneRecord writes.
//
// The table is empty at this point, so its unique key is dropped first and built again at the
// end: InnoDB then builds it sorted, bottom up, instead of descending the random digest index
// once per row. Without that, 100 M rows (BENCH_SCALE=10) took hours here: past about 30 M the
// index outgrows the buffer pool and every row's insert waits for a leaf from disk.
func (a *admin) growRecords(ctx context.Context, db string, n int64, progress func(done int64)) error {
	if n <= 0 {
		return nil
	}
	table := db + ".idempotent_record"
	if _, err := a.db.ExecContext(ctx, "ALTER TABLE "+table+" DROP KEY uk_idem_key"); err != nil {
		return fmt.Errorf("grow idempotent_record: %w", err)
	}
	step := uint64(1<<63) / uint64(n) * 2 // spread n keys over 16 hex digits
	const per = 1_000_000
	for from := int64(1); from <= n; from += per {
		to := min(from+per-1, n)
		// Only identifiers are formatted in: the bench's own database name and the SEQUENCE
		// engine's table, whose bounds are part of its name and cannot be bound.
		q := fmt.Sprintf(`INSERT INTO %s.idempotent_record
			(idem_key, biz_type, scope, request_hash, status, result_json, response_code, create_time, update_time)
			SELECT CONCAT('2026', LPAD(LOWER(HEX(seq * ?)), 16, '0'), '00000000'), 'pay_notify', 'alipay',
			       SHA2(seq, 256), 1, CONCAT('{"outcome":"APPLIED","trade_no":"G', seq, '"}'), 200,
			       NOW(3) - INTERVAL 30 DAY, NOW(3) - INTERVAL 30 DAY
			FROM %s.seq_%d_to_%d`, db, db, from, to) // #nosec G201 -- identifiers only (the database name --db checked, integer bounds); the value is bound
		if _, err := a.db.ExecContext(ctx, q, step); err != nil {
			return fmt.Errorf("grow idempotent_record: %w", err)
		}
		progress(to)
	}
	// The same key migration 00009 defines.
	if _, err := a.db.ExecContext(ctx, "ALTER TABLE "+table+" ADD UNIQUE KEY uk_idem_key (idem_digest)"); err != nil {
		return fmt.Errorf("grow idempotent_record: rebuild uk_idem_key: %w", err)
	}
	return nil
}

// indexFit is the growth table's unique index against the server's buffer pool.
type indexFit struct{ indexGiB, poolGiB float64 }

// warmUniqueKey reads every leaf of the growth table's uk_idem_key (a covering COUNT), as a
// server that has run a while holds its hot index in the buffer pool where a table just
// generated does not, and returns the index's size against the pool's. Every insert of a
// payment record reads a random leaf of that index: the pool must hold it.
func (a *admin) warmUniqueKey(ctx context.Context, db string) (indexFit, error) {
	var n int64
	if err := a.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+db+".idempotent_record FORCE INDEX (uk_idem_key)").Scan(&n); err != nil {
		return indexFit{}, fmt.Errorf("warm uk_idem_key: %w", err)
	}
	const gib = 1 << 30
	var pages, pool float64
	err := a.db.QueryRowContext(ctx, `SELECT stat_value * @@innodb_page_size, @@innodb_buffer_pool_size FROM mysql.innodb_index_stats
		WHERE database_name = ? AND table_name = 'idempotent_record' AND index_name = 'uk_idem_key' AND stat_name = 'size'`, db).Scan(&pages, &pool)
	if err != nil {
		return indexFit{}, fmt.Errorf("size of uk_idem_key: %w", err)
	}
	return indexFit{indexGiB: pages / gib, poolGiB: pool / gib}, nil
}

// reuseGrowth readies the growth table an earlier run kept (--keep-db) for this one, and
// reports whether it could: it must hold at least n generated rows (30 days old; their count
// is read through idx_status_update). What the earlier run's payments wrote is deleted: its
// records (written now, not 30 days ago) and every other table's rows but the identity's.
func (a *admin) reuseGrowth(ctx context.Context, db string, n int64) (bool, error) {
	var have int64
	err := a.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+db+".idempotent_record WHERE status = 1 AND update_time < NOW(3) - INTERVAL 1 DAY").Scan(&have)
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1049 || me.Number == 1146) { // no such database or table
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reuse %s: %w", db, err)
	}
	if have < n {
		return false, nil
	}
	clean := []string{"DELETE FROM " + db + ".idempotent_record WHERE status IN (0, 1, 2) AND update_time > NOW(3) - INTERVAL 1 DAY"}
	for _, t := range []string{"anomaly", "notify_journal", "orders", "payment_attempt", "refund", "stock", "job_lease",
		"recon_discrepancy", "recon_line", "recon_run", "recon_item", "recon_signoff"} {
		clean = append(clean, "DELETE FROM "+db+"."+t)
	}
	for _, q := range clean {
		if _, err := a.db.ExecContext(ctx, q); err != nil {
			return false, fmt.Errorf("reuse %s: %s: %w", db, q, err)
		}
	}
	return true, nil
}

// rawCeiling runs, for each event, the transaction apply commits for a unique payment, through
// the repository's own statements (BEGIN, MarkPaid, InsertDoneRecord, Journal, COMMIT), with the
// same connection settings (repository.Open) and isolation, at the given concurrency: what
// MariaDB can do for a unique payment with nothing in front of it. The record's result and
// request hash are built as apply builds them, so the rows are the same size.
func rawCeiling(ctx context.Context, dsn string, events []payment.Event, concurrency int) (result, error) {
	pay, closeDB, err := rawPayer(ctx, dsn, events, concurrency, concurrency)
	if err != nil {
		return result{}, err
	}
	defer closeDB()
	return timed(ctx, len(events), concurrency, pay), nil
}

// rawAtRate starts the raw ceiling's transaction for each event at a steady rate (open loop), on
// a pool of up to maxConns connections (128 of them opened first): today's path with nothing in
// front of it, at a rate rather than a concurrency.
func rawAtRate(ctx context.Context, dsn string, events []payment.Event, rate float64, maxConns int) (result, error) {
	pay, closeDB, err := rawPayer(ctx, dsn, events, maxConns, min(128, maxConns))
	if err != nil {
		return result{}, err
	}
	defer closeDB()
	return paced(ctx, len(events), rate, pay), nil
}

// rawPayer opens the raw ceiling's pool of up to maxConns connections, warm of them opened now
// so the timed part dials none, and returns what applies events[i] through it (false on
// failure) and what closes it.
func rawPayer(ctx context.Context, dsn string, events []payment.Event, maxConns, warm int) (pay func(i int) bool, closeDB func(), err error) {
	db, err := repository.Open(ctx, dsn, maxConns)
	if err != nil {
		return nil, nil, err
	}
	_ = parallel(warm, warm, func(int) error { return db.Ping(ctx) })
	pay = func(i int) bool {
		return db.InTx(ctx, func(tx *repository.Tx) error { return applyPayment(ctx, tx, events[i]) }) == nil
	}
	return pay, func() { _ = db.Close() }, nil
}

// applyPayment is apply's transaction for a payment to a WAIT_PAY order that asks for it.
func applyPayment(ctx context.Context, tx *repository.Tx, ev payment.Event) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	paidAt := ev.PaidAt
	if paidAt.IsZero() {
		paidAt = now
	}
	ok, err := tx.MarkPaid(ctx, ev.TradeNo, ev.Channel, ev.ChannelTxnID, ev.AmountFen, ev.Currency, paidAt.UTC(), now)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("order %s not WAIT_PAY for this payment", ev.TradeNo)
	}
	result, _ := json.Marshal(struct { // cannot fail
		Outcome payment.Outcome `json:"outcome"`
		TradeNo string          `json:"trade_no"`
	}{payment.OutcomeApplied, ev.TradeNo})
	sum := sha256.Sum256(ev.Raw)
	if _, err := tx.InsertDoneRecord(ctx, repository.BizPayNotify, ev.Channel, ev.ChannelTxnID, hex.EncodeToString(sum[:]), result); err != nil {
		return err
	}
	return tx.Journal(ctx, ev, payment.OutcomeApplied, now)
}
