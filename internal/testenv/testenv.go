// Package testenv gives tests a real MariaDB database and a real Redis of their own. When either
// is missing the test fails loudly with the command that starts them; it never skips.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/webhook"
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
	return NewDatabaseOn(tb, ServerDSN())
}

// NewDatabaseOn is NewDatabase on the server of serverDSN (a DSN without a database name).
func NewDatabaseOn(tb testing.TB, serverDSN string) string {
	tb.Helper()
	dsn := EmptyDatabaseOn(tb, serverDSN)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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

// EmptyDatabase creates a database with no tables at all on the shared server, dropped when the
// test ends, and returns its DSN (for migrations from nothing, or from an old version).
func EmptyDatabase(tb testing.TB) string {
	tb.Helper()
	return EmptyDatabaseOn(tb, ServerDSN())
}

// EmptyDatabaseOn is EmptyDatabase on the server of serverDSN (a DSN without a database name).
func EmptyDatabaseOn(tb testing.TB, serverDSN string) string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		tb.Fatalf("server DSN %q: %v", serverDSN, err)
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
			_ = a.Close()
		}
	})
	cfg.DBName = name
	cfg.ParseTime = true
	return cfg.FormatDSN()
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
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// quietRedis routes go-redis's own messages (a dial failure per call to a dead Redis) away from
// the test output once; the guard's own warning says what matters.
var quietRedis sync.Once

func quietRedisLogs() {
	quietRedis.Do(func() { redis.SetLogger(guard.LibraryLogger(zerolog.Nop())) })
}

// Guard returns a guard on the test Redis whose keys carry a prefix of this test's own.
func Guard(tb testing.TB) *guard.Guard {
	tb.Helper()
	quietRedisLogs()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr()})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("Redis at %s is not reachable (%v): %s", RedisAddr(), err, hint)
	}
	// A longer timeout than production's: a loaded CI box must not turn a slow answer into
	// "Redis down" in a test that expects Redis up.
	g := guard.New(guard.Options{Addr: RedisAddr(), Prefix: "paygw-test:" + Random(6) + ":", Timeout: 3 * time.Second}, Logger(tb))
	tb.Cleanup(func() { _ = g.Close() })
	return g
}

// DeadGuard returns a guard pointed at a port where no Redis listens: Redis "down".
func DeadGuard(tb testing.TB) *guard.Guard {
	tb.Helper()
	quietRedisLogs()
	g := guard.New(guard.Options{Addr: "127.0.0.1:1"}, Logger(tb))
	tb.Cleanup(func() { _ = g.Close() })
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

// SecretsFileEnv names the file Secret appends to; `make test` sets it and, after the run, scans
// the test log for every line of that file with internal/secretscan.
const SecretsFileEnv = "PAYGW_TEST_SECRETS_FILE" // #nosec G101 -- the name of a variable, not a credential

var secretsMu sync.Mutex

// Secret registers s as a secret a test configures (a token, a webhook secret, a key, a
// password) and returns it, so that a scan of the run's log can prove none was logged.
func Secret(tb testing.TB, s string) string {
	tb.Helper()
	if err := RegisterSecret(s); err != nil {
		tb.Fatal(err)
	}
	return s
}

// RegisterSecret is Secret for TestMain, which has no testing.TB. It appends s as one line to
// the file named by $PAYGW_TEST_SECRETS_FILE, when set; one write of one line with O_APPEND keeps
// parallel test processes from interleaving.
func RegisterSecret(s string) error {
	path := os.Getenv(SecretsFileEnv)
	if path == "" || s == "" {
		return nil
	}
	if strings.ContainsAny(s, "\r\n") {
		return errors.New("testenv: a secret to register must be one line")
	}
	secretsMu.Lock()
	defer secretsMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600) // #nosec G304 G703 -- the path is the test run's own, from its environment
	if err != nil {
		return fmt.Errorf("%s: %w", SecretsFileEnv, err)
	}
	_, err = f.Write([]byte(s + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", SecretsFileEnv, err)
	}
	return nil
}

// Dump writes the test database to a file with the real mariadb-dump, as a backup would, and
// returns its path.
func Dump(tb testing.TB, dsn string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "dump.sql")
	out, err := os.Create(path) // #nosec G304 -- the test's own temporary directory
	if err != nil {
		tb.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(client(tb, "mariadb-dump", "mysqldump"), append(connArgs(tb, dsn), "--single-transaction", database(tb, dsn))...) // #nosec G204 -- test tooling, arguments from the test's own DSN
	cmd.Stdout = out
	if msg, err := runQuiet(cmd); err != nil {
		tb.Fatalf("mariadb-dump: %v: %s", err, msg)
	}
	return path
}

// Restore loads a Dump back into the test database with the real mariadb client: the database
// goes back to the moment of the dump, as after a restore from backup.
func Restore(tb testing.TB, dsn, path string) {
	tb.Helper()
	in, err := os.Open(path) // #nosec G304 -- a file Dump wrote
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	cmd := exec.Command(client(tb, "mariadb", "mysql"), append(connArgs(tb, dsn), database(tb, dsn))...) // #nosec G204 -- test tooling, arguments from the test's own DSN
	cmd.Stdin = in
	if msg, err := runQuiet(cmd); err != nil {
		tb.Fatalf("mariadb < dump: %v: %s", err, msg)
	}
}

func client(tb testing.TB, names ...string) string {
	tb.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	tb.Fatalf("none of %v on PATH: install mariadb-client (scripts/services.sh does)", names)
	return ""
}

func connArgs(tb testing.TB, dsn string) []string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"--no-defaults", "--protocol=TCP", "-h" + host, "-P" + port, "-u" + cfg.User}
	if cfg.Passwd != "" {
		args = append(args, "-p"+cfg.Passwd)
	}
	return args
}

