// Package guard is paygw's Redis layer: short-lived owner locks that make an in-flight twin fail
// fast, and "done" markers that let repeats answer without SQL. It is only ever an accelerator:
// when Redis is unreachable every call reports ErrUnavailable and callers carry on through the
// database's unique keys.
package guard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
)

var (
	// ErrUnavailable: Redis did not answer; carry on without it.
	ErrUnavailable = errors.New("redis unavailable")
	// ErrHeld: another owner holds the lock.
	ErrHeld = errors.New("held by another request")
)

// After a failure Redis is skipped for this long, so an outage costs one timeout per interval,
// not one per request; the same interval paces the warning in the log.
const retryInterval = time.Second

// Guard wraps one Redis client. Keys are prefix + name.
type Guard struct {
	rdb    *redis.Client
	prefix string
	log    zerolog.Logger

	now       func() time.Time
	mu        sync.Mutex
	downUntil time.Time
}

// Options for New. Prefix separates deployments (and tests) sharing one Redis.
type Options struct {
	Addr     string
	Password string
	DB       int
	Prefix   string
	Timeout  time.Duration // per dial, read and write; default 300ms

	// Now is the clock the skip interval is measured by; default time.Now. A test sets it to
	// step past the interval instead of sleeping through it.
	Now func() time.Time
}

// New builds a guard with short timeouts: Redis is a fast path, never worth waiting for.
func New(o Options, log zerolog.Logger) *Guard {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 300 * time.Millisecond
	}
	rdb := redis.NewClient(&redis.Options{
		Addr:          o.Addr,
		Password:      o.Password,
		DB:            o.DB,
		DialTimeout:   timeout,
		ReadTimeout:   timeout,
		WriteTimeout:  timeout,
		MaxRetries:    -1, // a retry doubles the cost of an outage; the database is the fallback
		DialerRetries: 1,
		PoolSize:      64,
	})
	prefix := o.Prefix
	if prefix == "" {
		prefix = "paygw:"
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return &Guard{rdb: rdb, prefix: prefix, log: log, now: now}
}

func (g *Guard) Close() error { return g.rdb.Close() }

// Ping reports whether Redis answers now (for /readyz), ignoring the skip interval.
func (g *Guard) Ping(ctx context.Context) error {
	if err := g.rdb.Ping(ctx).Err(); err != nil {
		return ErrUnavailable
	}
	return nil
}

// Lock is an owner lock taken by Acquire.
type Lock struct {
	g     *Guard
	key   string
	token string
}

// Acquire takes the lock name for ttl with SET NX PX and a random owner token.
// Returns ErrHeld if another owner has it and ErrUnavailable if Redis did not answer.
func (g *Guard) Acquire(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	if g.skipping() {
		return nil, ErrUnavailable
	}
	l := &Lock{g: g, key: g.prefix + "lock:" + name, token: newToken()}
	ok, err := g.rdb.SetNX(ctx, l.key, l.token, ttl).Result()
	if err != nil {
		return nil, g.failed(ctx, err)
	}
	if !ok {
		return nil, ErrHeld
	}
	return l, nil
}

// checkAndLock reports which done markers (KEYS[2..]) exist and, unless the first one does,
// takes the lock KEYS[1] with SET NX PX (ARGV: owner token, TTL in ms), in one round trip. It
// returns a 0/1 per marker, then 1 (lock taken), 0 (held by another) or 2 (not tried).
var checkAndLock = redis.NewScript(`
local out = {}
for i = 2, #KEYS do out[#out + 1] = redis.call("EXISTS", KEYS[i]) end
if out[1] == 1 then out[#out + 1] = 2 return out end
if redis.call("SET", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then out[#out + 1] = 1 else out[#out + 1] = 0 end
return out`)

// CheckAndAcquire asks, in one round trip, which of the done markers exist and, unless the first
// one does (nothing left to do), takes the lock name for ttl. lock is nil unless taken; err is
// ErrHeld when another owner holds the lock and ErrUnavailable when Redis did not answer.
func (g *Guard) CheckAndAcquire(ctx context.Context, name string, ttl time.Duration, markers ...string) (found []bool, lock *Lock, err error) {
	if g.skipping() {
		return nil, nil, ErrUnavailable
	}
	l := &Lock{g: g, key: g.prefix + "lock:" + name, token: newToken()}
	keys := make([]string, 0, 1+len(markers))
	keys = append(keys, l.key)
	for _, m := range markers {
		keys = append(keys, g.prefix+"done:"+m)
	}
	out, err := checkAndLock.Run(ctx, g.rdb, keys, l.token, ttl.Milliseconds()).Int64Slice()
	if err != nil {
		return nil, nil, g.failed(ctx, err)
	}
	if len(out) != len(markers)+1 {
		return nil, nil, g.failed(ctx, fmt.Errorf("check-and-lock answered %d values for %d markers", len(out), len(markers)))
	}
	found = make([]bool, len(markers))
	for i := range markers {
		found[i] = out[i] == 1
	}
	switch out[len(markers)] {
	case 1:
		return found, l, nil
	case 0:
		return found, nil, ErrHeld
	}
	return found, nil, nil
}

