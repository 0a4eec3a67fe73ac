package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
)

// figures are one phase's results.
type figures struct {
	name, fault string
	prefix      string
	orders      []order
	dups        int
	st          *stats
	v           verdict
	g           global
	recover     string
	notes       []string
	problems    []string
	took        time.Duration
	creates     *createResult
	counts      totals // counter increments during the phase (certification failures, retries)
	needGroups  bool   // the phase is about group apply: no committed group fails it
}

func (c *chaos) newFigures(ctx context.Context, name, prefix string, n, dups int, fault string) (*figures, error) {
	orders, err := seed(ctx, c.db, prefix, n)
	if err != nil {
		return nil, err
	}
	return &figures{name: name, fault: fault, prefix: prefix, orders: orders, dups: dups, st: newStats()}, nil
}

func (f *figures) notef(format string, args ...any) {
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}
func (f *figures) fail(format string, args ...any) {
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

// withLoad releases the phase's orders over loadFor while fault runs; fault gets a channel
// closed when every sender has finished.
func (c *chaos) withLoad(ctx context.Context, f *figures, fault func(done <-chan struct{}) error) error {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		c.sender.load(ctx, f.st, f.orders, f.dups, float64(len(f.orders))/c.o.loadFor.Seconds(), 1<<16)
		close(done)
	}()
	err := fault(done)
	<-done
	f.took = time.Since(start)
	return err
}

// underFault releases the phase's load with every replica's readiness polled, runs fault a
// third into it (fault returns when its fault began, t0), and returns the readiness span after
// t0: when it went bad, and when every replica was "ready" again (waitSpan).
func (c *chaos) underFault(ctx context.Context, f *figures, bad string, fault func() (t0 time.Time, err error)) (red, green time.Time, err error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rd := pollReady(pctx, c.urls, 25*time.Millisecond)
	var t0 time.Time
	err = c.withLoad(ctx, f, func(<-chan struct{}) error {
		sleep(ctx, c.o.loadFor/3)
		var err error
		t0, err = fault()
		return err
	})
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	red, green = waitSpan(ctx, rd, t0, bad, "ready")
	return red, green, nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// storm: every notification 8 times at once, spread over the replicas; no fault.
func (c *chaos) storm(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "storm", "CXST", c.o.stormOrders, 8, "8 concurrent duplicates per notification over 3 replicas")
	if err != nil {
		return nil, err
	}
	c.stormLoad(ctx, f)
	return f, nil
}

// stormLoad sends every notification of f dups times at once, as fast as the replicas answer.
func (c *chaos) stormLoad(ctx context.Context, f *figures) {
	start := time.Now()
	c.sender.load(ctx, f.st, f.orders, f.dups, 0, 48)
	f.took = time.Since(start)
	f.recover = "-"
	f.notef("throughput %.0f requests/s", float64(f.st.requests.Load())/f.took.Seconds())
}

// createsDuring runs the idempotent create path against every replica while a fault lasts,
// with `paygw sweep` every second so that a claim stranded by the fault is taken over.
func (c *chaos) createsDuring(ctx context.Context, f *figures, tag string) (wait func()) {
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("chaos-%s-%02d", tag, i+1)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
				_ = c.sweep(ctx) // fails while MariaDB is down; the next pass runs
			}
		}
	}()
	go func() {
		defer wg.Done()
		r := createStorm(ctx, c.db, c.urls, c.token, keys, 45*time.Second)
		f.creates = &r
		close(stop)
	}()
	return func() {
		wg.Wait()
		f.problems = append(f.problems, f.creates.problems...)
	}
}

