package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/alipay"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// bench is one run: its processes, its data and its results.
type bench struct {
	opts    options
	work    string
	log     io.Writer
	stdout  io.Writer
	started time.Time

	admin    *admin
	redis    *benchRedis
	gw       *gateway
	gwGrowth *gateway
	alipay   *alipay.Channel

	// The outbox's variants (outbox.go).
	gwUnseq, gwB *gateway
	unseqRelease func()

	// The delivery phase's drains (hooks.go), by name, in the order they ran.
	drains     map[string]drained
	drainOrder []string

	verifyProc    *proc // the verify-only ceiling
	alipayAppID   string
	alipayKeyFile string

	results     map[string]result
	order       []string
	profiles    map[string]string // scenario -> top of its CPU profile
	purgedRows  int64             // rows the purge deleted during purge_on
	background  float64
	growthGen   time.Duration
	growthIndex indexFit

	// What the phases share (phases.go).
	sets                      map[string]*set
	keys                      simulate.Manifest
	cl                        *client // 32 (--concurrency) in flight
	url, growthURL, verifyURL string
}

// setSpec is one set of orders and their notifications: fresh WAIT_PAY orders, each told paid
// (status "") or closed; or, with of, refunds of the orders of the set named (paid before).
type setSpec struct {
	name, db string
	n        int
	status   string // a simulate.Status*; "" is paid
	of       string
}

// One set of orders per scenario that needs fresh WAIT_PAY orders.
type set struct {
	name   string
	msgs   []message
	events []payment.Event // verified form of msgs (for the raw ceiling)
}

func (b *bench) cleanup() {
	b.verifyProc.stop()
	b.stopVariants()
	b.gw.stop()
	b.gwGrowth.stop()
	if b.redis != nil {
		b.redis.stop()
	}
	if b.admin != nil {
		if !b.opts.keepDB {
			b.admin.drop()
		}
		_ = b.admin.db.Close() // best-effort cleanup
	}
}