func database(tb testing.TB, dsn string) string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil || cfg.DBName == "" {
		tb.Fatalf("DSN names no database")
	}
	return cfg.DBName
}

func runQuiet(cmd *exec.Cmd) (string, error) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	return stderr.String(), err
}

// OwnMariaDB starts a MariaDB of the test's own on port with `scripts/services.sh up mariadb`
// (state in .services/mariadb-<port>), for a test that changes server-wide settings the shared
// server must keep, and stops it when the test ends. It returns root's server DSN. A server that
// cannot start fails the test.
func OwnMariaDB(tb testing.TB, port int) string {
	tb.Helper()
	ownUntilCleanup(tb, "services.sh", "MYSQL_PORT="+strconv.Itoa(port), "mariadb")
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
}

// ownUntilCleanup runs `scripts/<script> up [args]` with env added to the environment, failing
// the test if it fails, and `down [args]` when the test ends: a service of the test's own.
func ownUntilCleanup(tb testing.TB, script, env string, args ...string) {
	tb.Helper()
	run := func(cmd string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, filepath.Join(repoRoot(tb), "scripts", script), append([]string{cmd}, args...)...) // #nosec G204 -- our own script
		c.Env = append(os.Environ(), env)
		return c.CombinedOutput()
	}
	if out, err := run("up"); err != nil {
		tb.Fatalf("scripts/%s up %v (%s): %v\n%s", script, args, env, err, out)
	}
	tb.Cleanup(func() {
		if out, err := run("down"); err != nil {
			tb.Errorf("scripts/%s down %v (%s): %v\n%s", script, args, env, err, out)
		}
	})
}

// The local Redis Cluster of scripts/redis-cluster.sh (its default ports).
const redisClusterSeed = "127.0.0.1:7101"

var redisClusterMu sync.Mutex

// RedisCluster starts the local 6-node Redis Cluster unless it is up (scripts/redis-cluster.sh
// up, which also restarts a node a test killed) and returns its seed addresses. A cluster that
// cannot start fails the test: it is never skipped.
func RedisCluster(tb testing.TB) []string {
	tb.Helper()
	redisClusterMu.Lock()
	defer redisClusterMu.Unlock()
	cmd := exec.Command(filepath.Join(repoRoot(tb), "scripts", "redis-cluster.sh"), "up") // #nosec G204 -- our own script in this checkout
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("scripts/redis-cluster.sh up: %v\n%s", err, out)
	}
	return []string{redisClusterSeed}
}

