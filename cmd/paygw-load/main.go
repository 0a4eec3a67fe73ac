// Command paygw-load is `make bench`: it measures the gateway under load next to the ceilings
// of the same MariaDB and Redis, in one run, and reports each scenario's throughput as a ratio
// of the ceiling that bounds it, with the target each ratio is held to.
//
// It starts its own redis-server (so it can stop it), uses a dedicated database paygw_bench on
// the shared MariaDB, builds and starts the real gateway binary, seeds WAIT_PAY orders through
// the repository, pre-signs every notification, then drives the gateway over loopback at a fixed
// concurrency.
// Every process it starts is stopped on the way out, on error and on SIGINT too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the knobs of a run. BENCH_SCALE multiplies the request counts and the growth rows.
type options struct {
	scale       float64
	concurrency int
	groupLanes  int
	mysqlDSN    string
	redisPort   int
	gatewayBin  string
	out         string
	keepDB      bool
	growthRows  int64
	only        string // a key of subsets, or "" for the whole run
	gatewayB    string // another paygw binary for unique_b, or ""
	bSQL        string // statements run on unique_b's database after its migration
}

// subsets are the parts of a run --only can choose, with the order sets each needs.
var subsets = map[string][]string{
	"growth":   {"warm", "gwarm", "empty", "growth"},
	"creates":  {"warm", "gwarm"},
	"tail":     {"warm", "gwarm", "unique", "raw", "rate70", "raw70", "warmunseq", "unseq", "rawunseq", "warmb", "uniqueb"},
	"others":   {"warm", "gwarm", "payonly", "mixpay", "closes", "topay", "refunds"},
	"delivery": {"warm", "gwarm"},
	"outbox":   {"warm", "gwarm", "unique", "raw", "warmunseq", "unseq", "rawunseq", "warmb", "uniqueb"},
	"lookups":  {"warm", "gwarm"},
}

// wants reports whether the run includes one of the subsets named.
func (o options) wants(names ...string) bool {
	return o.only == "" || slices.Contains(names, o.only)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paygw-load:", err)
		os.Exit(1)
	}
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil && v > 0 {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify-only" { // the ceiling's own process (startVerifyOnly)
		return serveVerifyOnly(ctx, args[1:])
	}
	mysqlPort := os.Getenv("MYSQL_PORT")
	if mysqlPort == "" {
		mysqlPort = "3306"
	}
	var o options
	fs := flag.NewFlagSet("paygw-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Float64Var(&o.scale, "scale", envFloat("BENCH_SCALE", 1), "multiplies request counts and growth rows (env BENCH_SCALE)")
	fs.IntVar(&o.concurrency, "concurrency", int(envFloat("BENCH_CONCURRENCY", 32)), "requests in flight (env BENCH_CONCURRENCY)")
	fs.IntVar(&o.groupLanes, "group-lanes", int(envFloat("BENCH_GROUP_LANES", 2)), "the gateways' mysql.group_lanes (env BENCH_GROUP_LANES; the shipped default 2)")
	fs.StringVar(&o.mysqlDSN, "mysql", "root@tcp(127.0.0.1:"+mysqlPort+")/", "MariaDB server DSN (the bench uses database "+benchDB+")")
	fs.IntVar(&o.redisPort, "redis-port", int(envFloat("BENCH_REDIS_PORT", 6391)), "port for the bench's own redis-server (a free one if taken)")
	fs.StringVar(&o.gatewayBin, "gateway", "", "paygw binary (default: go build ./cmd/paygw into the work dir)")
	fs.StringVar(&o.bSQL, "b-sql", os.Getenv("BENCH_B_SQL"), "statements (separated by ';') run on unique_b's database after its migration, e.g. a schema change to measure (env BENCH_B_SQL)")
	fs.StringVar(&o.gatewayB, "gateway-b", os.Getenv("BENCH_GATEWAY_B"), "another paygw binary, run as unique_b in the rounds of unique on a database of its own, e.g. one built without the event writes (env BENCH_GATEWAY_B)")
	fs.StringVar(&o.out, "out", "bench/results", "directory for latest.json and the profiles")
	fs.BoolVar(&o.keepDB, "keep-db", os.Getenv("BENCH_KEEP_DB") == "1", "keep the bench's databases afterwards; the next run with it uses a kept growth table again (env BENCH_KEEP_DB=1)")
	growth := fs.Float64("growth-rows", 0, "rows in idempotent_record for the growth scenario (default 10 M x BENCH_SCALE)")
	fs.StringVar(&o.only, "only", os.Getenv("BENCH_ONLY"), "run one subset: "+strings.Join(slices.Sorted(maps.Keys(subsets)), ", ")+" (env BENCH_ONLY; default all)")
	dbName := fs.String("db", benchDB, "the bench's database (dropped and created; the growth table is in NAME_growth, the outbox's variants in NAME_unseq and NAME_b, the webhook drains in NAME_hooks, the lookups in NAME_lookup)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !regexp.MustCompile(`^[a-z][a-z0-9_]{0,40}$`).MatchString(*dbName) {
		return fmt.Errorf("--db %q: want a lower-case name of at most 41 characters of [a-z0-9_]", *dbName)
	}
	benchDB, growthDB, unseqDB, bDB, hooksDB = *dbName, *dbName+"_growth", *dbName+"_unseq", *dbName+"_b", *dbName+"_hooks"
	lookupDB = *dbName + "_lookup"
	if _, ok := subsets[o.only]; !ok && o.only != "" {
		return fmt.Errorf("--only %q: the subsets are %s", o.only, strings.Join(slices.Sorted(maps.Keys(subsets)), ", "))
	}
	o.growthRows = int64(*growth)
	switch {
	case !o.wants("growth"): // a subset without the growth scenarios makes no growth table
		o.growthRows = 0
	case o.growthRows == 0:
		o.growthRows = int64(10_000_000 * o.scale)
	}

	work, err := os.MkdirTemp("", "paygw-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if o.gatewayBin == "" {
		o.gatewayBin = filepath.Join(work, "paygw")
		fmt.Fprintln(stderr, "building the gateway: go build -o", o.gatewayBin, "./cmd/paygw")
		build := exec.CommandContext(ctx, "go", "build", "-o", o.gatewayBin, "./cmd/paygw") // #nosec G204 -- builds our own gateway into the bench's work directory
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/paygw: %w", err)
		}
	}
	if err := os.MkdirAll(o.out, 0o750); err != nil {
		return err
	}
	b := &bench{opts: o, work: work, log: stderr, stdout: stdout}
	defer b.cleanup()
	return b.run(ctx)
}

// logf prints progress with the time since start.
func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.log, "[%6.1fs] %s\n", time.Since(b.started).Seconds(), fmt.Sprintf(format, args...))
}

func numCPU() int { return runtime.NumCPU() }

func round(v float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(v*p) / p
}
