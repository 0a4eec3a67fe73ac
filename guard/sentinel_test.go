package guard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/internal/testenv"
)

// freePort is a TCP port on 127.0.0.1 that nothing listens on right now, as redis-server takes it.
func freePort(t *testing.T) string { return strconv.Itoa(testenv.FreePort(t)) }

// startRedis runs Debian's redis-server in the foreground with args, stopped when the test ends.
// A missing redis-server fails the test: scripts/services.sh installs it.
func startRedis(t *testing.T, port string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed (scripts/services.sh installs it): %v", err)
	}
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer c.Close()
	testenv.Eventually(t, 10*time.Second, func() error {
		if err := c.Ping(context.Background()).Err(); err != nil {
			return fmt.Errorf("redis-server on %s: %w", port, err)
		}
		return nil
	})
	return cmd
}

// The guard in sentinel mode, on a real master, replica and Sentinel: it finds the master through
// the Sentinel, and after the master is SIGKILLed and the Sentinel promotes the replica, it answers
// again, from the new master, with the markers written before the kill.
func TestSentinelFailover(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mp, rp, sp := freePort(t), freePort(t), freePort(t)
	common := []string{"--bind", "127.0.0.1", "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", dir}
	master := startRedis(t, mp, append([]string{"--port", mp}, common...)...)
	startRedis(t, rp, append([]string{"--port", rp, "--replicaof", "127.0.0.1", mp}, common...)...)
	conf := filepath.Join(dir, "sentinel.conf")
	text := strings.Join([]string{
		"port " + sp, "bind 127.0.0.1", "protected-mode no", "dir " + dir,
		"sentinel monitor paygw 127.0.0.1 " + mp + " 1",
		"sentinel down-after-milliseconds paygw 1000",
		"sentinel failover-timeout paygw 5000",
	}, "\n") + "\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	startRedis(t, sp, conf, "--sentinel")

	g := guard.New(guard.Options{Mode: guard.ModeSentinel, Addrs: []string{"127.0.0.1:" + sp}, MasterName: "paygw",
		Prefix: "paygw-test:" + testenv.Random(6) + ":", Timeout: time.Second}, testenv.Logger(t))
	t.Cleanup(func() { _ = g.Close() })
	g.SetNamespace("db-"+testenv.Random(6), 1)
	ns := g.Namespace()

	const tag, pay = "trade:S1", "pay:alipay:S1"
	_, lock, err := g.CheckAndAcquire(ctx, tag, time.Minute, pay)
	if err != nil || lock == nil {
		t.Fatalf("CheckAndAcquire through the Sentinel = %v %v; want the lock", lock, err)
	}
	g.MarkDoneAndRelease(ctx, ns, tag, lock, "APPLIED", time.Minute, 1, pay)

	direct := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + mp})
	defer direct.Close()
	if n, err := direct.DBSize(ctx).Result(); err != nil || n == 0 {
		t.Fatalf("the master holds %d keys (%v); the guard wrote elsewhere", n, err)
	}
	// The replica's first sync (a fork and a transfer) can take seconds on a loaded box: wait for
	// its link to be up before asking it to acknowledge the marker.
	replica := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + rp})
	defer replica.Close()
	testenv.Eventually(t, 30*time.Second, func() error {
		info, err := replica.Info(ctx, "replication").Result()
		if err == nil && !strings.Contains(info, "master_link_status:up") {
			err = fmt.Errorf("the replica's link to the master is not up:\n%s", info)
		}
		return err
	})
	if n, err := direct.Do(ctx, "WAIT", 1, 15000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica = %d %v", n, err)
	}

	if err := master.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var found []bool
	testenv.Eventually(t, 30*time.Second, func() error {
		found, err = g.DoneAll(ctx, tag, pay)
		if err != nil && !errors.Is(err, guard.ErrUnavailable) {
			t.Fatalf("DoneAll during the failover = %v; want ErrUnavailable or an answer", err)
		}
		return err
	})
	if !found[0] {
		t.Fatal("the new master lacks the marker written before the kill")
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + sp})
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, "paygw").Result()
	if err != nil || addr[1] != rp {
		t.Fatalf("the Sentinel's master = %v %v; want the replica on %s", addr, err, rp)
	}
	t.Logf("answered again %.1fs after the kill, from the promoted replica", time.Since(killed).Seconds())
}
