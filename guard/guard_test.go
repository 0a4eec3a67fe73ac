package guard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/testenv"
)

func TestAcquireRelease(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)

	a := acquire(t, g, "order-1", 10*time.Second, "first Acquire")
	if l, err := g.Acquire(ctx, "order-1", 10*time.Second); !errors.Is(err, guard.ErrHeld) || l != nil {
		t.Fatalf("second Acquire = %v, %v; want nil, ErrHeld", l, err)
	}
	// Another name is another lock.
	other := acquire(t, g, "order-2", 10*time.Second, "Acquire of another name")
	defer other.Release(ctx)

	a.Release(ctx)
	acquire(t, g, "order-1", 10*time.Second, "Acquire after Release").Release(ctx)
}

// acquire takes the lock name for ttl, failing t unless it gets it; what names the step.
func acquire(t *testing.T, g *guard.Guard, name string, ttl time.Duration, what string) *guard.Lock {
	t.Helper()
	l, err := g.Acquire(context.Background(), name, ttl)
	if err != nil || l == nil {
		t.Fatalf("%s of %q = %v, %v; want a lock", what, name, l, err)
	}
	return l
}

func TestPrefixSeparatesGuards(t *testing.T) {
	ctx := context.Background()
	g1, g2 := testenv.Guard(t), testenv.Guard(t)
	l := acquire(t, g1, "shared", 10*time.Second, "Acquire")
	defer l.Release(ctx)
	acquire(t, g2, "shared", 10*time.Second, "Acquire under another prefix").Release(ctx)
}

func TestReleaseDoesNotDeleteAnotherOwnersLock(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)

	a := acquire(t, g, "order", 150*time.Millisecond, "Acquire of A")
	// Redis expires the key by its own clock: wait for it, with a deadline, to let B in.
	var b *guard.Lock
	testenv.Eventually(t, 5*time.Second, func() error {
		var err error
		b, err = g.Acquire(ctx, "order", 10*time.Second)
		if err != nil && !errors.Is(err, guard.ErrHeld) {
			t.Fatal(err)
		}
		if b == nil {
			return errors.New("lock A did not expire after its 150ms TTL")
		}
		return nil
	})

	a.Release(ctx) // A's TTL ended; the key is B's now and must survive
	if l, err := g.Acquire(ctx, "order", 10*time.Second); !errors.Is(err, guard.ErrHeld) {
		t.Fatalf("Acquire after stale Release = %v, %v; want ErrHeld (B's lock was deleted)", l, err)
	}

	b.Release(ctx)
	acquire(t, g, "order", 10*time.Second, "Acquire after B's Release").Release(ctx)
}

func TestReleaseNilLock(t *testing.T) {
	var l *guard.Lock
	l.Release(context.Background()) // must not panic
}

func TestDoneMarkDone(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)

	if v, ok, err := g.Done(ctx, "T", "missing"); err != nil || ok || v != "" {
		t.Fatalf("Done(missing) = %q, %v, %v; want \"\", false, nil", v, ok, err)
	}

	g.MarkDone(ctx, "T", "pay-1", `{"status":"paid"}`, time.Minute)
	if v, ok, err := g.Done(ctx, "T", "pay-1"); err != nil || !ok || v != `{"status":"paid"}` {
		t.Fatalf("Done(pay-1) = %q, %v, %v; want the marked value", v, ok, err)
	}
	// Done markers and locks live under different keys.
	if _, err := g.Acquire(ctx, "pay-1", time.Second); err != nil {
		t.Fatalf("Acquire of a name that has a done marker: %v", err)
	}

	// A marker ends with its TTL, by Redis's clock: wait for that, with a deadline.
	const ttl = 150 * time.Millisecond
	marked := time.Now()
	g.MarkDone(ctx, "T", "short", "v", ttl)
	// Missing is wrong only while the TTL cannot have run out yet (a stalled box may pass it).
	if _, ok, err := g.Done(ctx, "T", "short"); err != nil || (!ok && time.Since(marked) < ttl) {
		t.Fatalf("Done(short) right after MarkDone = %v, %v; want it there until its TTL", ok, err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		_, ok, err := g.Done(ctx, "T", "short")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return fmt.Errorf("Done(short) still there %s after MarkDone with a %s TTL", time.Since(marked).Round(time.Millisecond), ttl)
		}
		return nil
	})
}