func (b *bench) run(ctx context.Context) error {
	b.started = time.Now()
	b.results, b.profiles, b.drains = map[string]result{}, map[string]string{}, map[string]drained{}
	o := b.opts

	// Services: the shared MariaDB (own databases), our own Redis.
	var err error
	if b.admin, err = openAdmin(ctx, o.mysqlDSN); err != nil {
		return err
	}
	// A growth table kept by an earlier run (--keep-db) is used again when it is big enough:
	// 100 M rows take a quarter of an hour to generate.
	reused := false
	if o.keepDB && o.growthRows > 0 {
		if reused, err = b.admin.reuseGrowth(ctx, growthDB, o.growthRows); err != nil {
			return err
		}
	}
	if err := b.admin.recreate(ctx, benchDB); err != nil {
		return err
	}
	for _, db := range []string{unseqDB, bDB} {
		if err := b.admin.recreate(ctx, db); err != nil {
			return err
		}
	}
	if reused {
		b.logf("%s.idempotent_record kept from an earlier run: %d generated rows", growthDB, o.growthRows)
		err = b.admin.migrate(ctx, growthDB)
	} else {
		err = b.admin.recreate(ctx, growthDB)
	}
	if err != nil {
		return err
	}
	port, err := freePort(o.redisPort)
	if err != nil {
		return err
	}
	b.redis = &benchRedis{port: port, dir: b.work}
	if err := b.redis.start(ctx); err != nil {
		return err
	}
	b.logf("redis-server on %s; databases %s and %s migrated", b.redis.addr(), benchDB, growthDB)

	// The growth table first: it is the longest step, and it must be in place before the
	// rounds that compare it with the empty one.
	if !reused && o.growthRows > 0 {
		t := time.Now()
		b.logf("growing %s.idempotent_record to %d rows", growthDB, o.growthRows)
		if err := b.admin.growRecords(ctx, growthDB, o.growthRows, func(done int64) {
			b.logf("  %d rows (%.0f rows/s)", done, float64(done)/time.Since(t).Seconds())
		}); err != nil {
			return err
		}
		b.growthGen = time.Since(t)
	}
	if o.growthRows > 0 {
		if b.growthIndex, err = b.admin.warmUniqueKey(ctx, growthDB); err != nil {
			return err
		}
		b.logf("uk_idem_key of %d rows: %.2f GiB, read into a buffer pool of %.2f GiB", o.growthRows,
			b.growthIndex.indexGiB, b.growthIndex.poolGiB)
		if b.growthIndex.indexGiB > b.growthIndex.poolGiB*0.8 {
			b.logf("note: the unique index does not fit the buffer pool; its inserts will wait for disk (see docs/performance.md)")
		}
	}

	// Keys, signer, verifier.
	keys, err := simulate.WriteKeys(filepath.Join(b.work, "keys"), time.Now())
	if err != nil {
		return err
	}
	signers, err := simulate.LoadSigners(filepath.Join(b.work, "keys"))
	if err != nil {
		return err
	}
	signer := signers["alipay"]
	pub, err := os.ReadFile(filepath.Join(b.work, "keys", keys.Alipay.PublicKeyFile))
	if err != nil {
		return err
	}
	key, err := channels.ParseRSAPublicKey(string(pub))
	if err != nil {
		return err
	}
	b.alipay = alipay.New(keys.Alipay.AppID, "", key)
	b.alipayAppID, b.alipayKeyFile = keys.Alipay.AppID, filepath.Join(b.work, "keys", keys.Alipay.PublicKeyFile)

	// Orders and their pre-signed notifications, one set per use.
	sizes := []setSpec{
		{name: "warm", db: benchDB, n: 300}, {name: "unique", db: benchDB, n: b.n(10000)}, {name: "raw", db: benchDB, n: b.n(10000)},
		{name: "mixed", db: benchDB, n: b.n(10000) / 8}, {name: "down", db: benchDB, n: b.n(5000)}, {name: "empty", db: benchDB, n: b.n(8000)},
		{name: "gwarm", db: growthDB, n: 300}, {name: "growth", db: growthDB, n: b.n(8000)},
		{name: "unique256", db: benchDB, n: b.n(10000)}, {name: "raw256", db: benchDB, n: b.n(10000)},
		{name: "serialg", db: benchDB, n: b.n(1000)}, {name: "serials", db: benchDB, n: b.n(1000)},
		{name: "rate70", db: benchDB, n: b.n(8000)}, {name: "raw70", db: benchDB, n: b.n(8000)},
		{name: "purgeoff", db: growthDB, n: b.n(4000)}, {name: "purgeon", db: growthDB, n: b.n(4000)},
		{name: "payonly", db: benchDB, n: b.n(8000)}, {name: "mixpay", db: benchDB, n: b.n(8000) * 8 / 10},
		{name: "closes", db: benchDB, n: b.n(8000)/10 + b.n(4000), status: simulate.StatusClosed},
		{name: "topay", db: benchDB, n: b.n(8000)/10 + b.n(4000)},
		{name: "refunds", db: benchDB, n: b.n(8000)/10 + b.n(4000), status: simulate.StatusRefund, of: "topay"},
	}
	sizes = append(sizes, b.variantSets()...)
	if o.only != "" {
		sizes = slices.DeleteFunc(sizes, func(s setSpec) bool { return !slices.Contains(subsets[o.only], s.name) })
	}
	var all []order
	for _, s := range sizes {
		for i := 0; i < s.n; i++ {
			all = append(all, order{tradeNo: fmt.Sprintf("B%s%07d", cmp.Or(s.of, s.name), i), amountFen: 100 + int64(i%9000), status: s.status})
		}
	}
	b.logf("signing %d notifications", len(all))
	msgs := make([]message, len(all))
	events := make([]payment.Event, len(all))
	if err := parallel(len(all), 4, func(i int) error {
		m, err := signer.Sign(simulate.Payment{TradeNo: all[i].tradeNo, AmountFen: all[i].amountFen, Status: all[i].status})
		if err != nil {
			return err
		}
		msgs[i] = message{body: m.Body, contentType: m.Header.Get("Content-Type")}
		ev, err := b.alipay.Verify(m.Body, m.Header, time.Now())
		events[i] = ev
		return err
	}); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	sets := map[string]*set{}
	off, seedStart := 0, time.Now()
	for _, s := range sizes {
		sets[s.name] = &set{name: s.name, msgs: msgs[off : off+s.n], events: events[off : off+s.n]}
		if s.of == "" { // a refund set's orders are its payment set's
			if err := b.admin.seedOrders(ctx, s.db, all[off:off+s.n]); err != nil {
				return err
			}
		}
		off += s.n
	}
	b.logf("seeded %d WAIT_PAY orders in %.1fs", len(all), time.Since(seedStart).Seconds())
	if b.background, err = b.admin.background(ctx, 2*time.Second); err != nil {
		return err
	}
	b.logf("background load on the shared MariaDB: %.1f statements/s from other clients", b.background)

	// The verify-only ceiling (in this process), the gateway, and a second gateway on the
	// growth database; all share the bench Redis.
	verifyURL, err := b.startVerifyOnly()
	if err != nil {
		return err
	}
	if b.gw, err = b.startGateway(ctx, keys, benchDB, "main", o.groupLanes); err != nil {
		return err
	}
	if b.gwGrowth, err = b.startGateway(ctx, keys, growthDB, "growth", o.groupLanes); err != nil {
		return err
	}
	b.url, b.growthURL, b.verifyURL = b.gw.url+"/notify/alipay", b.gwGrowth.url+"/notify/alipay", verifyURL
	b.sets, b.keys, b.cl = sets, keys, newClient(o.concurrency)
	if o.wants("tail", "outbox") {
		if err := b.startVariants(ctx, keys); err != nil {
			return err
		}
		b.warmVariants(ctx)
	}
	b.warm()
	b.cl.run(ctx, verifyURL, sets["warm"].msgs)
	b.cl.run(ctx, b.growthURL, sets["gwarm"].msgs)

	// The phases, in this order; --only runs a subset.
	for _, ph := range []struct {
		subsets []string
		run     func(context.Context) error
	}{
		{[]string{"tail", "outbox"}, b.throughput},
		{nil, b.throughput256},
		{nil, b.serial},
		{[]string{"creates"}, b.creates},
		{[]string{"tail"}, b.tail},
		{[]string{"others"}, b.others},
		{nil, b.repeats},
		{[]string{"growth"}, b.growth},
		{nil, b.purge},
		{[]string{"delivery"}, b.deliveries},
		{[]string{"lookups"}, b.lookups},
		{nil, b.redisDown},
	} {
		if o.wants(ph.subsets...) {
			if err := ph.run(ctx); err != nil {
				return err
			}
		}
	}
	if o.wants("tail", "outbox") {
		b.stopVariants()
		numbered, all, err := b.unsequenced(ctx)
		if err != nil {
			return err
		}
		if numbered > 0 {
			return fmt.Errorf("%s: %d of its %d events were numbered while the load tool held its sequencer lease", unseqDB, numbered, all)
		}
	}
	b.gw.stop()
	b.logf("done")
	return b.report()
}

