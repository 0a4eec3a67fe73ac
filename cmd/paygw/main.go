// Command paygw is the payment-callback gateway: `paygw serve`, `paygw migrate`, `paygw sweep`,
// `paygw purge`, `paygw doctor` and the others its usage lists.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // reconcile.stripe_timezone resolves on hosts without tzdata

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/channels/unionpay"
	"github.com/paygw/paygw/channels/wechatpay"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/explain"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/handlers"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// version is set at build time with -ldflags "-X main.version=..."; else the module version.
var version = ""

const usage = `paygw — payment-callback gateway

Usage:
  paygw serve   [--config FILE]    serve the notify_urls and the /v1 API (runs the sweeper every minute)
  paygw migrate [--config FILE]    apply the database migrations up to the latest
  paygw migrate status [--config FILE]
  paygw sweep   [--config FILE]    one pass of the processing-timeout cleanup
  paygw purge   [--config FILE]    delete idempotency records and journal rows past their retention
                                   (serve does it once a day)
  paygw doctor  [--config FILE] [--no-probe]
                                   check a deployment before going live: a checklist, exit 1 on a failure
  paygw reconcile query [--config FILE] [--channel C] [--trade-no T] [--older-than D] [--max-age D] [--dry-run]
                                   ask the channels about WAIT_PAY orders whose notification never came
  paygw reconcile bill --channel C --date YYYY-MM-DD --file PATH [--report OUT.json|OUT.csv] [--config FILE]
                                   match a channel's daily bill against our books (exit 3: discrepancies,
                                   4: an untrusted bill, nothing repaired)
  paygw why TRADE_NO [--config FILE]   why is this order (not) paid: what paygw knows of it
  paygw markers flush [--config FILE]
                                   start a new epoch: no Redis done marker written before is trusted
  paygw simulate keys|notify ...   play a payment channel against a gateway (paygw simulate --help)
  paygw version

The config file is --config, else $PAYGW_CONFIG, else config/paygw.yaml; PAYGW_<SECTION>__<KEY>
environment variables override it (PAYGW_MYSQL__DSN, PAYGW_IDEMPOTENCY__REDIS_TTL=5s).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if errors.Is(err, errDiscrepancies) {
		os.Exit(exitDiscrepancies) // the run completed; what it found is on stdout
	}
	if errors.Is(err, errUntrusted) {
		os.Exit(exitUntrusted) // the run completed and repaired nothing; why is on stdout
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paygw:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "serve":
		return withConfig(cmd, args, stderr, "serve the notify_urls and the /v1 API", func(cfg *config.Config, log zerolog.Logger) error {
			return serve(ctx, cfg, log)
		})
	case "migrate":
		// `migrate status` before or after the flags; "status" as --config's value is a path.
		status := false
		rest := args[:0:0]
		for i, a := range args {
			if a == "status" && (i == 0 || !strings.HasSuffix(args[i-1], "-config")) {
				status = true
				continue
			}
			rest = append(rest, a)
		}
		args = rest
		return withConfig(cmd, args, stderr, "apply the migrations (or `migrate status`: list them)", func(cfg *config.Config, log zerolog.Logger) error {
			return migrate(ctx, cfg, status, stdout)
		})
	case "sweep":
		return withConfig(cmd, args, stderr, "fail processing records older than idempotency.db_timeout_clean_seconds", func(cfg *config.Config, log zerolog.Logger) error {
			db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
			if err != nil {
				return err
			}
			defer db.Close()
			n, err := db.SweepProcessing(ctx, cfg.Idempotency.ProcessingTimeout())
			if err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
			fmt.Fprintf(stdout, "swept %d processing record(s) older than %s\n", n, cfg.Idempotency.ProcessingTimeout())
			return nil
		})
	case "purge":
		return withConfig(cmd, args, stderr, "delete final idempotency records older than idempotency.retention and journal rows older than journal.retention", func(cfg *config.Config, log zerolog.Logger) error {
			return purgeCmd(ctx, cfg, stdout)
		})
	case "doctor":
		return doctorCmd(ctx, args, stdout, stderr)
	case "reconcile":
		return reconcileCmd(ctx, args, stdout, stderr)
	case "why":
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return errors.New("why: name the order: paygw why TRADE_NO [--config FILE]")
		}
		tradeNo := args[0]
		return withConfig("why", args[1:], stderr, "explain why an order is (not) paid", func(cfg *config.Config, log zerolog.Logger) error {
			return why(ctx, cfg, tradeNo, stdout, log)
		})
	case "markers":
		if len(args) == 0 || args[0] != "flush" {
			return errors.New("markers: the only subcommand is `paygw markers flush`")
		}
		return withConfig("markers flush", args[1:], stderr, "start a new database epoch: every replica stops trusting the Redis done markers written before, within "+identity.Interval.String(), func(cfg *config.Config, log zerolog.Logger) error {
			db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
			if err != nil {
				return err
			}
			defer db.Close()
			epoch, err := db.BumpEpoch(ctx)
			if err != nil {
				return fmt.Errorf("markers flush: %w", err)
			}
			fmt.Fprintf(stdout, "database epoch is now %d: done markers written before are ignored by every replica within %s\n", epoch, identity.Interval)
			return nil
		})
	case "simulate":
		return simulateCmd(ctx, args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "paygw", buildVersion())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// withConfig parses the command's flags, loads and validates the config and builds the logger.
func withConfig(name string, args []string, stderr io.Writer, what string, fn func(*config.Config, zerolog.Logger) error) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default $PAYGW_CONFIG, else "+config.DefaultPath+")")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "paygw %s: %s\n\nFlags:\n", name, what)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	cfg, err := config.Load(config.Path(*path), os.Environ())
	if err != nil {
		return err
	}
	return fn(cfg, newLogger(cfg.Log, stderr))
}

func newLogger(c config.Log, w io.Writer) zerolog.Logger {
	if c.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	level, _ := zerolog.ParseLevel(c.Level) // validated
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

func migrate(ctx context.Context, cfg *config.Config, status bool, stdout io.Writer) error {
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	if !status {
		if err := db.Migrate(ctx); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	list, err := db.MigrationStatus(ctx)
	if err != nil {
		return fmt.Errorf("migrate status: %w", err)
	}
	for _, m := range list {
		state := "pending"
		if m.State == "applied" {
			state = "applied " + m.AppliedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stdout, "%05d %-28s %s\n", m.Source.Version, m.Source.Path, state)
	}
	return nil
}

// serve builds in order config -> logger -> MySQL -> Redis -> services -> channels -> handlers,
// then serves until SIGINT/SIGTERM and drains in-flight requests.
func serve(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	log.Info().Str("version", buildVersion()).RawJSON("config", []byte(cfg.Masked())).Msg("starting")

	// Metrics: one registry, handed to every package that counts, served on the admin listener.
	met := metrics.New(buildVersion())

	// Storage.
	db, err := repository.Open(ctx, cfg.MySQL.DSN, cfg.MySQL.MaxOpenConns)
	if err != nil {
		return err
	}
	defer db.Close()
	db.Metrics = met
	met.Up("mysql", db.Ping)
	if list, err := db.MigrationStatus(ctx); err == nil {
		for _, m := range list {
			if m.State != "applied" {
				log.Warn().Int64("migration", m.Source.Version).Msg("database not migrated: run `paygw migrate`; notifications are answered retry until then")
				break
			}
		}
	}
	redis.SetLogger(guard.LibraryLogger(log))
	g := guard.New(guardOptions(cfg.Redis, met), log)
	defer g.Close()
	met.Up("redis", g.Ping)
	if err := g.Ping(ctx); err != nil {
		log.Warn().Strs("redis", cfg.Redis.Endpoints()).Str("mode", cfg.Redis.Mode).Msg("redis unavailable at start: serving with MySQL alone until it answers")
	}

	// Services and channels.
	applier := apply.New(db, g, cfg.Idempotency.RedisTTL, log)
	applier.SetGroupLanes(cfg.MySQL.GroupLanes)

	// Redis answers only for the database it describes: until the database's identity is read
	// (and checked for a rollback), the guard is off and every repeat goes to MySQL.
	g.Suspend()
	watcher := identity.New(db, g, log, applier.ForgetMarkers)
	if err := watcher.Check(ctx); err != nil {
		log.Warn().Err(err).Msg("database identity unknown at start: redis markers off until it is read")
	}
	go watcher.Run(ctx, identity.Interval)
	svc := orders.New(db, g, orders.Config{
		Enabled: cfg.Idempotency.Enabled, RedisTTL: cfg.Idempotency.RedisTTL,
		ReturnOriginalResult: cfg.Idempotency.ReturnOriginalResult,
	}, handlers.RenderCreate, log)
	svc.SetGroupLanes(cfg.MySQL.GroupLanes)
	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		return err
	}
	for _, ch := range chs {
		if up, ok := ch.(*unionpay.Channel); ok {
			for _, c := range up.Chain() {
				log.Info().Str("role", c.Role).Str("cn", c.CommonName).Str("signature_algorithm", c.SignatureAlgorithm).
					Time("not_after", c.NotAfter).Msg("unionpay trusts this certificate")
			}
		}
	}
	if len(cfg.Auth.APITokens) == 0 {
		log.Warn().Msg("auth.api_tokens is empty: every /v1 request will be refused with 401")
	}
	tokens := make([]handlers.Token, len(cfg.Auth.APITokens))
	for i, t := range cfg.Auth.APITokens {
		tokens[i] = handlers.Token{Name: t.Name, Secret: t.Token}
	}
	srv := handlers.New(handlers.Config{
		BodyLimitBytes: cfg.HTTP.BodyLimitBytes, KeyHeader: cfg.Idempotency.KeyHeader, Tokens: tokens, Metrics: met,
	}, db, g, svc, applier, chs, log)

	// The reconciliation job: one replica at a time (a lease) asks the channels about orders
	// whose notification never came.
	qs, err := queriers(cfg, chs, log)
	if err != nil {
		return err
	}
	askable := make([]string, len(qs))
	for i, q := range qs {
		askable[i] = q.Name()
	}
	met.Channels(askable)
	if cfg.Reconcile.QueryInterval > 0 && len(qs) > 0 {
		host, _ := os.Hostname()
		holder := fmt.Sprintf("%s:%d", host, os.Getpid())
		job := reconcile.New(db, applier, qs, reconcileConfig(cfg), log)
		job.Metrics = met
		go job.Serve(ctx, cfg.Reconcile.QueryInterval, holder)
	}
	// Yesterday's bills at reconcile.bill_at, one replica at a time (a lease of their own).
	bds, err := billDownloaders(cfg, chs, log)
	if err != nil {
		return err
	}
	if len(bds) > 0 {
		go serveDailyBills(ctx, cfg, db, applier, bds, leaseHolder("serve"), met, log)
	}

	// WeChat Pay in certificate mode follows the platform-certificate rotation: a download now and
	// every 12 h in the background (a failure keeps the certificates trusted so far), and one for a
	// notification of an unknown serial.
	for _, ch := range chs {
		if wp, ok := ch.(*wechatpay.Channel); ok && wp.CertificateMode() {
			certs, err := wechatpay.NewCertificates(cfg.Channels.WeChatPay, wp, &http.Client{Timeout: outboundTimeout}, func(added []string, err error) {
				if err != nil {
					log.Warn().Err(err).Msg("wechatpay platform certificates not downloaded; the trusted ones stay")
				} else if len(added) > 0 {
					log.Info().Strs("serials", added).Msg("wechatpay platform certificates added")
				}
			})
			switch {
			case errors.Is(err, channels.ErrNoCredentials):
				log.Warn().Err(err).Msg("wechatpay platform certificates are not downloaded: new ones are not followed")
			case err != nil:
				return err
			default:
				go certs.Run(ctx, wechatpay.CertificateRefresh)
			}
		}
	}

	// The sweeper: processing records older than the timeout become failed, so a retry can run.
	go sweepEvery(ctx, time.Minute, db, cfg.Idempotency.ProcessingTimeout(), met, log)
	// Retention: once a day, one replica deletes what is past idempotency.retention and
	// journal.retention.
	go servePurge(ctx, cfg, db, holderName(), purgeCheckEvery, met.Purged, log)

	// HTTP.
	hs := handlers.NewHTTPServer(cfg.HTTP.Addr, srv.Echo(), handlers.DefaultTimeouts())
	errc := make(chan error, 2)
	go func() { errc <- hs.ListenAndServe() }()
	if cfg.Admin.Addr != "" {
		admin := &http.Server{Addr: cfg.Admin.Addr, Handler: adminMux(met), ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- fmt.Errorf("admin listener: %w", admin.ListenAndServe()) }()
		defer admin.Close()
		log.Info().Str("addr", cfg.Admin.Addr).Msg("admin listener: /metrics, /debug/pprof")
	}
	log.Info().Str("addr", cfg.HTTP.Addr).Msg("serving")
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	log.Info().Dur("timeout", cfg.HTTP.ShutdownTimeout).Msg("shutting down: draining in-flight requests")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info().Msg("stopped")
	return nil
}

// adminMux serves the metrics and the profiler on their own listener, never on the one channels
// reach.
func adminMux(met *metrics.Metrics) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", met.Handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func sweepEvery(ctx context.Context, every time.Duration, db *repository.DB, timeout time.Duration, met *metrics.Metrics, log zerolog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := db.SweepProcessing(ctx, timeout)
			if err != nil {
				log.Warn().Err(err).Msg("sweep failed; next pass in a minute")
			} else if n > 0 {
				met.SweeperFailed(n)
				log.Warn().Int64("failed", n).Dur("older_than", timeout).Msg("swept stale processing records")
			}
		}
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// why prints what GET /v1/payments/{trade_no} explains: the summary, then the facts.
func why(ctx context.Context, cfg *config.Config, tradeNo string, stdout io.Writer, log zerolog.Logger) error {
	if !payment.ValidTradeNo(tradeNo) {
		return fmt.Errorf("why: %q is not a trade_no", tradeNo)
	}
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	redis.SetLogger(guard.LibraryLogger(zerolog.Nop()))
	g := guard.New(guardOptions(cfg.Redis, nil), zerolog.Nop())
	defer g.Close()
	g.Suspend()
	_ = identity.New(db, g, zerolog.Nop(), nil).Check(ctx) // refusals are kept per database; none if unknown
	r, err := handlers.LoadRecord(ctx, db, g, tradeNo)
	if errors.Is(err, payment.ErrNotFound) {
		return fmt.Errorf("why: no order %s in this database", tradeNo)
	} else if err != nil {
		return err
	}
	e := explain.Of(r)
	fmt.Fprintf(stdout, "%s %s\n%s\n\n", tradeNo, r.Order.Status, e.Summary)
	for _, f := range e.Facts {
		fmt.Fprintf(stdout, "%s  %-8s %s\n", f.At.UTC().Format(time.RFC3339), f.Source, f.Text)
	}
	return nil
}

// guardOptions is the guard's connection from the redis section: one server, a Redis Cluster or
// a Sentinel-managed master.
func guardOptions(r config.Redis, met *metrics.Metrics) guard.Options {
	return guard.Options{Mode: r.Mode, Addrs: r.Endpoints(), MasterName: r.MasterName, Password: r.Password, DB: r.DB, Metrics: met}
}
