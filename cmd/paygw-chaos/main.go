// Command paygw-chaos runs three paygw replicas on one MariaDB and one Redis, plays the payment
// channels against them while it kills and restarts each piece in turn, and checks from the
// database that no payment was lost, from the replicas' answers that none was answered APPLIED
// twice, and from what a webhook sink (killed too) recorded that the merchant saw every event, in
// each order's order, and each payment as one order.paid. scripts/chaos.sh starts it.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/simulate"
)

type options struct {
	short       bool
	bin         string
	script      string
	repo        string // the checkout holding scripts/
	servicesDir string
	mysqlPort   int
	redisPort   int
	work        string
	speedup     float64
	minSpan     time.Duration
	stormOrders int
	orders      int
	loadFor     time.Duration
	phaseLimit  time.Duration
	doc         string
	guardTTL    time.Duration

	// --cluster: a 3-node Galera cluster (scripts/galera.sh) and a 6-node Redis Cluster
	// (scripts/redis-cluster.sh) instead of one MariaDB and one Redis.
	cluster          bool
	galeraScript     string
	galeraPort       int
	redisClusterPort int
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paygw-chaos:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("paygw-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.short, "short", false, "the CI version: 1k orders per phase, each fault once")
	fs.StringVar(&o.bin, "bin", "bin/paygw", "the paygw binary under test")
	fs.StringVar(&o.script, "services", "scripts/services.sh", "scripts/services.sh (restarts MariaDB and Redis)")
	fs.IntVar(&o.mysqlPort, "mysql-port", 3407, "port of the chaos run's own MariaDB (started by services.sh)")
	fs.IntVar(&o.redisPort, "redis-port", 6479, "port of the chaos run's own Redis (started by services.sh)")
	fs.StringVar(&o.work, "work", "", "directory for keys, configs and replica logs (required)")
	fs.Float64Var(&o.speedup, "speedup", 1000, "retry schedules are divided by this")
	fs.DurationVar(&o.minSpan, "min-span", 30*time.Second, "no channel's compressed schedule spans less than this")
	fs.IntVar(&o.stormOrders, "storm-orders", 0, "orders in the storm (default 10000, 1000 with --short)")
	fs.IntVar(&o.orders, "orders", 0, "orders per fault phase (default 10000, 1000 with --short)")
	fs.DurationVar(&o.loadFor, "load-for", 0, "how long each fault phase releases its orders (default 25s, 5s with --short)")
	fs.DurationVar(&o.phaseLimit, "phase-limit", 0, "deadline of each phase (default 150s, 120s with --short)")
	fs.DurationVar(&o.guardTTL, "guard-ttl", 30*time.Second, "idempotency.redis_ttl of the replicas (the shipped default; the trade guard is capped at 10s)")
	fs.StringVar(&o.doc, "doc", "", "write the figures into this markdown file between the chaos markers")
	fs.BoolVar(&o.cluster, "cluster", false, "run on a Galera cluster and a Redis Cluster (replica i writes to node i+1)")
	fs.StringVar(&o.galeraScript, "galera", "scripts/galera.sh", "scripts/galera.sh (kills and restarts Galera nodes) with --cluster")
	fs.IntVar(&o.galeraPort, "galera-port", 3321, "SQL port of the Galera cluster's node 1 with --cluster (node i: port+i-1; scripts/galera.sh derives the other ports)")
	fs.IntVar(&o.redisClusterPort, "redis-cluster-port", 7201, "port of the Redis Cluster's first node with --cluster (the next five are the others)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	def := func(v *int, full, short int) {
		if *v == 0 {
			*v = map[bool]int{false: full, true: short}[o.short]
		}
	}
	defd := func(v *time.Duration, full, short time.Duration) {
		if *v == 0 {
			*v = map[bool]time.Duration{false: full, true: short}[o.short]
		}
	}
	def(&o.stormOrders, 10000, 1000)
	def(&o.orders, 10000, 1000)
	defd(&o.loadFor, 25*time.Second, 5*time.Second)
	defd(&o.phaseLimit, 150*time.Second, 120*time.Second)
	if o.work == "" {
		return errors.New("--work DIR is required")
	}
	o.repo = filepath.Dir(filepath.Dir(mustAbs(o.script)))
	o.servicesDir = filepath.Join(o.repo, ".services")

	c, err := setUp(ctx, o, stderr)
	if c != nil {
		defer c.tearDown()
	}
	if err != nil {
		return err
	}
	start := time.Now()
	// The phases in their order; a phase runs on the single-node setup, the cluster, or both.
	type phase struct {
		name            string
		fn              func(context.Context) (*figures, error)
		single, cluster bool
	}
	var phases []phase
	for _, p := range []phase{
		{"storm", c.storm, true, true},
		{"storm-unguarded", c.stormUnguarded, false, true},
		{"galera-node", c.galeraKill, false, true},
		{"redis-master", c.redisMasterKill, false, true},
		{"redis", c.redisKill, true, false},
		{"replica-kill", c.replicaKill, true, true},
		{"group-kill", c.groupKill, true, true},
		{"mariadb", c.mariadbRestart, true, false},
		{"sigterm", c.sigterm, true, false},
	} {
		if (o.cluster && p.cluster) || (!o.cluster && p.single) {
			phases = append(phases, p)
		}
	}
	var all []*figures
	for _, p := range phases {
		c.logf("phase %s", p.name)
		before := c.counters.sample(ctx, c)
		pctx, cancel := context.WithTimeout(ctx, o.phaseLimit)
		// The merchant's sink goes down too, halfway through the phase's load.
		stopKill := c.sink.killDuring(pctx, o.loadFor/2)
		f, err := p.fn(pctx)
		if kerr := stopKill(); err == nil && kerr != nil {
			err = fmt.Errorf("webhook sink: %w", kerr)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("phase %s: %w", p.name, err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		f.counts = c.counters.sample(ctx, c).minus(before)
		if err := c.verify(ctx, f); err != nil {
			return fmt.Errorf("phase %s: checking: %w", p.name, err)
		}
		all = append(all, f)
		c.logf("phase %s: %d requests, %d problem(s), took %s", p.name, f.st.requests.Load(), len(f.problems), f.took.Round(time.Millisecond))
	}
	// Webhooks: once paygw owes the sink nothing, what the sink recorded must hold.
	c.logf("webhooks: waiting for the deliveries to drain")
	hooks, err := c.settleHooks(ctx, 90*time.Second)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	c.logf("webhooks: drained in %s; %d events, %d received, %d problem(s)", hooks.drain.Round(time.Millisecond), hooks.v.events, hooks.v.received, len(hooks.problems))

	// The end: every replica still stops cleanly, and the whole database holds.
	final := &figures{name: "end", st: newStats()}
	for _, r := range c.replicas {
		if code, err := r.signal(syscall.SIGTERM, 20*time.Second); err != nil || code != 0 {
			final.problems = append(final.problems, fmt.Sprintf("replica %d: exit %d after SIGTERM (%v)", r.n, code, err))
		}
	}
	if err := c.sweep(ctx); err != nil {
		return err
	}
	var keys int
	for _, f := range all {
		if f.creates != nil {
			keys += f.creates.keys
		}
	}
	for i, db := range c.nodes {
		node := c.nodeName(i)
		g, err := checkGlobal(ctx, db, c.timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		for _, p := range g.problems() {
			final.problems = append(final.problems, node+": "+p)
		}
		// The create path: one order and one unit of stock per key, whatever the faults did.
		var created, stock int
		if err := db.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM orders WHERE sku = ?), num FROM stock WHERE sku = ?`,
			createSKU, createSKU).Scan(&created, &stock); err != nil {
			return fmt.Errorf("%s: %w", node, err)
		}
		if created != keys || stock != initialStock-keys {
			final.problems = append(final.problems, fmt.Sprintf("%s: create path: %d orders and stock %d for %d keys, want %d and %d",
				node, created, stock, keys, keys, initialStock-keys))
		}
	}
	final.problems = append(final.problems, c.agree(ctx)...)

	rep := report(o, all, hooks, final, time.Since(start))
	fmt.Fprint(stdout, rep)
	if o.doc != "" {
		if err := writeDoc(o, o.doc, rep); err != nil {
			return err
		}
		c.logf("figures written to %s", o.doc)
	}
	n := len(final.problems) + len(hooks.problems)
	for _, f := range all {
		n += len(f.problems)
	}
	if n > 0 {
		return fmt.Errorf("%d invariant(s) failed (replica logs in %s)", n, o.work)
	}
	return nil
}

const initialStock = 1000000

// chaos is one run: its services, replicas, database handle and senders.
type chaos struct {
	o        options
	log      io.Writer
	svc      services
	galera   *galera
	db       *sql.DB   // the checker's pool: nodes[0]
	nodes    []*sql.DB // one pool per database node (one in single mode), causal reads on Galera
	counters counters
	replicas []*replica
	urls     []string
	cfgs     []string
	token    string
	timeout  time.Duration // idempotency.db_timeout_clean_seconds
	sender   *sender
	sink     *sinkProc // the merchant's webhook receiver
}

func (c *chaos) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "chaos: %s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

func setUp(ctx context.Context, o options, logw io.Writer) (*chaos, error) {
	c := &chaos{o: o, log: logw, timeout: 3 * time.Second,
		svc:    services{script: o.script, dir: o.servicesDir, mysqlPort: o.mysqlPort, redisPort: o.redisPort},
		galera: &galera{script: o.galeraScript, port: o.galeraPort}}
	if err := os.MkdirAll(o.work, 0o700); err != nil {
		return nil, err
	}
	// The checker's own pool meets the MariaDB restart too; database/sql retries, the log is noise.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	redis.SetLogger(guard.LibraryLogger(zerolog.Nop())) // the probes of killed Redis nodes: expected refusals
	keys := filepath.Join(o.work, "keys")
	manifest, err := simulate.WriteKeys(keys, time.Now())
	if err != nil {
		return nil, fmt.Errorf("sandbox keys: %w", err)
	}
	signers, err := simulate.LoadSigners(keys)
	if err != nil {
		return nil, err
	}
	channelsYAML, err := os.ReadFile(manifest.ConfigPath)
	if err != nil {
		return nil, err
	}

	dsns, redisYAML, err := c.freshStores(ctx)
	if err != nil {
		return c, err
	}

	if err := c.startSink(ctx); err != nil {
		return c, err
	}

	// Three replicas' configs: same database (replica i on Galera node i+1), same Redis, own ports,
	// one webhook endpoint: the sink.
	c.token = "chaos-" + randomHex(16)
	for i := range 3 {
		addr, err := freeAddr()
		if err != nil {
			return c, err
		}
		admin, err := freeAddr()
		if err != nil {
			return c, err
		}
		cfg := filepath.Join(o.work, fmt.Sprintf("paygw-%d.yaml", i))
		body := fmt.Sprintf(`http:
  addr: %q
  shutdown_timeout: 10s
log:
  level: info
  format: json
admin:
  addr: %q
mysql:
  dsn: %q
  max_open_conns: 24
%s
idempotency:
  redis_ttl: %s
  db_timeout_clean_seconds: %d
auth:
  api_tokens:
    - name: chaos
      token: %q
%s
%s`, addr, admin, dsns[i%len(dsns)], redisYAML, o.guardTTL, int(c.timeout/time.Second), c.token, c.sink.webhooksYAML(), channelsYAML)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil { // #nosec G703 -- a file of the operator's --work directory
			return c, err
		}
		c.cfgs = append(c.cfgs, cfg)
		c.urls = append(c.urls, "http://"+addr)
		c.replicas = append(c.replicas, &replica{n: i, bin: o.bin, addr: addr, admin: admin, cfg: cfg,
			logPath: filepath.Join(o.work, fmt.Sprintf("replica-%d.log", i))})
	}
	if out, err := c.paygw(ctx, "migrate", "--config", c.cfgs[0]); err != nil {
		return c, fmt.Errorf("paygw migrate: %v\n%s", err, out)
	}
	if err := c.waitSchema(ctx); err != nil {
		return c, err
	}
	for _, r := range c.replicas {
		if err := r.start(ctx); err != nil {
			return c, err
		}
	}
	if err := putStock(ctx, c.urls[0], c.token, initialStock); err != nil {
		return c, err
	}

	speedup := map[string]float64{}
	for _, ch := range channelNames {
		speedup[ch] = speedupOf(o, ch)
	}
	c.sender = &sender{
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second,
		}},
		signers: signers, urls: c.urls, speedup: speedup, sem: make(chan struct{}, 192),
	}
	c.logf("3 replicas on %s; %s; speedup %v", strings.Join(c.urls, " "), c.storesName(), speedup)
	return c, nil
}

// logPaths are the replicas' logs, where each answer's outcome is (appliedAnswers).
func (c *chaos) logPaths() []string {
	paths := make([]string, len(c.replicas))
	for i, r := range c.replicas {
		paths[i] = r.logPath
	}
	return paths
}

func (c *chaos) tearDown() {
	for _, r := range c.replicas {
		r.stop()
	}
	if c.sink != nil {
		c.sink.stop()
	}
	for _, db := range c.nodes {
		_ = db.Close() // best-effort teardown
	}
}

// paygw runs a one-shot paygw command (migrate, sweep) for at most 30 s.
func (c *chaos) paygw(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.o.bin, args...) // #nosec G204 -- our own paygw binary (--bin) with this tool's fixed subcommands
	cmd.Env = childEnv()
	return cmd.CombinedOutput()
}

func (c *chaos) sweep(ctx context.Context) error {
	if out, err := c.paygw(ctx, "sweep", "--config", c.cfgs[0]); err != nil {
		return fmt.Errorf("paygw sweep: %v\n%s", err, out)
	}
	return nil
}

// verify runs the sweeper, then checks the phase's orders and the whole database.
func (c *chaos) verify(ctx context.Context, f *figures) error {
	if err := c.sweep(ctx); err != nil {
		return err
	}
	for i, db := range c.nodes {
		v, err := checkOrders(ctx, db, f.prefix, f.orders)
		if err != nil {
			return fmt.Errorf("%s: %w", c.nodeName(i), err)
		}
		g, err := checkGlobal(ctx, db, c.timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", c.nodeName(i), err)
		}
		if i == 0 {
			f.v, f.g = v, g
			f.problems = append(f.problems, v.wrong...)
			f.problems = append(f.problems, g.problems()...)
			continue
		}
		if v.paid != f.v.paid || v.lost != f.v.lost || g != f.g {
			f.fail("%s disagrees with %s: paid %d/%d, lost %d/%d, %+v/%+v", c.nodeName(i), c.nodeName(0),
				v.paid, f.v.paid, v.lost, f.v.lost, g, f.g)
		}
	}
	// What the replicas answered, whichever node they wrote to.
	applied, err := appliedAnswers(c.logPaths(), f.prefix)
	if err != nil {
		return err
	}
	answers := verdict{}
	answers.countAnswers(applied, f.orders)
	f.v.doubleApplies, f.v.unanswered = answers.doubleApplies, answers.unanswered
	f.problems = append(f.problems, answers.wrong...)
	f.problems = append(f.problems, c.agree(ctx)...)
	if f.needGroups && f.counts[countGroups] == 0 {
		f.fail("no group transaction was committed: the phase did not test group apply")
	}
	if n := f.st.gaveUp.Load(); n > 0 {
		f.problems = append(f.problems, fmt.Sprintf("%d sender(s) gave up without a success", n))
	}
	if n := f.st.refusals.Load(); n > 0 {
		f.problems = append(f.problems, fmt.Sprintf("%d refusal(s) (4xx) of clean, correctly signed notifications", n))
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

func (c *chaos) mysqlPing(ctx context.Context) error {
	conn, err := c.db.Conn(ctx) // a fresh connection once the old ones are found dead
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.PingContext(ctx)
}

func (c *chaos) redisPing(ctx context.Context) error {
	rc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", c.o.redisPort), MaxRetries: -1})
	defer rc.Close()
	return rc.Ping(ctx).Err()
}
