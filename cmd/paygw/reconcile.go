package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// outboundTimeout bounds one question to a channel.
const outboundTimeout = 10 * time.Second

// queriers builds the trade queriers of the enabled channels, warning once for each channel
// whose outbound credentials are missing.
func queriers(cfg *config.Config, chs []channels.Channel, log zerolog.Logger) ([]channels.Querier, error) {
	qs, skipped, err := channels.QueriersFromConfig(cfg.Channels, chs, &http.Client{Timeout: outboundTimeout})
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		log.Warn().Err(s).Msg("trade queries off for this channel; it still verifies notifications")
	}
	return qs, nil
}

func reconcileConfig(cfg *config.Config) reconcile.Config {
	return reconcile.Config{QueryAfter: cfg.Reconcile.QueryAfter, QueryMaxAge: cfg.Reconcile.QueryMaxAge, QPS: cfg.Reconcile.QPS}
}

// reconcileCmd is `paygw reconcile query`: one run, a line per order asked and a summary.
func reconcileCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "query" {
		return errors.New("reconcile: the subcommand is `paygw reconcile query` (see --help)")
	}
	fs := flag.NewFlagSet("reconcile query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default $PAYGW_CONFIG, else "+config.DefaultPath+")")
	var o reconcile.Options
	fs.StringVar(&o.Channel, "channel", "", "ask only this channel")
	fs.StringVar(&o.TradeNo, "trade-no", "", "ask about this order only, whatever its backoff")
	fs.DurationVar(&o.OlderThan, "older-than", 0, "ask about attempts older than this (default reconcile.query_after)")
	fs.DurationVar(&o.MaxAge, "max-age", 0, "and younger than this (default reconcile.query_max_age)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "ask and print, change nothing")
	fs.Usage = func() {
		fmt.Fprint(stderr, "paygw reconcile query: ask the channels about WAIT_PAY orders whose notification never came\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("reconcile query: unexpected argument %q", fs.Arg(0))
	}
	// --older-than 0s asks about everything due now: tell it from "not given".
	olderThanSet := false
	fs.Visit(func(f *flag.Flag) { olderThanSet = olderThanSet || f.Name == "older-than" })
	cfg, err := config.Load(config.Path(*path), os.Environ())
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 8)
	if err != nil {
		return err
	}
	defer db.Close()
	redis.SetLogger(guard.LibraryLogger(log))
	g := guard.New(guard.Options{Addr: cfg.Redis.Addr, Password: cfg.Redis.Password, DB: cfg.Redis.DB}, log)
	defer g.Close()
	applier := apply.New(db, g, cfg.Idempotency.RedisTTL, log)
	g.Suspend()
	if err := identity.New(db, g, log, applier.ForgetMarkers).Check(ctx); err != nil {
		log.Warn().Err(err).Msg("database identity unknown: redis markers off for this run")
	}
	chs, err := channels.FromConfig(cfg.Channels)
	if err != nil {
		return err
	}
	qs, err := queriers(cfg, chs, log)
	if err != nil {
		return err
	}
	if len(qs) == 0 {
		return errors.New("reconcile query: no enabled channel has its outbound credentials configured")
	}
	rc := reconcileConfig(cfg)
	if olderThanSet && o.OlderThan == 0 {
		rc.QueryAfter = 0
	}
	o.Out = stdout
	_, err = reconcile.New(db, applier, qs, rc, log).Run(ctx, o)
	return err
}