// rounds: each ceiling runs in rounds alternating with the scenario it bounds, so that whatever
// else loads this machine weighs on both alike.
const rounds = 5

// warm sends the main gateway a few hundred payments (connections, caches).
func (b *bench) warm() { b.cl.run(context.Background(), b.url, b.sets["warm"].msgs) }

// n scales a base request count (BENCH_SCALE), to no fewer than 8 a client.
func (b *bench) n(base int) int { return max(int(float64(base)*b.opts.scale), 8*b.opts.concurrency) }

// step is one scenario of an interleaved run; fn runs its round r.
type step struct {
	name    string
	profile string   // when set, a CPU profile of the gateway is taken during the middle round
	gw      *gateway // the gateway to profile (default: the main one)
	fn      func(r int) result
}

// chunk is round r of n of a list.
func chunk[T any](list []T, r, n int) []T { return list[r*len(list)/n : (r+1)*len(list)/n] }

// interleave runs the steps' rounds in turn (a1 b1 a2 b2 ...), each between two Questions
// readings, and records each step's merged result.
func (b *bench) interleave(ctx context.Context, rounds int, steps ...step) error {
	got := make([][]result, len(steps))
	for r := 0; r < rounds; r++ {
		for i, s := range steps {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var prof chan string
			if s.profile != "" && r == rounds/2 && r > 0 {
				gw := s.gw
				if gw == nil {
					gw = b.gw
				}
				d := got[i][r-1].Elapsed * 8 / 10
				prof = make(chan string, 1)
				go func() { prof <- b.profile(ctx, gw, s.profile, d) }()
				time.Sleep(50 * time.Millisecond) // the profiler starts
			}
			res, err := b.admin.measure(ctx, func() result { return s.fn(r) })
			if err != nil {
				return err
			}
			if prof != nil {
				b.profiles[s.name] = <-prof
			}
			got[i] = append(got[i], res)
		}
	}
	for i, s := range steps {
		var rs []result
		for _, r := range got[i] {
			if r.Requests > 0 {
				rs = append(rs, r)
			}
		}
		m := merge(rs)
		b.results[s.name] = m
		b.order = append(b.order, s.name)
		b.logf("%-18s %7d req  %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %d  sql/req %.3f (mean %.3f)",
			s.name, m.Requests, m.RPS, m.P50, m.P99, m.Errors, m.SQLMin, m.perRequest())
	}
	return nil
}