func TestPing(t *testing.T) {
	if err := testenv.Guard(t).Ping(context.Background()); err != nil {
		t.Fatalf("Ping on the live Redis: %v", err)
	}
}

func TestRedisDown(t *testing.T) {
	ctx := context.Background()
	g := testenv.DeadGuard(t)

	if l, err := g.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrUnavailable) || l != nil {
		t.Fatalf("Acquire = %v, %v; want nil, ErrUnavailable", l, err)
	}
	// Connection refused costs no time, so this cannot tell a skip from a try: TestSkipInterval
	// counts the connections.
	if _, _, err := g.Done(ctx, "T", "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done = %v; want ErrUnavailable", err)
	}
	g.MarkDone(ctx, "T", "x", "v", time.Second) // must not panic
	if err := g.Ping(ctx); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Ping = %v; want ErrUnavailable", err)
	}
	var nilLock *guard.Lock
	nilLock.Release(ctx)
}

func TestDoneFirstOnDeadRedis(t *testing.T) {
	// Done, not Acquire, is the first call: its own failure path must report ErrUnavailable too.
	if _, _, err := testenv.DeadGuard(t).Done(context.Background(), "T", "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done = %v; want ErrUnavailable", err)
	}
}

func TestReleaseOnFailingRedis(t *testing.T) {
	ctx := context.Background()
	testenv.Guard(t) // fails the test loudly when Redis is missing
	prefix := "paygw-test:" + testenv.Random(6) + ":"
	g := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix}, testenv.Logger(t))
	l := acquire(t, g, "x", 10*time.Second, "Acquire")
	g.Close()
	l.Release(ctx) // the client is gone: must neither panic nor block
	if _, _, err := g.Done(ctx, "T", "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done after a failed Release = %v; want ErrUnavailable", err)
	}

	// The failed Release left the lock to its TTL.
	again := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix}, testenv.Logger(t))
	defer again.Close()
	if _, err := again.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrHeld) {
		t.Fatalf("Acquire after a failed Release = %v; want ErrHeld", err)
	}
}

// silentRedis accepts connections and never answers, so every command costs a full timeout.
type silentRedis struct {
	addr     string
	accepted chan net.Conn
	counted  int // connections from others than dials, seen so far
}

func newSilentRedis(tb testing.TB) *silentRedis {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &silentRedis{addr: ln.Addr().String(), accepted: make(chan net.Conn, 64)}
	stop := make(chan struct{})
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, unanswered, until the test ends
			mu.Unlock()
			select {
			case s.accepted <- c:
			case <-stop:
				return
			}
		}
	}()
	tb.Cleanup(func() {
		close(stop)
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return s
}

// dials returns how many connections others have made so far. It connects once itself and counts
// what the listener accepts until its own connection: the kernel hands connections to Accept in
// the order they were established, so every one made before this call is counted, with no sleep.
func (s *silentRedis) dials(t *testing.T) int {
	t.Helper()
	probe, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c := <-s.accepted:
			if c.RemoteAddr().String() == probe.LocalAddr().String() {
				return s.counted
			}
			s.counted++
		case <-timeout:
			t.Fatal("the silent Redis did not accept a connection within 10 s")
		}
	}
}