// redisKill: Redis SIGKILLed a third into the load, restarted 1.5 s later.
func (c *chaos) redisKill(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "redis", "CXRD", c.o.orders, 2, "Redis SIGKILL, restarted after 1.5 s")
	if err != nil {
		return nil, err
	}
	var t0, tStart, tUp time.Time
	red, green, err := c.underFault(ctx, f, "degraded", func() (time.Time, error) {
		t0 = time.Now()
		if err := c.svc.kill("redis", c.o.redisPort, syscall.SIGKILL, 10*time.Second); err != nil {
			return t0, err
		}
		wait := c.createsDuring(ctx, f, "redis")
		sleep(ctx, 1500*time.Millisecond)
		tStart = time.Now()
		var err error
		tUp, err = c.restart(ctx, 60*time.Second, c.redisPing, wait)
		return t0, err
	})
	if err != nil {
		return nil, err
	}
	if tUp.IsZero() {
		return nil, errors.New("redis did not answer PING after the restart")
	}
	f.notef("Redis down %s (SIGKILL until it answered PING again; restarted after %s)", ms(tUp.Sub(t0)), ms(tStart.Sub(t0)))
	switch {
	case red.IsZero():
		f.notef("readyz never reported redis down (outage shorter than a poll)")
		f.recover = "-"
	case green.IsZero():
		f.fail("readyz still degraded 20s after Redis came back")
	default:
		f.notef("readyz degraded %s after the kill; ready on every replica %s after the restart began", ms(red.Sub(t0)), ms(green.Sub(tStart)))
		f.recover = ms(green.Sub(tStart))
	}
	return f, nil
}

// restart starts the killed service again (services.sh up) while probe is polled, then waits
// for the fault's creates (wait) and returns when probe first answered: zero if not within
// limit. When services.sh fails, it returns at once.
func (c *chaos) restart(ctx context.Context, limit time.Duration, probe func(context.Context) error, wait func()) (time.Time, error) {
	back := answering(ctx, limit, probe)
	if err := c.svc.up(ctx); err != nil {
		return time.Time{}, err
	}
	tUp := <-back
	wait()
	return tUp, nil
}

// waitSpan waits (at most 20 s) for the readiness to go bad and come back good after t.
func waitSpan(ctx context.Context, rd *readiness, t time.Time, bad, good string) (red, green time.Time) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if red, green = rd.span(t, 3, bad, good); !green.IsZero() {
			return red, green
		}
		sleep(ctx, 25*time.Millisecond)
	}
	return red, green
}

// replicaKill: a replica SIGKILLed every 2 s (round robin) and restarted at once; a tenth as
// many orders again are paid and refunded twice meanwhile (refundsDuring).
func (c *chaos) replicaKill(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "replica-kill", "CXRK", c.o.orders, 2, "a replica SIGKILLed every 2 s, restarted at once")
	if err != nil {
		return nil, err
	}
	var k kills
	err = c.withLoad(ctx, f, func(done <-chan struct{}) error {
		wait := c.createsDuring(ctx, f, "kill")
		defer wait()
		refunds := c.refundsDuring(ctx, f, max(10, c.o.orders/10))
		defer refunds()
		k, err = c.killReplicas(ctx, done, time.Second, 2*time.Second, time.Now().Add(c.o.loadFor+time.Second))
		return err
	})
	if err != nil {
		return nil, err
	}
	k.note(f)
	return f, nil
}

// groupKill: payments as fast as the replicas take them, 96 in flight, so that they queue into
// group transactions (group apply); a replica SIGKILLed every 700 ms with its groups in MySQL,
// for 2 x --load-for.
// Three times the phase's orders: at full speed they last about as long as the others' load.
func (c *chaos) groupKill(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "group-kill", "CXGK", 3*c.o.orders, 1, "full load (groups in flight), a replica SIGKILLed every 700 ms, restarted at once")
	if err != nil {
		return nil, err
	}
	f.needGroups = true
	start := time.Now()
	done := make(chan struct{})
	go func() {
		c.sender.load(ctx, f.st, f.orders, f.dups, 0, 96)
		close(done)
	}()
	// Kills for twice the other phases' release time (10 s short, 50 s full): the first pass of
	// the load is over by then, and every kill after it only stretches the redeliveries' tail
	// (UnionPay's compressed schedule waits up to 12.5 s a step).
	k, err := c.killReplicas(ctx, done, 300*time.Millisecond, 700*time.Millisecond, time.Now().Add(2*c.o.loadFor))
	<-done
	f.took = time.Since(start)
	if err != nil {
		return nil, err
	}
	k.note(f)
	return f, nil
}