// profile takes a CPU profile of the gateway through its admin listener and returns the top
// of `go tool pprof -top`.
func (b *bench) profile(ctx context.Context, gw *gateway, name string, d time.Duration) string {
	secs := max(1, int(d.Seconds()))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.adminURL+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "profile failed: " + err.Error()
	}
	defer resp.Body.Close()
	path := filepath.Join(b.opts.out, name+".pprof")
	f, err := os.Create(path) // #nosec G304 -- a profile in the operator's --out directory
	if err != nil {
		return err.Error()
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err.Error()
	}
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=25", gw.bin, path).CombinedOutput() // #nosec G204 -- go tool pprof on our own gateway binary and the profile just written
	if err != nil {
		return "pprof failed: " + err.Error() + "\n" + string(out)
	}
	top := shortShapes(string(out))
	_ = os.WriteFile(filepath.Join(b.opts.out, name+".top.txt"), []byte(top), 0o600) // best effort: the top is also printed
	return top
}

// shortShapes writes the type arguments of generic functions in a pprof top, which pprof spells
// out field by field (internal/batch.(*Queue[go.shape.struct { Channel string; ... }]).Do), as
// "[...]".
func shortShapes(top string) string {
	var out strings.Builder
	for {
		i := strings.Index(top, "[go.shape.")
		if i < 0 {
			return out.String() + top
		}
		out.WriteString(top[:i] + "[...]")
		depth, j := 0, i
		for ; j < len(top); j++ {
			if top[j] == '[' {
				depth++
			} else if top[j] == ']' {
				if depth--; depth == 0 {
					break
				}
			}
		}
		top = top[min(j+1, len(top)):]
	}
}

// startVerifyOnly serves the verify-only ceiling: the same echo framework, body limit and
// verifier as the gateway, then `success`, with no Redis and no SQL.
// startVerifyOnly runs the verify-only ceiling as a process of its own (this binary's hidden
// `verify-only` mode), so that it pays the same process hop, scheduling and loopback as the
// gateway does; in the load tool's own process it would flatter the ceiling on two cores.
func (b *bench) startVerifyOnly() (string, error) {
	port, err := freePort(0)
	if err != nil {
		return "", err
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	b.verifyProc, err = startProc("verify-only", filepath.Join(b.work, "verify-only.log"), self, "verify-only",
		"--listen", addr, "--app-id", b.alipayAppID, "--public-key", b.alipayKeyFile)
	if err != nil {
		return "", err
	}
	url := "http://" + addr + "/notify/alipay"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
			_ = res.Body.Close() // a probe
			return url, nil
		}
		if b.verifyProc.exited() || time.Now().After(deadline) {
			return "", fmt.Errorf("verify-only ceiling did not start (see %s)", filepath.Join(b.work, "verify-only.log"))
		}
	}
}

