package guard_test

import (
	"context"
	"errors"
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

	a, err := g.Acquire(ctx, "order-1", 10*time.Second)
	if err != nil || a == nil {
		t.Fatalf("first Acquire = %v, %v; want a lock", a, err)
	}
	if l, err := g.Acquire(ctx, "order-1", 10*time.Second); !errors.Is(err, guard.ErrHeld) || l != nil {
		t.Fatalf("second Acquire = %v, %v; want nil, ErrHeld", l, err)
	}
	// Another name is another lock.
	other, err := g.Acquire(ctx, "order-2", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire of another name: %v", err)
	}
	defer other.Release(ctx)

	a.Release(ctx)
	b, err := g.Acquire(ctx, "order-1", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	b.Release(ctx)
}

func TestPrefixSeparatesGuards(t *testing.T) {
	ctx := context.Background()
	g1, g2 := testenv.Guard(t), testenv.Guard(t)
	l, err := g1.Acquire(ctx, "shared", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	l2, err := g2.Acquire(ctx, "shared", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire under another prefix: %v", err)
	}
	l2.Release(ctx)
}

func TestReleaseDoesNotDeleteAnotherOwnersLock(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)

	a, err := g.Acquire(ctx, "order", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	var b *guard.Lock
	for b == nil {
		if time.Now().After(deadline) {
			t.Fatal("lock A did not expire after its 150ms TTL")
		}
		time.Sleep(50 * time.Millisecond)
		b, err = g.Acquire(ctx, "order", 10*time.Second)
		if err != nil && !errors.Is(err, guard.ErrHeld) {
			t.Fatal(err)
		}
	}

	a.Release(ctx) // A's TTL ended; the key is B's now and must survive
	if l, err := g.Acquire(ctx, "order", 10*time.Second); !errors.Is(err, guard.ErrHeld) {
		t.Fatalf("Acquire after stale Release = %v, %v; want ErrHeld (B's lock was deleted)", l, err)
	}

	b.Release(ctx)
	c, err := g.Acquire(ctx, "order", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after B's Release: %v", err)
	}
	c.Release(ctx)
}

func TestReleaseNilLock(t *testing.T) {
	var l *guard.Lock
	l.Release(context.Background()) // must not panic
}

func TestDoneMarkDone(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)

	if v, ok, err := g.Done(ctx, "missing"); err != nil || ok || v != "" {
		t.Fatalf("Done(missing) = %q, %v, %v; want \"\", false, nil", v, ok, err)
	}

	g.MarkDone(ctx, "pay-1", `{"status":"paid"}`, time.Minute)
	if v, ok, err := g.Done(ctx, "pay-1"); err != nil || !ok || v != `{"status":"paid"}` {
		t.Fatalf("Done(pay-1) = %q, %v, %v; want the marked value", v, ok, err)
	}
	// Done markers and locks live under different keys.
	if _, err := g.Acquire(ctx, "pay-1", time.Second); err != nil {
		t.Fatalf("Acquire of a name that has a done marker: %v", err)
	}

	g.MarkDone(ctx, "short", "v", 150*time.Millisecond)
	if _, ok, err := g.Done(ctx, "short"); err != nil || !ok {
		t.Fatalf("Done(short) right after MarkDone = %v, %v", ok, err)
	}
	time.Sleep(300 * time.Millisecond)
	if v, ok, err := g.Done(ctx, "short"); err != nil || ok {
		t.Fatalf("Done(short) after its TTL = %q, %v, %v; want missing", v, ok, err)
	}
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
	start := time.Now()
	_, _, err := g.Done(ctx, "x")
	if took := time.Since(start); took >= 50*time.Millisecond {
		t.Errorf("Done during the skip interval took %s; want it to skip Redis", took)
	}
	if !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done = %v; want ErrUnavailable", err)
	}
	g.MarkDone(ctx, "x", "v", time.Second) // must not panic
	if err := g.Ping(ctx); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Ping = %v; want ErrUnavailable", err)
	}
	var nilLock *guard.Lock
	nilLock.Release(ctx)
}

func TestDoneFirstOnDeadRedis(t *testing.T) {
	// Done, not Acquire, is the first call: its own failure path must report ErrUnavailable too.
	if _, _, err := testenv.DeadGuard(t).Done(context.Background(), "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done = %v; want ErrUnavailable", err)
	}
}