func TestSkipInterval(t *testing.T) {
	ctx := context.Background()
	redis := newSilentRedis(t)
	clk := testenv.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	g := guard.New(guard.Options{Addr: redis.addr, Now: clk.Now}, testenv.Logger(t))
	t.Cleanup(func() { g.Close() })

	if _, err := g.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Acquire = %v; want ErrUnavailable", err)
	}
	if n := redis.dials(t); n != 1 {
		t.Fatalf("%d connections after the first call; want 1", n)
	}

	// Until the interval ends nothing goes to Redis. The clock stands still while the calls
	// run, so the last instant of the interval is tested however slow the box is.
	clk.Advance(guard.RetryInterval - time.Nanosecond)
	if _, err := g.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("second Acquire = %v; want ErrUnavailable", err)
	}
	if _, _, err := g.Done(ctx, "T", "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done = %v; want ErrUnavailable", err)
	}
	g.MarkDone(ctx, "T", "x", "v", time.Second)
	if n := redis.dials(t); n != 1 {
		t.Fatalf("%d connections after calls in the skip interval; want still 1", n)
	}

	// Ping ignores the interval: /readyz must see Redis as it is now.
	if err := g.Ping(ctx); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Ping = %v; want ErrUnavailable", err)
	}
	if n := redis.dials(t); n != 2 {
		t.Fatalf("%d connections after Ping; want 2", n)
	}

	// Once the interval is over Redis is tried again.
	clk.Advance(time.Nanosecond)
	if _, _, err := g.Done(ctx, "T", "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done after the interval = %v; want ErrUnavailable", err)
	}
	if n := redis.dials(t); n != 3 {
		t.Fatalf("%d connections after the interval; want 3 (Redis retried)", n)
	}
}

func TestAcquireConcurrent(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)
	const n = 50
	var (
		won      atomic.Int32
		held     atomic.Int32
		mu       sync.Mutex
		unwanted []error
	)
	testenv.AtOnce(n, func(int) {
		_, err := g.Acquire(ctx, "race", 10*time.Second)
		switch {
		case err == nil:
			won.Add(1)
		case errors.Is(err, guard.ErrHeld):
			held.Add(1)
		default:
			mu.Lock()
			unwanted = append(unwanted, err)
			mu.Unlock()
		}
	})
	if len(unwanted) > 0 {
		t.Fatalf("unexpected errors: %v", unwanted)
	}
	if won.Load() != 1 || held.Load() != n-1 {
		t.Fatalf("%d acquired and %d got ErrHeld; want 1 and %d", won.Load(), held.Load(), n-1)
	}
}

