package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// replica is one `paygw serve` process, restarted on the same port after each kill.
type replica struct {
	n       int
	bin     string
	addr    string
	admin   string // the admin listener: /metrics
	cfg     string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts int
}

func (r *replica) url() string { return "http://" + r.addr }

// start runs the process and waits (at most 15 s) for /healthz.
func (r *replica) start(ctx context.Context) error {
	cmd := exec.Command(r.bin, "serve", "--config", r.cfg) // #nosec G204 -- our own paygw binary and config, named by the operator's --bin and --work
	cmd.Env = childEnv()
	done, err := startLogged(cmd, r.logPath)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.starts++
	r.mu.Unlock()

	return waitAnswers(ctx, fmt.Sprintf("replica %d", r.n), r.url()+"/healthz", 15*time.Second, cmd, done, r.logPath)
}

// startLogged starts cmd with its output appended to logPath. Should this orchestrator die
// without cleaning up, the kernel kills the child. done closes when the child has exited.
func startLogged(cmd *exec.Cmd, logPath string) (done chan struct{}, err error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close() // the Start error is the one to report
		return nil, err
	}
	done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close() // best effort: the child's log, nothing left to report it to
		close(done)
	}()
	return done, nil
}

// waitAnswers waits until url answers 200, at most within, for a process just started as cmd
// (done closes when it exits): its exit first, or the time running out, is an error naming what
// and its log.
func waitAnswers(ctx context.Context, what, url string, within time.Duration, cmd *exec.Cmd, done <-chan struct{}, logPath string) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(within)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited with %d before answering %s (log %s)", what, cmd.ProcessState.ExitCode(), url, logPath)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if res, err := client.Get(url); err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close() // only the status matters
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not 200 within %s (log %s)", what, url, within, logPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *replica) current() (*exec.Cmd, chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd, r.done
}

// startCount is how many times the process was started (1 before any kill).
func (r *replica) startCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts
}

func (r *replica) pid() int {
	if cmd, _ := r.current(); cmd != nil && cmd.Process != nil {
		return cmd.Process.Pid
	}
	return 0
}

func (r *replica) running() bool {
	_, done := r.current()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// signal sends sig and waits (at most timeout) for the exit; it returns the exit code (-1 when
// killed by a signal).
func (r *replica) signal(sig syscall.Signal, timeout time.Duration) (int, error) {
	cmd, done := r.current()
	if cmd == nil {
		return 0, errors.New("not started")
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, err
	}
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return -1, fmt.Errorf("replica %d did not exit within %s of %s", r.n, timeout, sig)
	}
}

// stop ends the process whatever state it is in (used on the way out).
func (r *replica) stop() {
	if !r.running() {
		return
	}
	if _, err := r.signal(syscall.SIGTERM, 15*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
	}
}

// childEnv is this process's environment without PAYGW_ variables, so the config file rules.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYGW_") {
			env = append(env, kv)
		}
	}
	return env
}

// services drives the chaos run's own MariaDB and Redis through scripts/services.sh and their
// pid files in .services/.
type services struct {
	script    string
	dir       string // <repo>/.services
	mysqlPort int
	redisPort int
}

// up starts whichever of the two is not answering (services.sh leaves a live one alone).
func (s services) up(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.script, "up") // #nosec G204 -- our own scripts/services.sh, named by the operator's --services
	cmd.Env = append(os.Environ(), "MYSQL_PORT="+strconv.Itoa(s.mysqlPort), "REDIS_PORT="+strconv.Itoa(s.redisPort))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("services.sh up: %v\n%s", err, out)
	}
	return nil
}

// kill sends sig to the service's process and waits (at most timeout) until it is gone.
func (s services) kill(name string, port int, sig syscall.Signal, timeout time.Duration) error {
	comm := map[string]string{"redis": "redis-server", "mariadb": "mariadbd"}[name]
	return killPidFile(filepath.Join(s.dir, fmt.Sprintf("%s-%d.pid", name, port)), comm, sig, timeout)
}

// killPidFile sends sig to the process a script's pid file names, provided it is comm, and waits
// (at most timeout) until it is gone.
func killPidFile(path, comm string, sig syscall.Signal, timeout time.Duration) error {
	b, err := os.ReadFile(path) // #nosec G304 -- a pid file of our own scripts' state in this checkout
	if err != nil {
		return fmt.Errorf("%s was not started by our scripts (no pid file): %w", comm, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("pid file %s: %q", path, b)
	}
	if got, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); !strings.HasPrefix(string(got), comm) {
		return fmt.Errorf("pid %d of %s is %q, not ours", pid, path, strings.TrimSpace(string(got)))
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("kill %s %d: %w", comm, pid, err)
	}
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) still alive %s after %s", comm, pid, timeout, sig)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(st)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// answering polls a service every 20 ms (at most limit) until probe succeeds and returns when.
func answering(ctx context.Context, limit time.Duration, probe func(context.Context) error) <-chan time.Time {
	at := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(limit)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			err := probe(pctx)
			cancel()
			if err == nil {
				at <- time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		at <- time.Time{}
	}()
	return at
}