// kills are the figures of killReplicas.
type kills struct {
	n            int
	worst, total time.Duration
}

func (k kills) note(f *figures) {
	if k.n == 0 {
		f.fail("no replica was killed: the load finished within a second")
		return
	}
	f.notef("%d SIGKILLs; SIGKILL to /healthz 200 again: mean %s, max %s", k.n, ms(k.total/time.Duration(k.n)), ms(k.worst))
	f.recover = "max " + ms(k.worst)
}

// killReplicas SIGKILLs a replica (round robin) first after `first`, then every `every`, and
// restarts it at once, until done is closed or until passes.
func (c *chaos) killReplicas(ctx context.Context, done <-chan struct{}, first, every time.Duration, until time.Time) (kills, error) {
	var k kills
	next := time.After(first)
	for time.Now().Before(until) {
		select {
		case <-done:
			return k, nil
		case <-ctx.Done():
			return k, nil
		case <-next:
		}
		next = time.After(every)
		r := c.replicas[k.n%len(c.replicas)]
		c.counters.sample(ctx, c) // its counters die with it
		t := time.Now()
		if _, err := r.signal(syscall.SIGKILL, 5*time.Second); err != nil {
			return k, err
		}
		if err := r.start(ctx); err != nil {
			return k, err
		}
		d := time.Since(t)
		k.n++
		k.total += d
		k.worst = max(k.worst, d)
	}
	return k, nil
}

// mariadbRestart: MariaDB stopped (SIGTERM) a third into the load and started again; the
// replicas must come back by themselves.
func (c *chaos) mariadbRestart(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "mariadb", "CXMY", c.o.orders, 2, "MariaDB restarted (SIGTERM, start), replicas untouched")
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(c.replicas))
	for i, r := range c.replicas {
		pids[i] = r.pid()
	}
	var t0, tDown, tUp time.Time
	red, green, err := c.underFault(ctx, f, "unavailable", func() (time.Time, error) {
		t0 = time.Now()
		wait := c.createsDuring(ctx, f, "mysql")
		if err := c.svc.kill("mariadb", c.o.mysqlPort, syscall.SIGTERM, 90*time.Second); err != nil {
			return t0, err
		}
		tDown = time.Now()
		var err error
		tUp, err = c.restart(ctx, 90*time.Second, c.mysqlPing, wait)
		return t0, err
	})
	if err != nil {
		return nil, err
	}
	if tUp.IsZero() {
		return nil, errors.New("MariaDB did not answer after the restart")
	}
	f.notef("MariaDB took %s to stop, answered again %s after the SIGTERM", ms(tDown.Sub(t0)), ms(tUp.Sub(t0)))
	switch {
	case red.IsZero():
		f.fail("readyz never went red while MariaDB was down")
	case green.IsZero():
		f.fail("readyz not green on every replica within 20s of MariaDB answering again")
	default:
		f.notef("readyz red %s after the SIGTERM; green on every replica %s after the restart began (%s after the SIGTERM)", ms(red.Sub(t0)), ms(green.Sub(tDown)), ms(green.Sub(t0)))
		f.recover = ms(green.Sub(tDown))
	}
	for i, r := range c.replicas {
		if r.pid() != pids[i] || !r.running() {
			f.fail("replica %d was restarted or died during the MariaDB restart", i)
		}
	}
	f.notef("replicas not restarted (same pids)")
	return f, nil
}

