package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

const chaosDB = "paygw_chaos"

// servers are the database servers' addresses: one MariaDB, or the Galera nodes.
func (c *chaos) servers() []string {
	if !c.o.cluster {
		return []string{fmt.Sprintf("127.0.0.1:%d", c.o.mysqlPort)}
	}
	return []string{
		fmt.Sprintf("127.0.0.1:%d", c.o.galeraPort),
		fmt.Sprintf("127.0.0.1:%d", c.o.galeraPort+1),
		fmt.Sprintf("127.0.0.1:%d", c.o.galeraPort+2),
	}
}

// redisAddrs are Redis's addresses: one server, or the cluster's six nodes.
func (c *chaos) redisAddrs() []string {
	if !c.o.cluster {
		return []string{fmt.Sprintf("127.0.0.1:%d", c.o.redisPort)}
	}
	addrs := make([]string, 6)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", c.o.redisClusterPort+i)
	}
	return addrs
}

func (c *chaos) storesName() string {
	if c.o.cluster {
		return fmt.Sprintf("Galera %s, Redis Cluster %s", strings.Join(c.servers(), " "), strings.Join(c.redisAddrs(), " "))
	}
	return fmt.Sprintf("MariaDB :%d, Redis :%d", c.o.mysqlPort, c.o.redisPort)
}

func (c *chaos) nodeName(i int) string {
	if c.o.cluster {
		return fmt.Sprintf("galera node %d", i+1)
	}
	return "MariaDB"
}

func serverDSN(addr string) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	cfg.Timeout = 3 * time.Second
	return cfg
}

// freshStores drops and creates the run's database, empties Redis, opens one checker pool per
// database node, and returns each replica's DSN (replica i writes to node i) and redis: block.
func (c *chaos) freshStores(ctx context.Context) (dsns []string, redisYAML string, err error) {
	servers := c.servers()
	admin, err := sql.Open("mysql", serverDSN(servers[0]).FormatDSN())
	if err != nil {
		return nil, "", err
	}
	defer admin.Close()
	for _, q := range []string{"DROP DATABASE IF EXISTS " + chaosDB, "CREATE DATABASE " + chaosDB + " CHARACTER SET utf8mb4"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return nil, "", fmt.Errorf("database server %s (is it started? scripts/chaos.sh starts it): %w", servers[0], err)
		}
	}
	for _, addr := range servers {
		cfg := serverDSN(addr)
		cfg.DBName, cfg.ParseTime = chaosDB, true
		dsns = append(dsns, cfg.FormatDSN())
		if c.o.cluster {
			// Every check is a causal read: it sees each write the cluster committed before it.
			cfg.Params = map[string]string{"wsrep_sync_wait": "1"}
		}
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return nil, "", err
		}
		db.SetMaxOpenConns(8)
		c.nodes = append(c.nodes, db)
	}
	c.db = c.nodes[0]

	addrs := c.redisAddrs()
	if !c.o.cluster {
		rc := redis.NewClient(&redis.Options{Addr: addrs[0]})
		err = rc.FlushAll(ctx).Err()
		_ = rc.Close() // the FLUSHALL error is the one to report
		if err != nil {
			return nil, "", fmt.Errorf("redis on %s: %w", addrs[0], err)
		}
		return dsns, fmt.Sprintf("redis:\n  addr: %q", addrs[0]), nil
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	err = rc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() })
	_ = rc.Close() // the FLUSHALL error is the one to report
	if err != nil {
		return nil, "", fmt.Errorf("redis cluster on %s: %w", addrs[0], err)
	}
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = strconv.Quote(a)
	}
	return dsns, fmt.Sprintf("redis:\n  mode: cluster\n  addrs: [%s]", strings.Join(quoted, ", ")), nil
}

