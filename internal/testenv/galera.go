package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// GaleraNodes is the size of the test cluster scripts/galera.sh runs.
const GaleraNodes = 3

// GaleraPort is the SQL port of the cluster's first node; node i listens on GaleraPort+i-1.
func GaleraPort() int {
	if v, err := strconv.Atoi(os.Getenv("PAYGW_TEST_GALERA_PORT")); err == nil && v > 0 {
		return v
	}
	return 3311
}

// GaleraServerDSN is node i's (1-based) server DSN, without a database name.
func GaleraServerDSN(i int) string {
	return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", GaleraPort()+i-1)
}

var galeraMu sync.Mutex

// GaleraUp makes sure the 3-node Galera cluster answers, every node Synced, starting it with
// scripts/galera.sh up when it does not. A cluster that cannot be started fails the test.
func GaleraUp(tb testing.TB) {
	tb.Helper()
	galeraMu.Lock()
	defer galeraMu.Unlock()
	// Another test binary may have the cluster busy for a moment (starting it, or holding a
	// node desynced on purpose): wait for Synced before deciding it must be started.
	if waitGaleraSynced(15*time.Second) == nil {
		return
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("cannot locate scripts/galera.sh")
	}
	script := filepath.Join(filepath.Dir(self), "..", "..", "scripts", "galera.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, script, "up") // #nosec G204 -- our own script
	cmd.Env = append(os.Environ(), "GALERA_PORT="+strconv.Itoa(GaleraPort()))
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("scripts/galera.sh up: %v\n%s", err, out)
	}
	if err := waitGaleraSynced(90 * time.Second); err != nil {
		tb.Fatalf("after scripts/galera.sh up: %v\n%s", err, out)
	}
	tb.Logf("started the Galera cluster in %s", time.Since(start).Round(time.Millisecond))
}

// waitGaleraSynced polls galeraSynced until it holds or d has passed, and returns its last answer.
func waitGaleraSynced(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := galeraSynced()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// galeraSynced reports why the cluster is not usable: a node that does not answer, is not
// Synced, or sees fewer than all the nodes.
func galeraSynced() error {
	for i := 1; i <= GaleraNodes; i++ {
		state, err := GaleraStatus(GaleraServerDSN(i), "wsrep_local_state_comment")
		if err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		size, err := GaleraStatus(GaleraServerDSN(i), "wsrep_cluster_size")
		if err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		if state != "Synced" || size != strconv.Itoa(GaleraNodes) {
			return fmt.Errorf("node %d: %s, cluster size %s", i, state, size)
		}
	}
	return nil
}

// GaleraCounter sums a wsrep status counter (wsrep_local_cert_failures, wsrep_local_bf_aborts)
// over every node of the test cluster.
func GaleraCounter(tb testing.TB, name string) int {
	tb.Helper()
	total := 0
	for i := 1; i <= GaleraNodes; i++ {
		v, err := GaleraStatus(GaleraServerDSN(i), name)
		if err != nil {
			tb.Fatalf("node %d %s: %v", i, name, err)
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			tb.Fatalf("node %d %s = %q", i, name, v)
		}
		total += n
	}
	return total
}

// GaleraStatus reads one global status variable (e.g. wsrep_local_cert_failures) of a node.
func GaleraStatus(serverDSN, name string) (string, error) {
	db, err := sql.Open("mysql", serverDSN+"?timeout=2s")
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var k, v string
	err = db.QueryRowContext(ctx, "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = UPPER(?)", name).Scan(&k, &v)
	return v, err
}

// GaleraDatabase starts the cluster if needed, creates a fresh migrated database on it (dropped
// afterwards) and returns its DSN on every node, once every node has applied the migrations.
func GaleraDatabase(tb testing.TB) []string {
	tb.Helper()
	GaleraUp(tb)
	first, err := mysql.ParseDSN(NewDatabaseOn(tb, GaleraServerDSN(1)))
	if err != nil {
		tb.Fatal(err)
	}
	dsns := make([]string, GaleraNodes)
	for i := range dsns {
		cfg, err := mysql.ParseDSN(GaleraServerDSN(i + 1))
		if err != nil {
			tb.Fatal(err)
		}
		cfg.DBName = first.DBName
		cfg.ParseTime = true
		dsns[i] = cfg.FormatDSN()
	}
	// DDL replicates in total order; a causal read on each node waits until it is applied there.
	for _, dsn := range dsns {
		Count(tb, dsn, "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM job_lease")
	}
	return dsns
}

// OwnGalera starts a 3-node Galera cluster of the test's own with scripts/galera.sh, its SQL on
// port..port+2 (the script derives its other ports from port), for a
// test that disturbs the cluster (partitions a node) where the shared one serves other tests at
// the same time; it is stopped when the test ends. Returns the nodes' server DSNs. A cluster that
// cannot start fails the test.
func OwnGalera(tb testing.TB, port int) []string {
	tb.Helper()
	ownUntilCleanup(tb, "galera.sh", "GALERA_PORT="+strconv.Itoa(port)) // the script derives the other ports
	dsns := make([]string, GaleraNodes)
	for i := range dsns {
		dsns[i] = fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port+i)
	}
	return dsns
}
