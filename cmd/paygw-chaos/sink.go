package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paygw/paygw/webhook"
)

// sinkEndpoint is the replicas' webhook endpoint name for the sink.
const sinkEndpoint = "chaos-sink"

// sinkRetrySchedule is the replicas' webhooks.retry_schedule: short enough that deliveries the
// sink fails (30 %) drain within seconds, long enough in all (about 19 s, 16 attempts) that a sink
// SIGKILL or a MariaDB restart does not spend a delivery's schedule (0.3^16 of one failing).
var sinkRetrySchedule = []string{"200ms", "200ms", "300ms", "500ms", "500ms", "1s", "1s", "1s",
	"2s", "2s", "2s", "2s", "2s", "2s", "2s"}

// sinkFailRate is the fraction of verified deliveries the sink answers 500.
const sinkFailRate = "0.3"

// sinkProc is the merchant: a real `paygw simulate webhook-sink` on a fixed address, which
// appends every delivery it answered 2xx to record before answering, so that the record
// survives its SIGKILLs; each start appends to the same file.
type sinkProc struct {
	bin     string
	addr    string
	secret  string // whsec_, generated per run; passed in the environment, not the arguments
	record  string
	logPath string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	kills int
}

func (s *sinkProc) url() string { return "http://" + s.addr }

// webhooksYAML is the replicas' webhooks: block, one endpoint: the sink.
func (s *sinkProc) webhooksYAML() string {
	return fmt.Sprintf("webhooks:\n  retry_schedule: [%s]\n  endpoints:\n    - name: %s\n      url: %q\n      secret: %q\n",
		strings.Join(sinkRetrySchedule, ", "), sinkEndpoint, s.url()+"/paygw", s.secret)
}

// start runs the sink and waits (at most 10 s) for GET /stats.
func (s *sinkProc) start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "simulate", "webhook-sink", "--addr", s.addr, "--fail-rate", sinkFailRate, // #nosec G204 -- our own paygw binary (--bin)
		"--record", s.record, "--quiet")
	cmd.Env = append(childEnv(), "PAYGW_SINK_SECRET="+s.secret)
	done, err := startLogged(cmd, s.logPath)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	return waitAnswers(ctx, "webhook sink", s.url()+"/stats", 10*time.Second, cmd, done, s.logPath)
}

// signal sends sig and waits (at most 10 s) for the exit.
func (s *sinkProc) signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("webhook sink not started")
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("webhook sink did not exit within 10s of %s", sig)
	}
}

// killRestart SIGKILLs the sink and starts it again on the same address after down.
func (s *sinkProc) killRestart(ctx context.Context, down time.Duration) error {
	if err := s.signal(syscall.SIGKILL); err != nil {
		return err
	}
	s.mu.Lock()
	s.kills++
	s.mu.Unlock()
	time.Sleep(down)
	// Restarted even if the phase is ending: the deliveries still owed need the sink.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	return s.start(sctx)
}

// killDuring SIGKILLs the sink once, `after` into a phase unless stop comes first, and restarts it
// 300 ms later; stop waits for the restart and returns its error.
func (s *sinkProc) killDuring(ctx context.Context, after time.Duration) (stop func() error) {
	quit := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		select {
		case <-quit:
			errc <- nil
		case <-ctx.Done():
			errc <- nil
		case <-time.After(after):
			errc <- s.killRestart(ctx, 300*time.Millisecond)
		}
	}()
	return func() error {
		close(quit)
		return <-errc
	}
}

func (s *sinkProc) killCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kills
}

// stop ends the sink on the way out.
func (s *sinkProc) stop() {
	s.mu.Lock()
	running := s.done != nil
	s.mu.Unlock()
	if running {
		_ = s.signal(syscall.SIGTERM) // best effort on the way out
	}
}

// startSink starts the merchant's sink with a secret of its own, before the replicas that
// deliver to it.
func (c *chaos) startSink(ctx context.Context) error {
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return err
	}
	c.sink = &sinkProc{bin: c.o.bin, addr: addr, secret: secret,
		record: filepath.Join(c.o.work, "sink-record.jsonl"), logPath: filepath.Join(c.o.work, "sink.log")}
	return c.sink.start(ctx)
}