func TestCancelledRequestDoesNotMarkRedisDown(t *testing.T) {
	g := testenv.Guard(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Acquire(ctx, "x", time.Second); err == nil {
		t.Fatal("Acquire with a cancelled context succeeded")
	}
	g.MarkDone(ctx, "T", "x", "v", time.Second)
	// The client gave up; Redis is healthy and the next request must still use it.
	l, err := g.Acquire(context.Background(), "x", time.Second)
	if err != nil {
		t.Fatalf("Acquire after a cancelled request = %v; want a lock", err)
	}
	l.Release(context.Background())
}

func TestDoneAllAndMarkAllDone(t *testing.T) {
	g := testenv.Guard(t)
	ctx := context.Background()
	g.MarkAllDone(ctx, "T", "APPLIED", time.Minute, "a", "b")
	found, err := g.DoneAll(ctx, "T", "a", "missing", "b")
	if err != nil || len(found) != 3 || !found[0] || found[1] || !found[2] {
		t.Fatalf("DoneAll = %v, %v; want [true false true]", found, err)
	}
	if _, err := testenv.DeadGuard(t).DoneAll(ctx, "T", "a"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("dead guard: %v, want ErrUnavailable", err)
	}
}

func TestCheckAndAcquire(t *testing.T) {
	g := testenv.Guard(t)
	ctx := context.Background()

	// Nothing done: the lock is taken, and a second caller finds it held.
	found, lock, err := g.CheckAndAcquire(ctx, "t1", time.Minute, "pay:1", "note:1")
	if err != nil || lock == nil || found[0] || found[1] {
		t.Fatalf("first: %v %v %v", found, lock, err)
	}
	if _, l2, err := g.CheckAndAcquire(ctx, "t1", time.Minute, "pay:1", "note:1"); !errors.Is(err, guard.ErrHeld) || l2 != nil {
		t.Fatalf("second: %v %v, want ErrHeld", l2, err)
	}
	// Done: markers set before the lock goes back; now the first marker answers, no lock tried.
	g.MarkDoneAndRelease(ctx, g.Namespace(), "t1", lock, "APPLIED", time.Minute, 0, "pay:1")
	found, l3, err := g.CheckAndAcquire(ctx, "t1", time.Minute, "pay:1", "note:other")
	if err != nil || l3 != nil || !found[0] || found[1] {
		t.Fatalf("after done: %v %v %v; want [true false], no lock", found, l3, err)
	}
	if _, _, err := testenv.DeadGuard(t).CheckAndAcquire(ctx, "t1", time.Minute, "pay:1"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("dead guard: %v", err)
	}
}

// Markers and locks live in the namespace of the database they describe: two databases behind
// one Redis and one prefix never see each other's, and a suspended guard says nothing.
func TestNamespaces(t *testing.T) {
	ctx := context.Background()
	prefix := "paygw-test:" + testenv.Random(6) + ":"
	a := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix, Timeout: 3 * time.Second}, testenv.Logger(t))
	b := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix, Timeout: 3 * time.Second}, testenv.Logger(t))
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	if !a.SetNamespace("db-a", 1) || a.SetNamespace("db-a", 1) {
		t.Fatal("SetNamespace must report a change once")
	}
	b.SetNamespace("db-b", 1)

	_, lock, err := a.CheckAndAcquire(ctx, "trade:T1", time.Minute, "pay:alipay:X")
	if err != nil {
		t.Fatal(err)
	}
	a.MarkDoneAndRelease(ctx, a.Namespace(), "trade:T1", lock, "APPLIED", time.Minute, 42, "pay:alipay:X")
	if found, lock, err := b.CheckAndAcquire(ctx, "trade:T1", time.Minute, "pay:alipay:X"); err != nil || found[0] || lock == nil {
		t.Fatalf("db-b saw db-a's marker or lock: %v %v %v", found, lock, err)
	}
	if found, _ := a.DoneAll(ctx, "trade:T1", "pay:alipay:X"); !found[0] {
		t.Fatal("db-a lost its own marker")
	}
	// A new epoch of the same database is a new namespace too.
	a.SetNamespace("db-a", 2)
	if found, _ := a.DoneAll(ctx, "trade:T1", "pay:alipay:X"); found[0] {
		t.Fatal("a marker of epoch 1 answered in epoch 2")
	}

	// The high-water mark: raised by the post-commit round trip, never lowered.
	if n, err := a.HighWater(ctx, "db-a", 1); err != nil || n != 42 {
		t.Fatalf("high water of db-a epoch 1 = %d, %v; want 42", n, err)
	}
	if err := a.RaiseHighWater(ctx, "db-a", 1, 7); err != nil {
		t.Fatal(err)
	}
	if n, _ := a.HighWater(ctx, "db-a", 1); n != 42 {
		t.Fatalf("high water lowered to %d", n)
	}
	if n, _ := a.HighWater(ctx, "db-a", 2); n != 0 {
		t.Fatalf("epoch 2 starts with high water %d, want 0", n)
	}
	if err := a.RaiseMaxEpoch(ctx, "db-a", 3); err != nil {
		t.Fatal(err)
	}
	_ = a.RaiseMaxEpoch(ctx, "db-a", 2)
	if e, err := b.MaxEpoch(ctx, "db-a"); err != nil || e != 3 {
		t.Fatalf("max epoch = %d, %v; want 3", e, err)
	}

	// A commit's markers go to the epoch read before the commit: a replica slow to write them
	// while the database rolled back and the epoch moved on must not vouch, in the new epoch,
	// for a commit the database lost.
	before := a.Namespace()
	a.SetNamespace("db-a", 5)
	a.MarkDoneAndRelease(ctx, before, "trade:T1", nil, "APPLIED", time.Minute, 99, "pay:alipay:late")
	if found, _ := a.DoneAll(ctx, "trade:T1", "pay:alipay:late"); found[0] {
		t.Fatal("a late marker landed in the new epoch")
	}
	if n, _ := a.HighWater(ctx, "db-a", 5); n != 0 {
		t.Fatalf("a late marker raised the new epoch's high water to %d", n)
	}

	a.Suspend()
	if _, err := a.DoneAll(ctx, "trade:T1", "pay:alipay:X"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("suspended guard answered: %v", err)
	}
	if _, err := a.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("suspended guard took a lock: %v", err)
	}
}
