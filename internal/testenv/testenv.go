// Package testenv gives tests a real MariaDB database and a real Redis of their own. When either
// is missing the test fails loudly with the command that starts them; it never skips.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/repository"
)

const hint = "start MariaDB and Redis with `make services` (or run `make test`)"

// ServerDSN is the MariaDB server the tests use, without a database name.
func ServerDSN() string {
	if v := os.Getenv("PAYGW_TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// RedisAddr is the Redis the tests use.
func RedisAddr() string {
	if v := os.Getenv("PAYGW_TEST_REDIS_ADDR"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

// NewDatabase creates an empty, migrated database for this test and drops it afterwards. It
// returns the DSN of the database, for tests that start the real binary.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(ServerDSN())
	if err != nil {
		tb.Fatalf("PAYGW_TEST_MYSQL_DSN: %v", err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		tb.Fatalf("MariaDB at %s is not reachable (%v): %s", cfg.Addr, err, hint)
	}
	name := "paygw_t_" + Random(6)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if a, err := sql.Open("mysql", cfg.FormatDSN()); err == nil {
			_, _ = a.Exec("DROP DATABASE IF EXISTS " + name)
			a.Close()
		}
	})
	cfg.DBName = name
	cfg.ParseTime = true
	dsn := cfg.FormatDSN()
	db, err := repository.Open(ctx, dsn, 4)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	return dsn
}

// DB opens a fresh migrated database for this test; closed and dropped afterwards.
func DB(tb testing.TB) *repository.DB {
	tb.Helper()
	return Open(tb, NewDatabase(tb))
}

// Open connects to dsn for the rest of the test.
func Open(tb testing.TB, dsn string) *repository.DB {
	tb.Helper()
	db, err := repository.Open(context.Background(), dsn, 64)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Guard returns a guard on the test Redis whose keys carry a prefix of this test's own.
func Guard(tb testing.TB) *guard.Guard {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr()})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("Redis at %s is not reachable (%v): %s", RedisAddr(), err, hint)
	}
	// A longer timeout than production's: a loaded CI box must not turn a slow answer into
	// "Redis down" in a test that expects Redis up.
	g := guard.New(guard.Options{Addr: RedisAddr(), Prefix: "paygw-test:" + Random(6) + ":", Timeout: 3 * time.Second}, Logger(tb))
	tb.Cleanup(func() { g.Close() })
	return g
}

// DeadGuard returns a guard pointed at a port where no Redis listens: Redis "down".
func DeadGuard(tb testing.TB) *guard.Guard {
	tb.Helper()
	g := guard.New(guard.Options{Addr: "127.0.0.1:1"}, Logger(tb))
	tb.Cleanup(func() { g.Close() })
	return g
}

// Logger writes to the test log.
func Logger(tb testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(tb)).Level(zerolog.WarnLevel)
}

// Random returns n random bytes as lower-case hex.
func Random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Count runs a COUNT(*) query on the test database.
func Count(tb testing.TB, dsn, query string, args ...any) int {
	tb.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", strings.TrimSpace(query), err)
	}
	return n
}

// Exec runs one statement on the test database, as an operator (or a fault) would.
func Exec(tb testing.TB, dsn, query string, args ...any) {
	tb.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(query, args...); err != nil {
		tb.Fatalf("%s: %v", strings.TrimSpace(query), err)
	}
}