func TestReleaseOnFailingRedis(t *testing.T) {
	ctx := context.Background()
	testenv.Guard(t) // fails the test loudly when Redis is missing
	prefix := "paygw-test:" + testenv.Random(6) + ":"
	g := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix}, testenv.Logger(t))
	l, err := g.Acquire(ctx, "x", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	l.Release(ctx) // the client is gone: must neither panic nor block
	if _, _, err := g.Done(ctx, "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done after a failed Release = %v; want ErrUnavailable", err)
	}

	// The failed Release left the lock to its TTL.
	again := guard.New(guard.Options{Addr: testenv.RedisAddr(), Prefix: prefix}, testenv.Logger(t))
	defer again.Close()
	if _, err := again.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrHeld) {
		t.Fatalf("Acquire after a failed Release = %v; want ErrHeld", err)
	}
}

// silentRedis accepts connections and never answers, so every command costs a full timeout;
// it counts the connections made to it.
func silentRedis(tb testing.TB) (addr string, dials *atomic.Int32) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	dials = new(atomic.Int32)
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
			dials.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), dials
}

// settle gives the accept loop time to count a connection that was made.
func settle() { time.Sleep(100 * time.Millisecond) }

func TestSkipInterval(t *testing.T) {
	ctx := context.Background()
	addr, dials := silentRedis(t)
	g := guard.New(guard.Options{Addr: addr}, testenv.Logger(t))
	t.Cleanup(func() { g.Close() })

	if _, err := g.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Acquire = %v; want ErrUnavailable", err)
	}
	failedAt := time.Now() // the interval starts when the failure is seen, after the timeout
	settle()
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections after the first call; want 1", n)
	}

	// Within the interval nothing goes to Redis.
	start := time.Now()
	if _, err := g.Acquire(ctx, "x", time.Second); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("second Acquire = %v; want ErrUnavailable", err)
	}
	if _, _, err := g.Done(ctx, "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done = %v; want ErrUnavailable", err)
	}
	g.MarkDone(ctx, "x", "v", time.Second)
	if took := time.Since(start); took >= 50*time.Millisecond {
		t.Errorf("calls in the skip interval took %s; want them to skip Redis", took)
	}
	settle()
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections after calls in the skip interval; want still 1", n)
	}

	// Ping ignores the interval: /readyz must see Redis as it is now.
	if err := g.Ping(ctx); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Ping = %v; want ErrUnavailable", err)
	}
	settle()
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d connections after Ping; want 2", n)
	}

	// After the interval Redis is tried again.
	time.Sleep(time.Until(failedAt.Add(1100 * time.Millisecond)))
	if _, _, err := g.Done(ctx, "x"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Done after the interval = %v; want ErrUnavailable", err)
	}
	settle()
	if n := dials.Load(); n != 3 {
		t.Fatalf("%d connections after the interval; want 3 (Redis retried)", n)
	}
}

func TestAcquireConcurrent(t *testing.T) {
	ctx := context.Background()
	g := testenv.Guard(t)
	const n = 50
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		won      atomic.Int32
		held     atomic.Int32
		mu       sync.Mutex
		unwanted []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
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
		}()
	}
	close(start)
	wg.Wait()
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
	g.MarkDone(ctx, "x", "v", time.Second)
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
	g.MarkAllDone(ctx, "APPLIED", time.Minute, "a", "b")
	found, err := g.DoneAll(ctx, "a", "missing", "b")
	if err != nil || len(found) != 3 || !found[0] || found[1] || !found[2] {
		t.Fatalf("DoneAll = %v, %v; want [true false true]", found, err)
	}
	if _, err := testenv.DeadGuard(t).DoneAll(ctx, "a"); !errors.Is(err, guard.ErrUnavailable) {
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
	g.MarkDoneAndRelease(ctx, lock, "APPLIED", time.Minute, "pay:1")
	found, l3, err := g.CheckAndAcquire(ctx, "t1", time.Minute, "pay:1", "note:other")
	if err != nil || l3 != nil || !found[0] || found[1] {
		t.Fatalf("after done: %v %v %v; want [true false], no lock", found, l3, err)
	}
	if _, _, err := testenv.DeadGuard(t).CheckAndAcquire(ctx, "t1", time.Minute, "pay:1"); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("dead guard: %v", err)
	}
}
