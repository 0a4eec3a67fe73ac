package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/simulate"
	"github.com/paygw/paygw/webhook"
)

// sinkProc is one running `paygw simulate webhook-sink`.
type sinkProc struct {
	cmd  *exec.Cmd
	out  *testenv.LogBuffer
	done chan struct{}
	url  string
}

// startSink runs the sink with args and waits (at most 10 s) for GET /stats to answer.
func startSink(t *testing.T, env []string, args ...string) *sinkProc {
	t.Helper()
	addr := freeAddr(t)
	p := &sinkProc{out: &testenv.LogBuffer{}, done: make(chan struct{}), url: "http://" + addr}
	p.cmd = exec.Command(bin, append([]string{"simulate", "webhook-sink", "--addr", addr}, args...)...)
	p.cmd.Env = childEnv(env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if res, err := http.Get(p.url + "/stats"); err == nil {
			res.Body.Close()
			return p
		}
		select {
		case <-p.done:
			t.Fatalf("webhook-sink exited with %d:\n%s", p.cmd.ProcessState.ExitCode(), p.out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook-sink not answering within 10s:\n%s", p.out)
		}
	}
}

func (p *sinkProc) deliver(t *testing.T, id, typ, tradeNo string, keys ...webhook.Secret) int {
	t.Helper()
	body := fmt.Appendf(nil, `{"id":%q,"type":%q,"timestamp":%q,"data":{"trade_no":%q}}`, id, typ, time.Now().UTC().Format(time.RFC3339Nano), tradeNo)
	req, err := http.NewRequest(http.MethodPost, p.url+"/paygw", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = webhook.Headers(id, time.Now(), body, keys...)
	req.Header.Set("Content-Type", "application/json")
	return testenv.Send(t, http.DefaultClient, req).Code
}

func (p *sinkProc) stats(t *testing.T) simulate.SinkStats {
	t.Helper()
	st, err := simulate.FetchSinkStats(context.Background(), http.DefaultClient, p.url, false)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestSimulateWebhookSink runs the real binary: it verifies with either secret of a rotation,
// refuses a stranger's signature, counts duplicates, fails every delivery at --fail-rate 1, and
// stops cleanly on SIGINT without printing its secret.
func TestSimulateWebhookSink(t *testing.T) {
	newer, older := testenv.WebhookSecret(t), testenv.WebhookSecret(t)
	sink := startSink(t, []string{"PAYGW_SINK_SECRET=" + older}, "--secret", newer, "--secret", older)
	kn, ko := webhook.MustParseSecret(newer), webhook.MustParseSecret(older)
	for _, c := range []struct {
		id   string
		keys []webhook.Secret
		want int
	}{
		{"evt_a", []webhook.Secret{kn}, 204},
		{"evt_b", []webhook.Secret{ko}, 204},
		{"evt_a", []webhook.Secret{kn, ko}, 204},
		{"evt_c", []webhook.Secret{webhook.MustParseSecret(testenv.WebhookSecret(t))}, 401},
	} {
		if got := sink.deliver(t, c.id, "order.paid", "T-"+c.id, c.keys...); got != c.want {
			t.Fatalf("%s: %d, want %d\n%s", c.id, got, c.want, sink.out)
		}
	}
	st := sink.stats(t)
	if st.Requests != 4 || st.Accepted != 3 || st.Distinct != 2 || st.Duplicates != 1 || st.Refused != 1 || st.ByType["order.paid"] != 2 {
		t.Fatalf("stats %+v", st)
	}
	if err := sink.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sink.done:
	case <-time.After(10 * time.Second):
		t.Fatal("webhook-sink did not stop within 10s of SIGINT")
	}
	out := sink.out.String()
	if code := sink.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGINT:\n%s", code, out)
	}
	if !strings.Contains(out, "webhook sink on "+sink.url) || !strings.Contains(out, "204 evt_a order.paid T-evt_a") ||
		strings.Contains(out, newer[6:]) || strings.Contains(out, older[6:]) {
		t.Fatalf("output:\n%s", out)
	}

	// The environment's secret, and --fail-rate 1.
	failing := startSink(t, []string{"PAYGW_SINK_SECRET=" + older}, "--fail-rate", "1", "--quiet")
	if got := failing.deliver(t, "evt_f", "order.closed", "T-f", ko); got != 500 {
		t.Fatalf("--fail-rate 1: %d, want 500", got)
	}
	if st := failing.stats(t); st.Failed != 1 || st.Accepted != 0 || st.Distinct != 0 {
		t.Fatalf("stats %+v", st)
	}
	if strings.Contains(failing.out.String(), "evt_f") {
		t.Fatalf("--quiet printed a delivery:\n%s", failing.out)
	}
}

// TestSimulateWebhookSinkRecord: what the sink answered 2xx is in --record FILE even after a
// SIGKILL, and a sink started again with the same file appends to it; a delivery failed on
// purpose is not there.
func TestSimulateWebhookSinkRecord(t *testing.T) {
	secret := testenv.WebhookSecret(t)
	key := webhook.MustParseSecret(secret)
	record := filepath.Join(t.TempDir(), "record.jsonl")
	env := []string{"PAYGW_SINK_SECRET=" + secret}
	first := startSink(t, env, "--record", record, "--quiet")
	for _, id := range []string{"evt_a", "evt_b"} {
		if got := first.deliver(t, id, "order.paid", "T-"+id, key); got != 204 {
			t.Fatalf("%s: %d, want 204\n%s", id, got, first.out)
		}
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	failing := startSink(t, env, "--record", record, "--quiet", "--fail-rate", "1")
	if got := failing.deliver(t, "evt_c", "order.paid", "T-evt_c", key); got != 500 {
		t.Fatalf("--fail-rate 1: %d, want 500", got)
	}
	again := startSink(t, env, "--record", record, "--quiet")
	if got := again.deliver(t, "evt_a", "order.paid", "T-evt_a", key); got != 204 {
		t.Fatalf("evt_a again: %d, want 204", got)
	}
	b, err := os.ReadFile(record) // #nosec G304 -- the test's own temporary file
	if err != nil {
		t.Fatal(err)
	}
	recs, err := simulate.ReadSinkRecords(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.WebhookID)
	}
	if strings.Join(ids, " ") != "evt_a evt_b evt_a" {
		t.Fatalf("recorded %v, want evt_a evt_b evt_a:\n%s", ids, b)
	}
}