// sigterm: replica 0 stopped with SIGTERM mid-load, while slow requests are in flight to it.
func (c *chaos) sigterm(ctx context.Context) (*figures, error) {
	f, err := c.newFigures(ctx, "sigterm", "CXTM", c.o.orders, 2, "replica 0 SIGTERM mid-load (slow bodies in flight), then restarted")
	if err != nil {
		return nil, err
	}
	slow, err := seed(ctx, c.db, "CXTMS", 8)
	if err != nil {
		return nil, err
	}
	w := &cutWatch{replica: 0}
	c.sender.watch.Store(w)
	defer c.sender.watch.Store(nil)
	const margin = 50 * time.Millisecond
	var sent, exited time.Time
	var code int
	var slowOK, slowCut int
	err = c.withLoad(ctx, f, func(done <-chan struct{}) error {
		sleep(ctx, c.o.loadFor/2)
		var wg sync.WaitGroup
		var mu sync.Mutex
		begun := make([]chan struct{}, len(slow))
		for i, o := range slow {
			wg.Add(1)
			begun[i] = make(chan struct{})
			go func() {
				defer wg.Done()
				m, err := c.sender.signers[o.Channel].Sign(payment(o))
				if err != nil {
					close(begun[i])
					return
				}
				// About 1.2 s of body, its first byte sent 300 ms before the SIGTERM.
				body := &slowBody{b: m.Body, chunk: len(m.Body)/12 + 1, pause: 100 * time.Millisecond, begun: begun[i]}
				d := c.sender.post(ctx, f.st, 0, o.Channel, body, len(m.Body), m.Header)
				mu.Lock()
				if d.kind() == "success" {
					slowOK++
				} else {
					slowCut++
				}
				mu.Unlock()
				if d.kind() != "success" { // the channel redelivers elsewhere; the payment must still land
					c.sender.chain(ctx, f.st, o, m, 1)
				}
			}()
		}
		// Every slow request connected and sent its headers (on a loaded box a dial can take longer
		// than any fixed wait, and a request not yet accepted is refused, not cut), then 300 ms
		// for the replica to accept it and start reading its body.
		patience := time.After(5 * time.Second)
		for _, b := range begun {
			select {
			case <-b:
			case <-patience:
			case <-ctx.Done():
			}
		}
		sleep(ctx, 300*time.Millisecond)
		w.mu.Lock()
		sent = time.Now()
		w.sent = sent
		w.mu.Unlock()
		var err error
		code, err = c.replicas[0].signal(syscall.SIGTERM, 20*time.Second)
		exited = time.Now()
		if err != nil {
			return err
		}
		wg.Wait()
		return c.replicas[0].start(ctx)
	})
	if err != nil {
		return nil, err
	}
	f.orders = append(f.orders, slow...)
	var inflight, answered, cut, raced int
	w.mu.Lock()
	for _, d := range w.log {
		if !d.start.Before(sent) || !d.end.After(sent) {
			continue // not in flight at the SIGTERM
		}
		inflight++
		switch {
		case d.err == nil:
			answered++
		case d.wrote.IsZero() || d.wrote.After(sent.Add(-margin)):
			raced++ // not (fully) sent before the signal: never accepted
		default:
			cut++
		}
	}
	w.mu.Unlock()
	if code != 0 {
		f.fail("replica 0 exited with %d after SIGTERM, want 0", code)
	}
	if cut > 0 {
		f.fail("%d request(s) accepted before the SIGTERM were cut (reset/EOF)", cut)
	}
	if slowCut > 0 {
		f.fail("%d of %d slow requests in flight at the SIGTERM did not get a success", slowCut, len(slow))
	}
	f.notef("in flight at the SIGTERM: %d (%d slow bodies), answered %d, cut %d, still being written within %s of the signal %d; slow bodies answered success %d/%d",
		inflight, len(slow), answered, cut, margin, raced, slowOK, len(slow))
	f.notef("exit code %d, %s from SIGTERM to exit", code, ms(exited.Sub(sent)))
	f.recover = "drain " + ms(exited.Sub(sent))
	return f, nil
}
