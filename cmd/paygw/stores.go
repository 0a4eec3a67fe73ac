package main

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/repository"
)

// stores is MySQL, the Redis guard bound to the database's identity, and the one Applier over
// both: what serve and the one-shot commands read and apply through, set up in one place.
type stores struct {
	db      *repository.DB
	guard   *guard.Guard
	applier *apply.Applier
	watcher *identity.Watcher
}

// storeOptions vary the set-up between serve and a one-shot command.
type storeOptions struct {
	conns   int              // MySQL connections at most
	metrics *metrics.Metrics // nil counts nothing
	oneShot bool             // the identity check logs its warnings only
}

// openStores opens MySQL and Redis and binds Redis to the database's identity: until the identity
// is read (and checked for a rollback), the guard is off and every repeat goes to MySQL. Close
// closes both.
func openStores(ctx context.Context, cfg *config.Config, o storeOptions, log zerolog.Logger) (*stores, error) {
	db, err := repository.Open(ctx, cfg.MySQL.DSN, o.conns)
	if err != nil {
		return nil, err
	}
	db.Metrics = o.metrics
	redis.SetLogger(guard.LibraryLogger(log))
	g := guard.New(guardOptions(cfg.Redis, o.metrics), log)
	a := apply.New(db, g, cfg.Idempotency.RedisTTL, log)
	g.Suspend()
	idLog := log
	if o.oneShot {
		idLog = log.Level(max(log.GetLevel(), zerolog.WarnLevel))
	}
	w := identity.New(db, g, idLog, a.ForgetMarkers)
	if err := w.Check(ctx); err != nil {
		log.Warn().Err(err).Msg("database identity unknown: redis markers off until it is read")
	}
	return &stores{db: db, guard: g, applier: a, watcher: w}, nil
}

// Close closes Redis and MySQL.
func (s *stores) Close() {
	_ = s.guard.Close()
	_ = s.db.Close()
}

// guardOptions is the guard's connection from the redis section: one server, a Redis Cluster or
// a Sentinel-managed master.
func guardOptions(r config.Redis, met *metrics.Metrics) guard.Options {
	return guard.Options{Mode: r.Mode, Addrs: r.Endpoints(), MasterName: r.MasterName, Password: r.Password, DB: r.DB, Metrics: met}
}
