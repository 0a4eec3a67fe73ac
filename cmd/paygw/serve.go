package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/paygw/paygw/access"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/channels/unionpay"
	"github.com/paygw/paygw/channels/wechatpay"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/console"
	"github.com/paygw/paygw/delivery"
	"github.com/paygw/paygw/handlers"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/outbox"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/retention"
)

func (a *app) serveCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "serve",
		Short: "serve the notify_urls, the /v1 API and the console",
		Long: `Serve the channels' notify_urls, the /v1 API and the console (/console, unless
console.enabled is false) until SIGINT or SIGTERM, then drain the
in-flight requests (http.shutdown_timeout). In the background: the sweeper every minute, the daily
purge, the outbox's sequencer, the reconcile query job (reconcile.query_interval) and the daily bills (reconcile.bill_at),
each on one replica at a time. Metrics and pprof are served on admin.addr when it is set.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	return a.withConfig(c, func(ctx context.Context, cfg *config.Config, log zerolog.Logger, _ []string) error {
		return serve(ctx, cfg, log)
	})
}

// serve builds in order config -> logger -> MySQL -> Redis -> services -> channels -> handlers,
// starts the background jobs, then serves until ctx ends and drains in-flight requests.
func serve(ctx context.Context, cfg *config.Config, log zerolog.Logger) error {
	log.Info().Str("version", buildVersion()).RawJSON("config", []byte(cfg.Masked())).Msg("starting")
	// Metrics: one registry, handed to every package that counts, served on the admin listener.
	met := metrics.New(buildVersion())
	s, err := openServeStores(ctx, cfg, met, log)
	if err != nil {
		return err
	}
	defer s.Close()
	go s.watcher.Run(ctx, identity.Interval)

	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		return err
	}
	logTrustedChain(chs, log)
	hooks, err := newDispatcher(cfg, s.db, met, log)
	if err != nil {
		return err
	}
	// The outbox's sequencer: built here because the feed's long polls wait on it.
	seq := outbox.New(s.db, log)
	// The channels that can be asked: the query job's, and the console's "ask the channel now".
	qs, err := queriers(cfg, chs, log)
	if err != nil {
		return err
	}
	cons, err := newConsole(cfg, s, qs, met, log)
	if err != nil {
		return err
	}
	srv := newServer(cfg, s, chs, seq, hooks, cons, met, log)
	if err := startJobs(ctx, cfg, s, chs, qs, seq, met, log); err != nil {
		return err
	}
	wait := serveWebhooks(ctx, hooks, log)
	defer wait()
	return listen(ctx, cfg, srv, met, log)
}

// openServeStores opens the stores as serve runs them: counted, with warnings for a database not
// migrated and a Redis not answering, neither of which stops serve.
func openServeStores(ctx context.Context, cfg *config.Config, met *metrics.Metrics, log zerolog.Logger) (*stores, error) {
	s, err := openStores(ctx, cfg, storeOptions{conns: cfg.MySQL.MaxOpenConns, metrics: met}, log)
	if err != nil {
		return nil, err
	}
	met.Up("mysql", s.db.Ping)
	met.Up("redis", s.guard.Ping)
	met.ReadStoredState(s.db)
	if list, err := s.db.MigrationStatus(ctx); err == nil {
		for _, m := range list {
			if m.State != "applied" {
				log.Warn().Int64("migration", m.Source.Version).Msg("database not migrated: run `paygw migrate`; notifications are answered retry until then")
				break
			}
		}
	}
	if err := s.guard.Ping(ctx); err != nil {
		log.Warn().Strs("redis", cfg.Redis.Endpoints()).Str("mode", cfg.Redis.Mode).Msg("redis unavailable at start: serving with MySQL alone until it answers")
	}
	s.applier.SetGroupLanes(cfg.MySQL.GroupLanes)
	return s, nil
}

// logTrustedChain says at start which UnionPay chain the gateway trusts.
func logTrustedChain(chs []channels.Channel, log zerolog.Logger) {
	for _, ch := range chs {
		if up, ok := ch.(*unionpay.Channel); ok {
			for _, c := range up.Chain() {
				log.Info().Str("role", c.Role).Str("cn", c.CommonName).Str("signature_algorithm", c.SignatureAlgorithm).
					Time("not_after", c.NotAfter).Msg("unionpay trusts this certificate")
			}
		}
	}
}

// newServer builds the order service and the HTTP handlers over the stores and the channels.
func newServer(cfg *config.Config, s *stores, chs []channels.Channel, seq *outbox.Sequencer, hooks *delivery.Dispatcher, cons *console.Console,
	met *metrics.Metrics, log zerolog.Logger) *handlers.Server {
	svc := orders.New(s.db, s.guard, orders.Config{
		Enabled: cfg.Idempotency.Enabled, RedisTTL: cfg.Idempotency.RedisTTL,
		ReturnOriginalResult: cfg.Idempotency.ReturnOriginalResult,
	}, handlers.RenderCreate, log)
	svc.SetGroupLanes(cfg.MySQL.GroupLanes)
	if len(cfg.Auth.APITokens) == 0 {
		log.Warn().Msg("auth.api_tokens is empty: every /v1 request will be refused with 401")
	}
	return handlers.New(handlers.Config{
		BodyLimitBytes: cfg.HTTP.BodyLimitBytes, KeyHeader: cfg.Idempotency.KeyHeader, Tokens: apiTokens(cfg, log), Metrics: met,
		Webhooks:      webhookRoutes(hooks),
		EventsChanged: seq.Changed,
		Console:       cons,
	}, s.db, s.guard, svc, s.applier, chs, log)
}

// newConsole builds the operators' console (nil when console.enabled is off): its "ask the
// channel now" runs the query job's one-order run over the channels that can be asked.
func newConsole(cfg *config.Config, s *stores, qs []channels.Querier, met *metrics.Metrics, log zerolog.Logger) (*console.Console, error) {
	if !cfg.Console.Enabled {
		return nil, nil
	}
	var asker console.Asker
	if len(qs) > 0 {
		job := reconcile.New(s.db, s.applier, qs, reconcileConfig(cfg), log)
		job.Metrics = met
		asker = job
	}
	if cfg.Console.SessionKeyFile == "" {
		log.Warn().Msg("console.session_key_file is not set: console logins end when this process stops and are not shared between replicas")
	}
	resolve := func(ctx context.Context, id int64, action, note string, e access.Entry) (repository.DiscrepancyItem, error) {
		return reconcile.ResolveDiscrepancy(ctx, s.db, s.applier, id, action, note, e)
	}
	return console.New(console.Config{SessionKey: cfg.Console.SessionKey(), SessionTTL: cfg.Console.SessionTTL}, s.db, s.guard, asker, resolve, log)
}

// followCertificates: WeChat Pay in certificate mode follows the platform-certificate rotation: a
// download now and every 12 h in the background (a failure keeps the certificates trusted so
// far), and one for a notification of an unknown serial.
func followCertificates(ctx context.Context, cfg *config.Config, chs []channels.Channel, log zerolog.Logger) error {
	for _, ch := range chs {
		wp, ok := ch.(*wechatpay.Channel)
		if !ok || !wp.CertificateMode() {
			continue
		}
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
	return nil
}

// listen serves HTTP (and the admin listener) until ctx ends or a listener fails, then drains.
func listen(ctx context.Context, cfg *config.Config, srv *handlers.Server, met *metrics.Metrics, log zerolog.Logger) error {
	hs := handlers.NewHTTPServer(cfg.HTTP.Addr, srv.Echo(), handlers.DefaultTimeouts())
	hs.RegisterOnShutdown(srv.EndLongPolls)
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

// startJobs starts serve's background work, each job on one replica at a time by its lease.
func startJobs(ctx context.Context, cfg *config.Config, s *stores, chs []channels.Channel, qs []channels.Querier, seq *outbox.Sequencer,
	met *metrics.Metrics, log zerolog.Logger) error {
	// The outbox: one replica at a time numbers the committed events in commit order (the feed's
	// order), and wakes this process's long polls when it did.
	go seq.Serve(ctx, lease.Holder(""))
	// The reconciliation job asks the channels about orders whose notification never came.
	askable := make([]string, len(qs))
	for i, q := range qs {
		askable[i] = q.Name()
	}
	met.Channels(askable)
	if cfg.Reconcile.QueryInterval > 0 && len(qs) > 0 {
		job := reconcile.New(s.db, s.applier, qs, reconcileConfig(cfg), log)
		job.Metrics = met
		go job.Serve(ctx, cfg.Reconcile.QueryInterval, lease.Holder(""))
	}
	// Yesterday's bills at reconcile.bill_at.
	bds, err := billDownloaders(cfg, chs, log)
	if err != nil {
		return err
	}
	met.ExpectReconcile(metrics.JobBill, metrics.Named(bds))
	if len(bds) > 0 {
		hour, minute, _ := cfg.Reconcile.BillAtClock() // validated
		job := reconcile.New(s.db, s.applier, nil, reconcileConfig(cfg), log)
		job.Metrics = met
		daily := job.DailyBills(bds, reconcile.DailyConfig{Hour: hour, Minute: minute, LocalOnlyGrace: cfg.Reconcile.LocalOnlyGrace,
			Zone: func(channel string) *time.Location { return channelDay(cfg, channel) }, Identities: billIdentities(cfg.Channels),
			FeeRates: billFeeRates(cfg.Channels),
			Holder:   lease.Holder("serve")})
		go daily.Serve(ctx)
	}
	if err := followCertificates(ctx, cfg, chs, log); err != nil {
		return err
	}
	// The sweeper: processing records older than the timeout become failed, so a retry can run.
	go retention.Sweep(ctx, s.db, retention.SweepEvery, cfg.Idempotency.ProcessingTimeout(), met.SweeperFailed, log)
	// Retention: once a day, one replica deletes what is past idempotency.retention and
	// journal.retention.
	purger := retention.NewPurger(s.db, retentionConfig(cfg), log)
	purger.OnPurged = met.Purged
	go purger.Serve(ctx, retention.PurgeCheckEvery, lease.Holder(""))
	return nil
}

// apiTokens hands the configured clients to the handlers by digest and roles, warning about each
// client configured without roles: it keeps working as admin.
func apiTokens(cfg *config.Config, log zerolog.Logger) []handlers.Token {
	tokens := make([]handlers.Token, len(cfg.Auth.APITokens))
	for i, t := range cfg.Auth.APITokens {
		tokens[i] = handlers.Token{Name: t.Name, Digest: t.Digest(), Roles: t.RoleList()}
		if t.Legacy() {
			log.Warn().Str("token_name", t.Name).Msg("auth.api_tokens entry has no roles: it works as admin; give it the roles it needs")
		}
	}
	return tokens
}
