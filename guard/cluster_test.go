package guard_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/testenv"
)

// clusterClient is a plain client on the local cluster, to look behind the guard.
func clusterClient(t *testing.T, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Every guard call on a Redis Cluster, for names spread over every slot range: a lock and its
// markers share a hash slot, so no script or MGET meets CROSSSLOT, and every call answers (no
// ErrUnavailable, no warning in the log).
func TestClusterEveryPath(t *testing.T) {
	ctx := context.Background()
	var logs testenv.LogBuffer
	g := testenv.ClusterGuard(t, 3*time.Second, zerolog.New(&logs).Level(zerolog.DebugLevel))
	inst := "db-" + testenv.Random(6)
	g.SetNamespace(inst, 1)
	ns := g.Namespace()

	const n = 300
	for i := range n {
		tag := fmt.Sprintf("trade:T%d", i)
		pay, note := fmt.Sprintf("pay:alipay:X%d", i), fmt.Sprintf("note:alipay:N%d", i)

		found, lock, err := g.CheckAndAcquire(ctx, tag, time.Minute, pay, note)
		if err != nil || lock == nil || found[0] || found[1] {
			t.Fatalf("%s: CheckAndAcquire = %v %v %v; want the lock", tag, found, lock, err)
		}
		if _, l2, err := g.CheckAndAcquire(ctx, tag, time.Minute, pay, note); !errors.Is(err, guard.ErrHeld) || l2 != nil {
			t.Fatalf("%s: twin CheckAndAcquire = %v %v; want ErrHeld", tag, l2, err)
		}
		g.MarkDoneAndRelease(ctx, ns, tag, lock, "APPLIED", time.Minute, int64(i+1), pay, note)
		found, l3, err := g.CheckAndAcquire(ctx, tag, time.Minute, pay, note)
		if err != nil || l3 != nil || !found[0] || !found[1] {
			t.Fatalf("%s: after MarkDoneAndRelease = %v %v %v; want both markers, no lock", tag, found, l3, err)
		}
		if found, err := g.DoneAll(ctx, tag, pay, "missing", note); err != nil || !found[0] || found[1] || !found[2] {
			t.Fatalf("%s: DoneAll = %v %v; want [true false true]", tag, found, err)
		}
		// The lock went back with the markers: a repeat that passes no markers can take it.
		if _, l4, err := g.CheckAndAcquire(ctx, tag, time.Minute, "refund:alipay:R"); err != nil || l4 == nil {
			t.Fatalf("%s: lock not released by MarkDoneAndRelease: %v %v", tag, l4, err)
		} else {
			l4.Release(ctx)
		}

		g.MarkAllDone(ctx, tag, "REPEAT", time.Minute, "a", "b")
		if found, err := g.DoneAll(ctx, tag, "a", "b"); err != nil || !found[0] || !found[1] {
			t.Fatalf("%s: MarkAllDone then DoneAll = %v %v", tag, found, err)
		}
		g.MarkDone(ctx, tag, "c", "v", time.Minute)
		if v, ok, err := g.Done(ctx, tag, "c"); err != nil || !ok || v != "v" {
			t.Fatalf("%s: MarkDone then Done = %q %v %v", tag, v, ok, err)
		}

		idem := fmt.Sprintf("idem:scope:K%d", i)
		l, err := g.Acquire(ctx, idem, time.Minute)
		if err != nil {
			t.Fatalf("%s: Acquire: %v", idem, err)
		}
		if _, err := g.Acquire(ctx, idem, time.Minute); !errors.Is(err, guard.ErrHeld) {
			t.Fatalf("%s: second Acquire: %v; want ErrHeld", idem, err)
		}
		l.Release(ctx)
		if l, err = g.Acquire(ctx, idem, time.Minute); err != nil {
			t.Fatalf("%s: Acquire after Release: %v", idem, err)
		}
		l.Release(ctx)

		if i%10 == 0 {
			trade := fmt.Sprintf("T%d", i)
			g.RecordRefusal(ctx, trade, "bad signature")
			g.RecordRefusal(ctx, trade, "unknown order")
			if r, err := g.Refusals(ctx, trade); err != nil || len(r) != 2 || r[0] != "unknown order" {
				t.Fatalf("%s: Refusals = %v %v", trade, r, err)
			}
		}
	}

	if hw, err := g.HighWater(ctx, inst, 1); err != nil || hw != n {
		t.Fatalf("HighWater = %d %v; want %d", hw, err, n)
	}
	if err := g.RaiseHighWater(ctx, inst, 1, n+5); err != nil {
		t.Fatal(err)
	}
	if err := g.RaiseHighWater(ctx, inst, 1, 3); err != nil {
		t.Fatal(err)
	}
	if hw, _ := g.HighWater(ctx, inst, 1); hw != n+5 {
		t.Fatalf("HighWater = %d; want %d", hw, n+5)
	}
	if err := g.RaiseMaxEpoch(ctx, inst, 4); err != nil {
		t.Fatal(err)
	}
	if e, err := g.MaxEpoch(ctx, inst); err != nil || e != 4 {
		t.Fatalf("MaxEpoch = %d %v; want 4", e, err)
	}
	if err := g.Ping(ctx); err != nil {
		t.Fatal(err)
	}

	if s := logs.String(); strings.Contains(s, "CROSSSLOT") || strings.Contains(s, "unavailable") {
		t.Fatalf("the guard logged a failure on the cluster:\n%s", s)
	}

	// The keys did spread over the cluster: every master holds some of this test's.
	c := clusterClient(t, testenv.RedisCluster(t))
	var mu sync.Mutex
	perMaster := map[string]int{}
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := m.Scan(ctx, cursor, "*"+ns+"done:*", 1000).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			perMaster[m.Options().Addr] += len(keys)
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(perMaster) != 3 {
		t.Fatalf("markers per master = %v; want keys on all 3 masters", perMaster)
	}
	for addr, k := range perMaster {
		if k == 0 {
			t.Fatalf("master %s holds none of the markers: %v", addr, perMaster)
		}
	}
}

// A master SIGKILLed: while its replica is promoted (cluster-node-timeout 2000) the guard answers
// ErrUnavailable, each call within its timeout budget, and callers carry on with the database;
// once the replica is master the guard answers again, without a restart.
func TestClusterFailover(t *testing.T) {
	ctx := context.Background()
	addrs := testenv.RedisCluster(t)
	t.Cleanup(func() { testenv.RedisCluster(t) }) // the killed node rejoins, as a replica
	g := testenv.ClusterGuard(t, 300*time.Millisecond, testenv.Logger(t))
	g.SetNamespace("db-"+testenv.Random(6), 1)

	tag := "trade:failover-" + testenv.Random(6)
	found, lock, err := g.CheckAndAcquire(ctx, tag, time.Minute, "pay:x")
	if err != nil || lock == nil || found[0] {
		t.Fatalf("before the kill: %v %v %v", found, lock, err)
	}
	lock.Release(ctx)

	// The master of the trade's slot: the slot of "{tag}".
	c := clusterClient(t, addrs)
	m, err := c.MasterForKey(ctx, "{"+tag+"}")
	if err != nil {
		t.Fatal(err)
	}
	victim := m.Options().Addr
	pid := testenv.RedisClusterPid(t, victim)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill master %s (pid %d): %v", victim, pid, err)
	}
	killed := time.Now()
	t.Logf("SIGKILLed master %s (pid %d)", victim, pid)

	var sawDown bool
	var recovered time.Duration
	for time.Since(killed) < 30*time.Second {
		start := time.Now()
		_, l, err := g.CheckAndAcquire(ctx, tag, time.Second, "pay:x")
		took := time.Since(start)
		// The budget: a dial or read timeout (300ms) per attempt, a few short backoffs between
		// the cluster client's redirects; never a hang.
		if took > 3*time.Second {
			t.Fatalf("a call during the failover took %s", took)
		}
		switch {
		case errors.Is(err, guard.ErrUnavailable):
			sawDown = true
		case err == nil && l != nil:
			l.Release(ctx)
			if sawDown {
				recovered = time.Since(killed)
			}
		case err != nil:
			t.Fatalf("during the failover: %v; want the lock or ErrUnavailable", err)
		}
		if recovered > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sawDown {
		t.Fatal("the guard never reported ErrUnavailable while the slot's master was dead")
	}
	if recovered == 0 {
		t.Fatalf("the guard did not recover within 30s of the kill")
	}
	t.Logf("guard answered again %s after the kill", recovered.Round(time.Millisecond))

	// The slot has a new master, and the guard's every call works on it.
	// (Gossip reaches every node within a few seconds: ask afresh until it has.)
	all := []string{"127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103", "127.0.0.1:7104", "127.0.0.1:7105", "127.0.0.1:7106"}
	master := victim
	for deadline := time.Now().Add(15 * time.Second); master == victim && time.Now().Before(deadline); {
		fresh := redis.NewClusterClient(&redis.ClusterOptions{Addrs: all})
		if m2, err := fresh.MasterForKey(ctx, "{"+tag+"}"); err == nil {
			master = m2.Options().Addr
		}
		_ = fresh.Close()
		if master == victim {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if master == victim {
		t.Fatalf("slot still mastered by the killed node %s", victim)
	}
	// A node that has not heard of the new master yet may still answer one call with an error,
	// which starts the guard's skip interval (a second): the calls work again after it.
	testenv.Eventually(t, 15*time.Second, func() error {
		_, lock, err := g.CheckAndAcquire(ctx, tag, time.Minute, "pay:x", "note:y")
		if err != nil || lock == nil {
			return fmt.Errorf("lock after the failover: %v %v", lock, err)
		}
		g.MarkDoneAndRelease(ctx, g.Namespace(), tag, lock, "APPLIED", time.Minute, 1, "pay:x", "note:y")
		if found, err := g.DoneAll(ctx, tag, "pay:x", "note:y"); err != nil || !found[0] || !found[1] {
			return fmt.Errorf("markers after the failover: %v %v", found, err)
		}
		return nil
	})
}

// A MOVED redirection (a real one: a plain client asking the wrong node) is the cluster
// answering, not Redis down: the call carries on without Redis but no skip interval starts.
func TestClusterRedirectionIsNotDown(t *testing.T) {
	ctx := context.Background()
	addrs := testenv.RedisCluster(t)
	plain := redis.NewClient(&redis.Options{Addr: addrs[0]})
	t.Cleanup(func() { _ = plain.Close() })
	var moved error
	for i := 0; moved == nil && i < 1000; i++ {
		if err := plain.Get(ctx, fmt.Sprintf("k%d", i)).Err(); err != nil && !errors.Is(err, redis.Nil) {
			moved = err
		}
	}
	if _, ok := redis.IsMovedError(moved); !ok {
		t.Fatalf("no MOVED from a node asked for another's keys: %v", moved)
	}
	if !guard.Redirected(moved) {
		t.Fatalf("%v not classified as a redirection", moved)
	}
	g := testenv.ClusterGuard(t, 3*time.Second, testenv.Logger(t))
	if err := g.Failed(ctx, moved); !errors.Is(err, guard.ErrUnavailable) {
		t.Fatalf("Failed(MOVED) = %v; want ErrUnavailable for this call", err)
	}
	if g.Skipping() {
		t.Fatal("a MOVED started the skip interval: the guard treats the cluster as down")
	}
	if err := g.Failed(ctx, errors.New("dial tcp: connection refused")); !errors.Is(err, guard.ErrUnavailable) || !g.Skipping() {
		t.Fatal("a dial failure must start the skip interval")
	}
}
