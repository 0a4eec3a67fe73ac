package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// proc is a child process the load tool owns: started in its own process group, stopped with
// SIGTERM (SIGKILL after a grace period), and always waited for.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startProc(name, logPath string, bin string, args ...string) (*proc, error) {
	logf, err := os.Create(logPath) // #nosec G304 -- a log file in the bench's own work directory
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...) // #nosec G204 -- our own paygw binary or redis-server, with the bench's own arguments
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close() // the Start error is the one to report
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close() // best effort: the process's log, nothing left to report it to
		close(p.done)
	}()
	return p, nil
}

// stop ends the process (nil-safe, idempotent).
func (p *proc) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// freePort returns preferred if nothing listens there, else a port the kernel picks.
func freePort(preferred int) (int, error) {
	if preferred > 0 {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(preferred))); err == nil {
			_ = l.Close() // only probing that the port is free
			return preferred, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// benchRedis is the load tool's own redis-server: no persistence, stoppable at will.
type benchRedis struct {
	port int
	dir  string
	p    *proc
}

func (r *benchRedis) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

func (r *benchRedis) start(ctx context.Context) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errors.New("redis-server not found on PATH (scripts/services.sh up installs it)")
	}
	r.p, err = startProc("redis", filepath.Join(r.dir, "redis.log"), bin,
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--dir", r.dir, "--protected-mode", "yes")
	if err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		}
		if r.p.exited() || time.Now().After(deadline) {
			r.p.stop()
			return fmt.Errorf("redis-server on %s did not answer (see %s/redis.log)", r.addr(), r.dir)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *benchRedis) stop() { r.p.stop() }

// gateway is the real paygw binary serving with the bench config.
type gateway struct {
	name, bin, config, dir string
	url, adminURL          string
	p                      *proc
	starts                 int
}

func (g *gateway) start(ctx context.Context) error {
	g.starts++
	var err error
	g.p, err = startProc("paygw", filepath.Join(g.dir, fmt.Sprintf("paygw-%s-%d.log", g.name, g.starts)), g.bin, "serve", "--config", g.config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close() // a probe: only the status matters
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if g.p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			g.p.stop()
			return fmt.Errorf("gateway did not become ready (see %s)", filepath.Join(g.dir, fmt.Sprintf("paygw-%s-%d.log", g.name, g.starts)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (g *gateway) stop() {
	if g != nil {
		g.p.stop()
	}
}

func (g *gateway) restart(ctx context.Context) error {
	g.stop()
	return g.start(ctx)
}
