package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// galera drives scripts/galera.sh for the run's Galera cluster (GALERA_*_PORT come from the
// environment, GALERA_PORT from --galera-port).
type galera struct {
	script string
	port   int

	mu       sync.Mutex
	restarts map[int]int // by node index (0-based)
}

func (g *galera) run(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.script, args...) // #nosec G204 -- our own scripts/galera.sh, named by the operator's --galera
	cmd.Env = append(os.Environ(), "GALERA_PORT="+strconv.Itoa(g.port))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("galera.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// starts is how many times this run restarted node i (0-based).
func (g *galera) starts(i int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.restarts[i]
}

// restart starts node i (0-based) again and returns when it is Synced (galera.sh restart).
func (g *galera) restart(ctx context.Context, i int) error {
	err := g.run(ctx, "restart", strconv.Itoa(i+1))
	g.mu.Lock()
	if g.restarts == nil {
		g.restarts = map[int]int{}
	}
	g.restarts[i]++
	g.mu.Unlock()
	return err
}

// galeraKill: the Galera node under replica 1 SIGKILLed a third into the load, started again
// 1.5 s later; it rejoins by IST. The other two nodes keep quorum and keep certifying.
func (c *chaos) galeraKill(ctx context.Context) (*figures, error) {
	const node = 1 // 0-based: Galera node 2, replica 1's
	f, err := c.newFigures(ctx, "galera-node", "CXGN", c.o.orders, 2, "Galera node 2 SIGKILL mid-load, restarted after 1.5 s (IST)")
	if err != nil {
		return nil, err
	}
	var t0, tStart, tSynced time.Time
	red, green, err := c.underFault(ctx, f, "unavailable", func() (time.Time, error) {
		c.counters.sample(ctx, c) // the node's certification failures before it dies with them
		t0 = time.Now()
		if err := c.galera.run(ctx, "kill", strconv.Itoa(node+1)); err != nil {
			return t0, err
		}
		wait := c.createsDuring(ctx, f, "galera")
		sleep(ctx, 1500*time.Millisecond)
		tStart = time.Now()
		err := c.galera.restart(ctx, node)
		tSynced = time.Now()
		wait()
		return t0, err
	})
	if err != nil {
		return nil, err
	}
	f.notef("node 2 down %s (SIGKILL until Synced again); restart to Synced %s (--wsrep-recover, then IST)", ms(tSynced.Sub(t0)), ms(tSynced.Sub(tStart)))
	switch {
	case red.IsZero():
		f.fail("readyz of replica 1 never went red while its Galera node was down")
	case green.IsZero():
		f.fail("readyz not green on every replica within 20s of the node's restart")
	default:
		f.notef("readyz red %s after the kill; green on every replica %s after the restart began", ms(red.Sub(t0)), ms(green.Sub(tStart)))
		f.recover = ms(green.Sub(tStart))
	}
	return f, nil
}

// redisMasterKill: a Redis Cluster master SIGKILLed a third into the load; its replica is
// promoted (cluster-node-timeout 2000), then the old master is started again and rejoins as a
// replica. The guard meanwhile carries on with the database.
func (c *chaos) redisMasterKill(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "redis-master", "CXRM", c.o.orders, 2, "a Redis Cluster master SIGKILL mid-load (replica promoted), then restarted")
	if err != nil {
		return nil, err
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.redisAddrs(), DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
	defer rc.Close()
	victim, slot, probe, err := pickMaster(ctx, rc)
	if err != nil {
		return nil, err
	}
	var t0, tFailover, tStart, tRejoined time.Time
	err = c.withLoad(ctx, f, func(done <-chan struct{}) error {
		sleep(ctx, c.o.loadFor/3)
		c.counters.sample(ctx, c)
		t0 = time.Now()
		if err := c.killRedisNode(victim); err != nil {
			return err
		}
		wait := c.createsDuring(ctx, f, "redism")
		defer wait()
		if tFailover, err = c.waitFailover(ctx, rc, victim, slot, probe); err != nil {
			return err
		}
		tStart = time.Now()
		if err := c.redisClusterUp(ctx); err != nil {
			return err
		}
		tRejoined = time.Now()
		old := redis.NewClient(&redis.Options{Addr: victim})
		role, err := old.Do(ctx, "ROLE").Slice()
		_ = old.Close() // a probe
		if err != nil || len(role) == 0 || role[0] != "slave" {
			f.fail("the old master %s is not a replica after its restart: ROLE %v (%v)", victim, role, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	f.notef("master %s SIGKILLed; its slot %d served by the promoted replica %s after the kill; restarted, it rejoined as a replica in %s",
		victim, slot, ms(tFailover.Sub(t0)), ms(tRejoined.Sub(tStart)))
	f.recover = "failover " + ms(tFailover.Sub(t0))
	return f, nil
}

// stormUnguarded is the storm with every Redis node SIGKILLed first: no guard stops the
// duplicates, so each copy reaches a Galera node, and copies of one payment on different nodes
// certify against each other. The cluster is started again afterwards.
func (c *chaos) stormUnguarded(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "storm-unguarded", "CXSU", c.o.stormOrders, 8,
		"the storm with every Redis node down: each of the 8 copies reaches a Galera node")
	if err != nil {
		return nil, err
	}
	for _, a := range c.redisAddrs() {
		if err := c.killRedisNode(a); err != nil {
			return nil, err
		}
	}
	c.stormLoad(ctx, f)
	start := time.Now()
	if err := c.redisClusterUp(ctx); err != nil {
		return nil, err
	}
	f.notef("the Redis Cluster was started again afterwards: cluster_state ok in %s", ms(time.Since(start)))
	return f, nil
}

// pickMaster chooses the master of the first shard, and a key of one of its slots.
func pickMaster(ctx context.Context, rc *redis.ClusterClient) (addr string, slot int, key string, err error) {
	shards, err := rc.ClusterShards(ctx).Result()
	if err != nil || len(shards) == 0 || len(shards[0].Slots) == 0 {
		return "", 0, "", fmt.Errorf("CLUSTER SHARDS: %d shards, %v", len(shards), err)
	}
	master, r := shardMaster(shards[0]), shards[0].Slots[0]
	if master == "" {
		return "", 0, "", errors.New("CLUSTER SHARDS: the first shard has no online master")
	}
	for i := range 200 {
		key = "chaos-probe-" + strconv.Itoa(i)
		s, err := rc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			return "", 0, "", err
		}
		if s >= r.Start && s <= r.End {
			return master, int(s), key, nil
		}
	}
	return "", 0, "", fmt.Errorf("no probe key in slots %d-%d", r.Start, r.End)
}

// shardMaster is the address of a shard's online master ("" if none).
func shardMaster(sh redis.ClusterShard) string {
	for _, n := range sh.Nodes {
		if n.Role == "master" && n.Health == "online" {
			return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
		}
	}
	return ""
}

// killRedisNode SIGKILLs the cluster node at addr (pid from redis-cluster.sh's pid file).
func (c *chaos) killRedisNode(addr string) error {
	state := ".redis-cluster"
	if c.o.redisClusterPort != 7101 {
		state += "-" + strconv.Itoa(c.o.redisClusterPort)
	}
	_, port, _ := strings.Cut(addr, ":")
	return killPidFile(filepath.Join(c.o.repo, state, "redis-"+port+".pid"), "redis-server", syscall.SIGKILL, 10*time.Second)
}

// waitFailover returns when another node serves slot as master and a write of key there
// succeeds (at most 30 s).
func (c *chaos) waitFailover(ctx context.Context, rc *redis.ClusterClient, victim string, slot int, key string) (time.Time, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rc.ReloadState(ctx)
		if owner := slotMaster(ctx, c.redisAddrs(), victim, slot); owner != "" && owner != victim {
			if rc.Set(ctx, key, "1", time.Minute).Err() == nil {
				return time.Now(), nil
			}
		}
		sleep(ctx, 20*time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("slot %d not served by another master within 30s of killing %s", slot, victim)
}

// slotMaster asks a live node other than skip which master serves slot ("" if none answers).
func slotMaster(ctx context.Context, addrs []string, skip string, slot int) string {
	for _, a := range addrs {
		if a == skip {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: a, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		shards, err := cl.ClusterShards(ctx).Result()
		_ = cl.Close() // a probe
		if err != nil {
			continue
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int64(slot) >= r.Start && int64(slot) <= r.End {
					return shardMaster(sh)
				}
			}
		}
		return ""
	}
	return ""
}

// redisClusterUp runs redis-cluster.sh up: a node that died is started again and rejoins.
func (c *chaos) redisClusterUp(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.o.repo, "scripts", "redis-cluster.sh"), "up") // #nosec G204 -- our own script in this checkout
	cmd.Env = append(os.Environ(), "REDIS_CLUSTER_PORT="+strconv.Itoa(c.o.redisClusterPort))
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("redis-cluster.sh up: %w", err), errors.New(string(out)))
	}
	return nil
}