// waitSchema waits until every node has applied the migrations (DDL replicates in total order;
// a causal read on a node waits for it).
func (c *chaos) waitSchema(ctx context.Context) error {
	for i, db := range c.nodes {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM db_identity`).Scan(&n); err != nil || n != 1 {
			return fmt.Errorf("%s after paygw migrate: %d identity row(s), %v", c.nodeName(i), n, err)
		}
	}
	return nil
}

// agree compares the business tables of every node, row by row through CHECKSUM TABLE; a
// Galera node that diverged from the others is a failure. Nothing to compare with one MariaDB.
func (c *chaos) agree(ctx context.Context) []string {
	if len(c.nodes) < 2 {
		return nil
	}
	const tables = "orders, idempotent_record, notify_journal, anomaly, stock, refund, payment_attempt"
	var problems []string
	sums := make([]map[string]int64, len(c.nodes))
	for i, db := range c.nodes {
		sums[i] = map[string]int64{}
		err := func() error {
			var n int // a causal read first: the node has applied every earlier commit
			if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
				return err
			}
			rows, err := db.QueryContext(ctx, "CHECKSUM TABLE "+tables)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var table string
				var sum sql.NullInt64
				if err := rows.Scan(&table, &sum); err != nil {
					return err
				}
				sums[i][table] = sum.Int64
			}
			return rows.Err()
		}()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: checksum: %v", c.nodeName(i), err))
		}
	}
	for i := 1; i < len(sums); i++ {
		for table, sum := range sums[0] {
			if sums[i][table] != sum {
				problems = append(problems, fmt.Sprintf("%s and %s differ in %s", c.nodeName(0), c.nodeName(i), table))
			}
		}
	}
	return problems
}

// counters sums monotonic counters read from several sources (Galera nodes, replicas' /metrics)
// across restarts. A source is one run of a process: a restarted one is a new source whose
// counters began at zero; only the processes there before the first sample need a baseline.
type counters struct {
	mu   sync.Mutex
	last map[string]float64 // metric@source
	sum  map[string]float64 // metric
}

// totals are counter sums by metric at one moment.
type totals map[string]float64

func (t totals) minus(before totals) totals {
	d := totals{}
	for k, v := range t {
		d[k] = v - before[k]
	}
	return d
}

// The counters a phase reports.
const (
	countCertFailures = "wsrep_local_cert_failures"
	countDeadlock     = `paygw_apply_retries_total{reason="deadlock"}`
	countLockWait     = `paygw_apply_retries_total{reason="lock_wait"}`
	countRedisDown    = `paygw_guard_total{result="redis_down"}`
	countGroups       = `paygw_apply_group_size_count`
	countGrouped      = `paygw_apply_group_size_sum`
	countCreateGroups = `paygw_create_group_size_count`
	countCreated      = `paygw_create_group_size_sum`
)

func (t *counters) observe(metric, source string, v float64, fresh bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last, t.sum = map[string]float64{}, map[string]float64{}
	}
	key := metric + "@" + source
	prev, seen := t.last[key]
	if !seen && !fresh {
		prev = v // a process older than the run: its first reading is the baseline
	}
	t.sum[metric] += max(0, v-prev)
	t.last[key] = max(v, prev)
}

// sample reads every source that answers (a killed one is read again after its restart) and
// returns the sums so far.
func (t *counters) sample(ctx context.Context, c *chaos) totals {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if c.o.cluster {
		for i, db := range c.nodes {
			var name string
			var v float64
			err := db.QueryRowContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
				WHERE VARIABLE_NAME = 'WSREP_LOCAL_CERT_FAILURES'`).Scan(&name, &v)
			if err == nil {
				starts := c.galera.starts(i)
				t.observe(countCertFailures, fmt.Sprintf("%s start %d", c.nodeName(i), starts), v, starts > 0)
			}
		}
	}
	for _, r := range c.replicas {
		if r.running() {
			t.scrape(ctx, r)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := totals{}
	for k, v := range t.sum {
		out[k] = v
	}
	return out
}

// scrape reads a replica's retry and guard counters from its admin listener's /metrics.
func (t *counters) scrape(ctx context.Context, r *replica) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.admin+"/metrics", nil)
	if err != nil {
		return
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, m := range []string{countDeadlock, countLockWait, countRedisDown, countGroups, countGrouped, countCreateGroups, countCreated} {
			if v, ok := strings.CutPrefix(line, m+" "); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					starts := r.startCount()
					t.observe(m, fmt.Sprintf("replica %d start %d", r.n, starts), f, starts > 1)
				}
			}
		}
	}
}