// Release deletes the lock only if it is still ours: after a TTL expiry another owner may hold
// it, and deleting that would let a third request in.
const releaseSrc = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`

var release = redis.NewScript(releaseSrc)

// Release gives the lock back; a failure is harmless (the TTL ends it).
func (l *Lock) Release(ctx context.Context) {
	if l == nil || l.g.skipping() { // while Redis is skipped the TTL ends it; no timeout to pay
		return
	}
	if err := release.Run(ctx, l.g.rdb, []string{l.key}, l.token).Err(); err != nil && !errors.Is(err, redis.Nil) {
		_ = l.g.failed(ctx, err)
	}
}

// Done returns the value of a done marker and whether it exists.
// Returns ErrUnavailable if Redis did not answer.
func (g *Guard) Done(ctx context.Context, name string) (string, bool, error) {
	if g.skipping() {
		return "", false, ErrUnavailable
	}
	v, err := g.rdb.Get(ctx, g.prefix+"done:"+name).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, g.failed(ctx, err)
	}
	return v, true, nil
}

// MarkDone sets a done marker after the database committed; a failure only costs later repeats
// a trip to MySQL.
func (g *Guard) MarkDone(ctx context.Context, name, value string, ttl time.Duration) {
	if g.skipping() {
		return
	}
	if err := g.rdb.Set(ctx, g.prefix+"done:"+name, value, ttl).Err(); err != nil {
		_ = g.failed(ctx, err)
	}
}

// DoneAll reports, in one round trip, which of the named done markers exist.
// Returns ErrUnavailable if Redis did not answer.
func (g *Guard) DoneAll(ctx context.Context, names ...string) ([]bool, error) {
	if g.skipping() {
		return nil, ErrUnavailable
	}
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = g.prefix + "done:" + n
	}
	vals, err := g.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, g.failed(ctx, err)
	}
	found := make([]bool, len(vals))
	for i, v := range vals {
		found[i] = v != nil
	}
	return found, nil
}

// MarkAllDone sets several done markers in one round trip; like MarkDone, failure is harmless.
func (g *Guard) MarkAllDone(ctx context.Context, value string, ttl time.Duration, names ...string) {
	if g.skipping() {
		return
	}
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range names {
			p.Set(ctx, g.prefix+"done:"+n, value, ttl)
		}
		return nil
	})
	if err != nil {
		_ = g.failed(ctx, err)
	}
}

// MarkDoneAndRelease sets done markers and gives l back in one round trip: what a request
// does once its transaction committed. A nil lock (taken while Redis was down) only marks.
// Like MarkAllDone, failure is harmless: the lock's TTL ends it and repeats go to MySQL.
func (g *Guard) MarkDoneAndRelease(ctx context.Context, l *Lock, value string, ttl time.Duration, names ...string) {
	if l == nil {
		g.MarkAllDone(ctx, value, ttl, names...)
		return
	}
	if g.skipping() {
		l.Release(ctx)
		return
	}
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range names {
			p.Set(ctx, g.prefix+"done:"+n, value, ttl)
		}
		// The markers first: a twin that takes the lock after us must find them.
		p.Eval(ctx, releaseSrc, []string{l.key}, l.token)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		_ = g.failed(ctx, err)
	}
}

func (g *Guard) skipping() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now().Before(g.downUntil)
}

// failed starts a skip interval and warns once for it. A request that gave up (its context
// ended) says nothing about Redis and starts no interval.
func (g *Guard) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ErrUnavailable
	}
	g.mu.Lock()
	now := g.now()
	warn := !now.Before(g.downUntil)
	g.downUntil = now.Add(retryInterval)
	g.mu.Unlock()
	if warn {
		g.log.Warn().Err(err).Dur("skip_for", retryInterval).Msg("redis unavailable: carrying on with MySQL alone")
	}
	return ErrUnavailable
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// LibraryLogger routes go-redis's own messages (dial failures, pool notices) into log at debug
// level: the guard already warns once per outage in its own words. Pass it to redis.SetLogger.
func LibraryLogger(log zerolog.Logger) libraryLogger { return libraryLogger{log} }

type libraryLogger struct{ log zerolog.Logger }

func (l libraryLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug().Msgf(format, v...)
}