// RedisClusterPid is the pid of the cluster node listening at addr (host:port), from the
// script's pid file.
func RedisClusterPid(tb testing.TB, addr string) int {
	tb.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(tb), ".redis-cluster", "redis-"+port+".pid")) // #nosec G304 -- redis-cluster.sh's pid file in this checkout; port comes from the test's own address
	if err != nil {
		tb.Fatalf("pid of the cluster node %s: %v", addr, err)
	}
	var pid int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &pid); err != nil || pid <= 0 {
		tb.Fatalf("pid file of the cluster node %s holds %q", addr, b)
	}
	return pid
}

// ClusterGuard returns a guard on the local Redis Cluster (started if need be) whose keys carry
// a prefix of this test's own.
func ClusterGuard(tb testing.TB, timeout time.Duration, log zerolog.Logger) *guard.Guard {
	tb.Helper()
	quietRedisLogs()
	addrs := RedisCluster(tb)
	g := guard.New(guard.Options{Mode: guard.ModeCluster, Addrs: addrs, Prefix: "paygw-test:" + Random(6) + ":", Timeout: timeout}, log)
	tb.Cleanup(func() { _ = g.Close() })
	return g
}

// repoRoot is the repository's top directory: the one holding go.mod, above the test's package.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			tb.Fatalf("no go.mod above %s", dir)
		}
	}
}

// Eventually calls cond until it returns nil, pausing a little longer each time (1 ms up to
// 50 ms), and fails the test with cond's last error if that has not happened within timeout. A
// test waits on the condition it needs, never for a fixed time: quick on an idle machine,
// patient on a loaded one. Call it from the test's goroutine (cond may fail the test too).
func Eventually(tb testing.TB, timeout time.Duration, cond func() error) {
	tb.Helper()
	EventuallyEvery(tb, timeout, 0, cond)
}

// Until is Eventually for a condition that is true or not: it fails the test with "what: not
// within timeout" when cond has not held in time.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	Eventually(tb, timeout, func() error {
		if cond() {
			return nil
		}
		return errors.New(what)
	})
}

// EventuallyEvery is Eventually with a fixed pause between calls (0: Eventually's back-off), for
// a condition that cannot be read faster: InnoDB refreshes INNODB_TRX only when it was last
// read over 100 ms ago, so polling it more often never sees a change.
func EventuallyEvery(tb testing.TB, timeout, pause time.Duration, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	wait := pause
	if wait == 0 {
		wait = time.Millisecond
	}
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(wait)
		if pause == 0 {
			wait = min(2*wait, 50*time.Millisecond)
		}
	}
}

// FreePort is a TCP port of 127.0.0.1 that nothing listens on right now (the kernel's pick).
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// OwnRedis starts a redis-server of the test's own on port (no persistence), waits until it
// answers, and stops it when the test ends; it returns its address. For a test that brings a
// Redis up late or takes it down, which the shared one must never be.
func OwnRedis(tb testing.TB, port int) string {
	tb.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port), // #nosec G204 -- test tooling, a port of the test's own
		"--save", "", "--appendonly", "no", "--dir", tb.TempDir())
	if err := cmd.Start(); err != nil {
		tb.Fatalf("redis-server: %v (install redis-server; scripts/services.sh does)", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	Eventually(tb, 10*time.Second, func() error {
		select {
		case <-exited:
			return errors.New("redis-server exited")
		default:
		}
		return rdb.Ping(context.Background()).Err()
	})
	return addr
}

// WebhookSecret is a fresh whsec_ secret, registered with Secret.
func WebhookSecret(tb testing.TB) string {
	tb.Helper()
	s, err := webhook.NewSecret()
	if err != nil {
		tb.Fatal(err)
	}
	return Secret(tb, s)
}

// TokenFile writes a fresh API token, registered with Secret so that the secret scan covers it,
// to a file in a temporary directory as auth.api_tokens[].token_file reads it (with a trailing
// newline), and returns the file's path and the token.
func TokenFile(tb testing.TB) (path, token string) {
	tb.Helper()
	token = Secret(tb, "tokf-"+Random(16))
	path = filepath.Join(tb.TempDir(), "api-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path, token
}

// AtOnce runs fn(0) to fn(n-1), each in a goroutine of its own, released at the same instant
// once all have started, and returns when every one has: a race of n callers.
func AtOnce(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}
