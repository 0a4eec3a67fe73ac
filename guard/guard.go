// Package guard is paygw's Redis layer: short-lived owner locks that make an in-flight twin fail
// fast, and "done" markers that let repeats answer without SQL. It is only ever an accelerator:
// when Redis is unreachable every call reports ErrUnavailable and callers carry on through the
// database's unique keys. Every key carries the namespace of the database its facts come from
// (SetNamespace), so a marker can never answer for a database that does not hold its fact.
package guard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/metrics"
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

// Guard wraps one Redis client: a single server, a Redis Cluster or a Sentinel-managed master.
// Keys are prefix + namespace + kind + name. A lock and the done markers of one trade carry the
// same hash tag ({tag}), so they live in one hash slot and one script or MGET may touch them all
// on a cluster.
type Guard struct {
	rdb    redis.UniversalClient
	prefix string
	ns     atomic.Pointer[namespace]
	log    zerolog.Logger
	met    *metrics.Metrics

	now       func() time.Time
	mu        sync.Mutex
	downUntil time.Time
}

// Modes of Options.Mode.
const (
	ModeSingle   = "single"
	ModeCluster  = "cluster"
	ModeSentinel = "sentinel"
)

// Options for New. Prefix separates deployments (and tests) sharing one Redis.
type Options struct {
	// Mode is ModeSingle (the default), ModeCluster or ModeSentinel. Addrs are the server (single),
	// the cluster's seed nodes (cluster) or the Sentinels (sentinel); Addr is a one-item Addrs.
	Mode       string
	Addrs      []string
	Addr       string
	MasterName string // the master the Sentinels watch (sentinel mode)
	Password   string
	DB         int // 0 in cluster mode
	Prefix     string
	Timeout    time.Duration // per dial, read and write; default 300ms

	// Metrics counts the guard's answers (paygw_guard_total); nil counts nothing.
	Metrics *metrics.Metrics

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
	addrs := o.Addrs
	if len(addrs) == 0 && o.Addr != "" {
		addrs = []string{o.Addr}
	}
	uo := &redis.UniversalOptions{
		Addrs:         addrs,
		MasterName:    o.MasterName,
		Password:      o.Password,
		DB:            o.DB,
		DialTimeout:   timeout,
		ReadTimeout:   timeout,
		WriteTimeout:  timeout,
		MaxRetries:    -1, // a retry doubles the cost of an outage; the database is the fallback
		DialerRetries: 1,
		PoolSize:      64,
		// Cluster mode: MOVED, ASK and TRYAGAIN are followed up to this many times by the cluster
		// client itself (a slot moved or a failover is under way), each after a short backoff.
		MaxRedirects:    3,
		MinRetryBackoff: 8 * time.Millisecond,
		MaxRetryBackoff: 64 * time.Millisecond,
	}
	var rdb redis.UniversalClient
	switch o.Mode {
	case ModeCluster:
		co := uo.Cluster()
		// After a failover the slot map must not stay stale for the library's default minute:
		// a dead master's slots would be "Redis down" all that time. Reload it every second (one
		// CLUSTER SLOTS in the background, only while there is traffic).
		co.ClusterStateReloadInterval = time.Second
		rdb = redis.NewClusterClient(co)
	case ModeSentinel:
		rdb = redis.NewUniversalClient(uo)
	default:
		uo.MasterName = ""
		if len(uo.Addrs) > 1 {
			uo.Addrs = uo.Addrs[:1] // one server: never a cluster by accident
		}
		rdb = redis.NewUniversalClient(uo)
	}
	prefix := o.Prefix
	if prefix == "" {
		prefix = "paygw:"
	}
	prefix = noBraces(prefix) // a brace here would become every key's hash tag
	now := o.Now
	if now == nil {
		now = time.Now
	}
	g := &Guard{rdb: rdb, prefix: prefix, log: log, met: o.Metrics, now: now}
	g.ns.Store(&namespace{})
	return g
}