// serveVerifyOnly is the verify-only ceiling: a bare echo handler that verifies the signed
// Alipay notification with channels.Alipay and answers success. No Redis, no SQL.
func serveVerifyOnly(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("verify-only", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	appID := fs.String("app-id", "", "Alipay app_id")
	keyFile := fs.String("public-key", "", "Alipay public key PEM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pub, err := os.ReadFile(*keyFile) // #nosec G304 -- the bench's own sandbox key
	if err != nil {
		return err
	}
	key, err := channels.ParseRSAPublicKey(string(pub))
	if err != nil {
		return err
	}
	alipay := alipay.New(*appID, "", key)
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.POST("/notify/alipay", func(c echo.Context) error {
		body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, 1<<20))
		if err != nil {
			return c.Blob(http.StatusRequestEntityTooLarge, "text/plain;charset=utf-8", []byte("fail"))
		}
		if _, err := alipay.Verify(body, c.Request().Header, time.Now()); err != nil {
			return c.Blob(http.StatusBadRequest, "text/plain;charset=utf-8", []byte("fail"))
		}
		return c.Blob(http.StatusOK, "text/plain;charset=utf-8", []byte("success"))
	})
	srv := &http.Server{Addr: *listen, Handler: e, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close() // stopping
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (b *bench) startGateway(ctx context.Context, keys simulate.Manifest, db, name string, lanes int) (*gateway, error) {
	return b.startGatewayBin(ctx, keys, db, name, lanes, b.opts.gatewayBin)
}

// startGatewayBin starts the paygw binary bin on the database db.
func (b *bench) startGatewayBin(ctx context.Context, keys simulate.Manifest, db, name string, lanes int, bin string) (*gateway, error) {
	return b.startGatewayWith(ctx, keys, db, name, lanes, bin, "")
}

// startGatewayWith starts the paygw binary bin on the database db, with extra (YAML of sections
// the bench config does not have) added to its configuration.
func (b *bench) startGatewayWith(ctx context.Context, keys simulate.Manifest, db, name string, lanes int, bin, extra string) (*gateway, error) {
	httpPort, err := freePort(0)
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort(0)
	if err != nil {
		return nil, err
	}
	channelsYAML, err := os.ReadFile(keys.ConfigPath)
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`# generated by paygw-load
http:
  addr: "127.0.0.1:%d"
log:
  level: warn
mysql:
  dsn: %q
  max_open_conns: %d
  group_lanes: %d
redis:
  addr: %q
admin:
  addr: "127.0.0.1:%d"
# The growth table's rows are 30 days old: the gateway's own daily purge must leave them to the
# purge scenario, which runs the purge itself while it measures.
idempotency:
  retention: 87600h
auth:
  api_tokens:
    - name: %s
      token: %q
reconcile:
  query_interval: 0s
`, httpPort, b.admin.dsn(db), b.opts.concurrency, lanes, b.redis.addr(), adminPort, createScope, benchToken) + extra + string(channelsYAML)
	path := filepath.Join(b.work, "paygw-"+name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil { // #nosec G703 -- a config in the bench's own temporary work directory
		return nil, err
	}
	gw := &gateway{
		name: name, bin: bin, config: path, dir: b.work,
		url: fmt.Sprintf("http://127.0.0.1:%d", httpPort), adminURL: fmt.Sprintf("http://127.0.0.1:%d", adminPort),
	}
	if err := gw.start(ctx); err != nil {
		return nil, err
	}
	b.logf("gateway %q on %s serving on %s (admin %s)", name, db, gw.url, gw.adminURL)
	return gw, nil
}

var errNoResults = errors.New("no results")

// figure is one line of the report's second table: a ratio or count, and its target.
type figure struct {
	key    string
	needs  string // the scenario the figure is of; a run without it (--only growth) omits it
	value  float64
	target string
	ok     bool
}

// report prints the table and writes latest.json.
func (b *bench) report() error {
	if len(b.results) == 0 && len(b.drains) == 0 {
		return errNoResults
	}
	r := b.results
	ratio := func(a, c string) float64 {
		if r[c].RPS == 0 {
			return 0
		}
		return r[a].RPS / r[c].RPS
	}
	p99ratio := func(a, c string) float64 {
		if r[c].P99 == 0 {
			return 0
		}
		return r[a].P99 / r[c].P99
	}
	out := map[string]any{
		"timestamp":                  time.Now().UTC().Format(time.RFC3339),
		"concurrency":                b.opts.concurrency,
		"scale":                      b.opts.scale,
		"cpus":                       numCPU(),
		"background_questions_per_s": round(b.background, 1),
		"growth_rows":                b.opts.growthRows,
		"growth_generate_s":          round(b.growthGen.Seconds(), 1),
		"growth_unique_key_gib":      round(b.growthIndex.indexGiB, 2),
		"buffer_pool_gib":            round(b.growthIndex.poolGiB, 2),
		"total_s":                    round(time.Since(b.started).Seconds(), 1),
	}
	for _, name := range b.order {
		x := r[name]
		out[name+"_requests"] = x.Requests
		out[name+"_rps"] = round(x.RPS, 0)
		out[name+"_p50_ms"] = round(x.P50, 3)
		out[name+"_p90_ms"] = round(x.P90, 3)
		out[name+"_p99_ms"] = round(x.P99, 3)
		out[name+"_errors"] = x.Errors
		out[name+"_sql_per_request"] = round(x.SQLMin, 3)
		out[name+"_sql_per_request_mean"] = round(x.perRequest(), 3)
	}
	// The growth target: 0.90 at 10 M rows, 0.80 at 100 M.
	growthTarget := 0.90
	if b.opts.growthRows >= 100_000_000 {
		growthTarget = 0.80
	}
	figures := []figure{
		{"unique_over_raw", "unique", ratio("unique", "raw"), ">= 1.5 (32 in flight)", ratio("unique", "raw") >= 1.5},
		{"unique_256_over_raw_256", "unique_256", ratio("unique_256", "raw_256"), ">= 1.5", ratio("unique_256", "raw_256") >= 1.5},
		{"serial_p50_group_over_single", "serial_group", r["serial_group"].P50 / r["serial_single"].P50, "<= 1.10", r["serial_group"].P50 <= 1.10*r["serial_single"].P50},
		{"p99_over_p50_at_70pct", "unique_at_70pct", r["unique_at_70pct"].P99 / r["unique_at_70pct"].P50, "<= 3", r["unique_at_70pct"].P99 <= 3*r["unique_at_70pct"].P50},
		{"p99_over_p50_raw_at_70pct", "raw_at_70pct", r["raw_at_70pct"].P99 / r["raw_at_70pct"].P50, "(reference: raw at 70 %)", true},
		{"repeat_over_verify", "repeat", ratio("repeat", "verify_only"), ">= 0.80", ratio("repeat", "verify_only") >= 0.80},
		{"repeat_first_over_verify", "repeat_first", ratio("repeat_first", "verify_only"), "(Redis path)", true},
		{"mixed_over_verify", "mixed", ratio("mixed", "verify_only"), "", true},
		{"unique_redis_down_over_raw", "unique_redis_down", ratio("unique_redis_down", "raw"), "", true},
		{"repeat_redis_down_over_verify", "repeat_redis_down", ratio("repeat_redis_down", "verify_only"), "", true},
		{"mix_8_1_1_over_payments", "mix_8_1_1", ratio("mix_8_1_1", "payments_only"), "(1 refund, 1 close in 10)", true},
		{"refund_only_over_payments", "refund_only", ratio("refund_only", "payments_only"), "(a mass refund)", true},
		{"close_only_over_payments", "close_only", ratio("close_only", "payments_only"), "(unpaid trades timing out)", true},
		{"create_hot_over_raw", "create_hot", ratio("create_hot", "create_raw"), ">= 0.90 (one SKU, 32 clients)", ratio("create_hot", "create_raw") >= 0.90},
		{"unique_over_unique_unsequenced", "unique_unsequenced", ratio("unique", "unique_unsequenced"), "(the sequencer's share)", true},
		{"raw_over_raw_unsequenced", "raw_unsequenced", ratio("raw", "raw_unsequenced"), "(the sequencer's share)", true},
		{"unique_over_unique_b", "unique_b", ratio("unique", "unique_b"), ">= 0.90 (B: --gateway-b)", ratio("unique", "unique_b") >= 0.90},
		{"sql_per_unique", "unique", r["unique"].SQLMin, "<= 2 (amortised)", r["unique"].SQLMin <= 2},
		{"sql_per_unique_256", "unique_256", r["unique_256"].SQLMin, "<= 2 (amortised)", r["unique_256"].SQLMin <= 2},
		{"sql_per_serial_single", "serial_single", r["serial_single"].SQLMin, "5 (the transaction)", true},
		{"sql_per_raw", "raw", r["raw"].SQLMin, "", true},
		{"sql_per_repeat_redis_up", "repeat", r["repeat"].SQLMin, "0", r["repeat"].SQLMin < 0.01},
		{"sql_per_repeat_first_redis_up", "repeat_first", r["repeat_first"].SQLMin, "0", r["repeat_first"].SQLMin < 0.01},
		{"sql_per_repeat_redis_down", "repeat_redis_down", r["repeat_redis_down"].SQLMin, "<= 1", r["repeat_redis_down"].SQLMin <= 1.01},
		{"sql_per_unique_redis_down", "unique_redis_down", r["unique_redis_down"].SQLMin, "", true},
		{"growth_over_empty", "growth_unique", ratio("growth_unique", "unique_empty"), fmt.Sprintf(">= %.2f", growthTarget), ratio("growth_unique", "unique_empty") >= growthTarget},
		{"p99_during_purge_over_without", "purge_on", p99ratio("purge_on", "purge_off"), "(no long locks)", true},
		{"purged_rows_during", "purge_on", float64(b.purgedRows), "", b.purgedRows > 0},
	}
	figures = slices.DeleteFunc(figures, func(f figure) bool { _, ran := r[f.needs]; return !ran })
	figures = append(figures, b.drainFigures(out)...)
	for _, f := range figures {
		out[f.key] = round(f.value, 3)
	}
	switch {
	case b.opts.growthRows >= 100_000_000:
		out["growth_100m_over_empty"] = out["growth_over_empty"]
	case b.opts.growthRows >= 10_000_000:
		out["growth_10m_over_empty"] = out["growth_over_empty"]
	}

	w := b.stdout
	fmt.Fprintf(w, "\npaygw bench: concurrency %d, scale %g, %d CPUs, growth %d rows (generated in %.0fs), other clients on MariaDB %.1f stmt/s\n\n",
		b.opts.concurrency, b.opts.scale, numCPU(), b.opts.growthRows, b.growthGen.Seconds(), b.background)
	fmt.Fprintf(w, "%-18s %8s %9s %8s %8s %8s %7s %8s %9s\n", "scenario", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "errors", "sql/req", "(mean)")
	for _, name := range b.order {
		x := r[name]
		fmt.Fprintf(w, "%-18s %8d %9.0f %8.2f %8.2f %8.2f %7d %8.3f %9.3f\n", name, x.Requests, x.RPS, x.P50, x.P90, x.P99, x.Errors, x.SQLMin, x.perRequest())
	}
	fmt.Fprintln(w, "sql/req: MariaDB Questions per request in the quietest of the rounds (other clients only add); (mean) over all rounds")
	fmt.Fprintf(w, "\n%-30s %8s  %-20s %s\n", "figure", "value", "target", "")
	for _, f := range figures {
		mark := ""
		if f.target != "" && f.target[0] != '(' {
			mark = map[bool]string{true: "ok", false: "MISSED"}[f.ok]
		}
		fmt.Fprintf(w, "%-30s %8.3f  %-20s %s\n", f.key, f.value, f.target, mark)
	}
	b.printCounters(w)
	if b.opts.growthRows > 0 && b.opts.growthRows < 10_000_000 {
		fmt.Fprintf(w, "\nnote: growth measured with %d rows, not the full-scale 10 M (BENCH_SCALE=1 runs 10 M)\n", b.opts.growthRows)
	}
	for _, name := range []string{"unique", "repeat", "growth_unique"} {
		if top, ok := b.profiles[name]; ok {
			fmt.Fprintf(w, "\ngateway CPU profile during %s (top 25):\n%s", name, top)
		}
	}
	data, _ := json.MarshalIndent(out, "", "  ")
	path := filepath.Join(b.opts.out, "latest.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s\n", path)
	return nil
}

// purgeWhile runs the retention purge (the repository's own, as paygw purge does it) on the
// database until it has nothing left or ctx ends, and returns the rows it deleted; deleting is
// closed after its first batch.
func purgeWhile(ctx context.Context, dsn string, deleting chan<- struct{}) (int64, error) {
	db, err := repository.Open(ctx, dsn, 2)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n atomic.Int64
	var once sync.Once
	_, err = db.PurgeRecords(ctx, 168*time.Hour, func(rows int64) {
		n.Add(rows)
		once.Do(func() { close(deleting) })
	})
	return n.Load(), err
}