// namespace is the part of every key that names the database the keys describe. Suspended: no
// database identity is known, so no marker may be read or written and no lock taken.
type namespace struct {
	keys      string
	suspended bool
}

// SetNamespace binds every later key to a database identity (instance id and epoch); it reports
// whether the namespace changed. Markers written under another namespace are never read again.
func (g *Guard) SetNamespace(instance string, epoch uint64) bool {
	keys := namespaceKeys(instance, epoch)
	old := g.ns.Swap(&namespace{keys: keys})
	return old.suspended || old.keys != keys
}

func namespaceKeys(instance string, epoch uint64) string {
	return noBraces(instance) + ":" + strconv.FormatUint(epoch, 10) + ":"
}

// Suspend makes every call answer ErrUnavailable until SetNamespace: while the database's identity
// is unknown, Redis cannot say anything true about it.
func (g *Guard) Suspend() { g.ns.Store(&namespace{suspended: true}) }

// Namespace is the current namespace ("" when none is bound).
func (g *Guard) Namespace() string { return g.ns.Load().keys }

// key names a Redis key of the current namespace.
func (g *Guard) key(kind, name string) string { return g.prefix + g.ns.Load().keys + kind + name }

// lockKey names the lock name; its hash tag is the name, so the done markers tagged by the
// same name (doneKey) share its hash slot.
func (g *Guard) lockKey(name string) string {
	return g.prefix + g.ns.Load().keys + "lock:{" + slotTag(name) + "}"
}

// doneKey names the done marker name of namespace ns, in the hash slot of tag.
func (g *Guard) doneKey(ns, tag, name string) string {
	return g.prefix + ns + "done:{" + slotTag(tag) + "}" + name
}

// slotTag makes tag a valid Redis hash tag: non-empty and free of braces (Redis hashes the text
// between the first "{" and the next "}"), by escaping "%", "{" and "}"; distinct tags stay
// distinct.
func slotTag(tag string) string {
	if tag == "" {
		return "%"
	}
	return braceEscaper.Replace(tag)
}

var braceEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// noBraces escapes the braces of a key's prefix or namespace, which must never form a hash tag.
func noBraces(s string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	return braceEscaper.Replace(s)
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
func (g *Guard) Acquire(ctx context.Context, name string, ttl time.Duration) (l *Lock, err error) {
	defer func() { g.count(nil, l, err) }()
	if g.skipping() {
		return nil, ErrUnavailable
	}
	l = &Lock{g: g, key: g.lockKey(name), token: newToken()}
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
// ErrHeld when another owner holds the lock and ErrUnavailable when Redis did not answer. The
// markers are those tagged by name (DoneAll, MarkDoneAndRelease with tag name): one hash slot.
func (g *Guard) CheckAndAcquire(ctx context.Context, name string, ttl time.Duration, markers ...string) (found []bool, lock *Lock, err error) {
	defer func() { g.count(found, lock, err) }()
	if g.skipping() {
		return nil, nil, ErrUnavailable
	}
	ns := g.ns.Load().keys
	l := &Lock{g: g, key: g.prefix + ns + "lock:{" + slotTag(name) + "}", token: newToken()}
	keys := make([]string, 0, 1+len(markers))
	keys = append(keys, l.key)
	for _, m := range markers {
		keys = append(keys, g.doneKey(ns, name, m))
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

// count tells paygw_guard_total what a lock request came to.
func (g *Guard) count(found []bool, lock *Lock, err error) {
	switch {
	case errors.Is(err, ErrUnavailable):
		g.met.Guard(metrics.GuardRedisDown)
	case errors.Is(err, ErrHeld):
		g.met.Guard(metrics.GuardHeld)
	case err != nil:
	case lock != nil:
		g.met.Guard(metrics.GuardAcquired)
	case len(found) > 0 && found[0]:
		g.met.Guard(metrics.GuardDoneMarker)
	}
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

// Done returns the value of the done marker name tagged by tag and whether it exists.
// Returns ErrUnavailable if Redis did not answer.
func (g *Guard) Done(ctx context.Context, tag, name string) (string, bool, error) {
	if g.skipping() {
		return "", false, ErrUnavailable
	}
	v, err := g.rdb.Get(ctx, g.doneKey(g.ns.Load().keys, tag, name)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, g.failed(ctx, err)
	}
	return v, true, nil
}

// MarkDone sets the done marker name tagged by tag after the database committed; a failure only
// costs later repeats a trip to MySQL.
func (g *Guard) MarkDone(ctx context.Context, tag, name, value string, ttl time.Duration) {
	if g.skipping() {
		return
	}
	if err := g.rdb.Set(ctx, g.doneKey(g.ns.Load().keys, tag, name), value, ttl).Err(); err != nil {
		_ = g.failed(ctx, err)
	}
}

// DoneAll reports, in one round trip, which of the named done markers tagged by tag exist (one
// hash slot, so one MGET on a cluster). Returns ErrUnavailable if Redis did not answer.
func (g *Guard) DoneAll(ctx context.Context, tag string, names ...string) ([]bool, error) {
	if g.skipping() {
		return nil, ErrUnavailable
	}
	ns := g.ns.Load().keys
	keys := make([]string, len(names))
	for i, n := range names {
		keys[i] = g.doneKey(ns, tag, n)
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

// MarkAllDone sets several done markers tagged by tag in one round trip; like MarkDone, failure
// is harmless.
func (g *Guard) MarkAllDone(ctx context.Context, tag, value string, ttl time.Duration, names ...string) {
	if g.skipping() {
		return
	}
	ns := g.ns.Load().keys
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range names {
			p.Set(ctx, g.doneKey(ns, tag, n), value, ttl)
		}
		return nil
	})
	if err != nil {
		_ = g.failed(ctx, err)
	}
}

// MarkDoneAndRelease sets done markers and gives l back in one round trip: what a request
// does once its transaction committed. ns is the namespace (Namespace) the caller read before
// its transaction: the markers describe the database as it was then, so they go there even if
// the epoch has moved on since (where nobody reads them), never into a newer epoch whose database
// may have lost the commit. recordID is the idempotent_record the markers stand for (0 for
// none): the namespace's high-water mark is raised to it in the same trip, so a database that
// loses that record is found out (see HighWater). A nil lock (taken while Redis was down) only
// marks. The markers are tagged by tag, the name CheckAndAcquire and DoneAll read them under.
// Failure is harmless: the lock's TTL ends it and repeats go to MySQL. On a cluster the
// pipeline's single-key commands go to their slots' nodes (the high-water mark has its own).
func (g *Guard) MarkDoneAndRelease(ctx context.Context, ns, tag string, l *Lock, value string, ttl time.Duration, recordID int64, names ...string) {
	if g.skipping() {
		l.Release(ctx)
		return
	}
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if recordID > 0 {
			p.Eval(ctx, raiseSrc, []string{g.prefix + ns + "highwater"}, recordID)
		}
		for _, n := range names {
			p.Set(ctx, g.doneKey(ns, tag, n), value, ttl)
		}
		// The markers first: a twin that takes the lock after us must find them.
		if l != nil {
			p.Eval(ctx, releaseSrc, []string{l.key}, l.token)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		_ = g.failed(ctx, err)
	}
}

// raiseSrc sets KEYS[1] to ARGV[1] unless it holds a larger number already.
const raiseSrc = `local v = tonumber(redis.call("GET", KEYS[1]) or "0")
if tonumber(ARGV[1]) > v then redis.call("SET", KEYS[1], ARGV[1]) return tonumber(ARGV[1]) end
return v`

var raise = redis.NewScript(raiseSrc)

// HighWater is the largest idempotent_record id the markers of a database's epoch stand for,
// raised by every MarkDoneAndRelease and by RaiseHighWater; 0 if none. A database whose largest
// id is below it has lost records that markers still vouch for.
func (g *Guard) HighWater(ctx context.Context, instance string, epoch uint64) (int64, error) {
	return g.number(ctx, g.prefix+namespaceKeys(instance, epoch)+"highwater")
}

// RaiseHighWater raises the high-water mark of a database's epoch to id (never lowers it).
func (g *Guard) RaiseHighWater(ctx context.Context, instance string, epoch uint64, id int64) error {
	return g.raiseNumber(ctx, g.prefix+namespaceKeys(instance, epoch)+"highwater", id)
}

// MaxEpoch is the largest epoch any replica has bound for a database instance; 0 if none. A
// database whose epoch is below it was restored from before that epoch began.
func (g *Guard) MaxEpoch(ctx context.Context, instance string) (uint64, error) {
	n, err := g.number(ctx, g.prefix+"epoch:"+instance)
	return uint64(max(n, 0)), err
}

// RaiseMaxEpoch records that epoch has been bound for a database instance.
func (g *Guard) RaiseMaxEpoch(ctx context.Context, instance string, epoch uint64) error {
	return g.raiseNumber(ctx, g.prefix+"epoch:"+instance, int64(epoch)) // #nosec G115 -- epochs count up from 1
}

// number and raiseNumber work whatever the namespace's state: the identity watcher uses them
// to decide it.
func (g *Guard) number(ctx context.Context, key string) (int64, error) {
	n, err := g.rdb.Get(ctx, key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, ErrUnavailable
	}
	return n, nil
}

func (g *Guard) raiseNumber(ctx context.Context, key string, n int64) error {
	if err := raise.Run(ctx, g.rdb, []string{key}, n).Err(); err != nil {
		return ErrUnavailable
	}
	return nil
}

func (g *Guard) skipping() bool {
	if g.ns.Load().suspended {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now().Before(g.downUntil)
}

// failed starts a skip interval and warns once for it. A request that gave up (its context
// ended) says nothing about Redis and starts no interval; nor does a cluster's redirection
// (MOVED, ASK) or TRYAGAIN that outlived the client's own redirects: the cluster answers, a slot
// is moving, and the next request may well be served. That one call still carries on without
// Redis.
func (g *Guard) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil || redirected(err) {
		if ctx.Err() == nil {
			g.log.Debug().Err(err).Msg("redis cluster redirection: this request carries on with MySQL")
		}
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

// redirected reports a Redis Cluster redirection or a TRYAGAIN: the cluster is up, a slot is
// moving or a multi-key command met a slot mid-migration.
func redirected(err error) bool {
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsTryAgainError(err)
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

// refusalsKept bounds the refusals kept per trade_no; refusalsTTL is how long they are kept, the
// longest any channel retries.
const (
	refusalsKept = 20
	refusalsTTL  = 72 * time.Hour
)

// RecordRefusal remembers, for an operator asking why an order is not paid, that a message
// claiming to be about tradeNo was refused. Unverified input goes to Redis only, bounded and
// expiring, never to the database. Failure is harmless.
func (g *Guard) RecordRefusal(ctx context.Context, tradeNo, entry string) {
	if g.skipping() {
		return
	}
	key := g.key("refused:", tradeNo)
	_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, key, entry)
		p.LTrim(ctx, key, 0, refusalsKept-1)
		p.Expire(ctx, key, refusalsTTL)
		return nil
	})
	if err != nil {
		_ = g.failed(ctx, err)
	}
}

// Refusals returns the refusals remembered for tradeNo, newest first.
func (g *Guard) Refusals(ctx context.Context, tradeNo string) ([]string, error) {
	if g.skipping() {
		return nil, ErrUnavailable
	}
	v, err := g.rdb.LRange(ctx, g.key("refused:", tradeNo), 0, -1).Result()
	if err != nil {
		return nil, g.failed(ctx, err)
	}
	return v, nil
}
