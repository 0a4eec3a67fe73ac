package walkthrough

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
)

// fulfil builds and starts examples/fulfil on a free port and a database of its own, with secret,
// and returns its webhook URL, its DSN and its output.
func fulfil(t *testing.T, repo, dir, secret string) (url, dsn string, out *testenv.LogBuffer) {
	t.Helper()
	bin := filepath.Join(dir, "fulfil")
	build := exec.Command("go", "build", "-o", bin, "./examples/fulfil")
	build.Dir = repo
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/fulfil: %v\n%s", err, b)
	}
	dsn = testenv.NewDatabase(t)
	addr := "127.0.0.1:" + freePort(t)
	cmd := exec.Command(bin, "--addr", addr, "--dsn", dsn)
	cmd.Env = append(os.Environ(), "FULFIL_WEBHOOK_SECRET="+secret)
	out = &testenv.LogBuffer{}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait(); _ = pw.Close() })
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if strings.Contains(sc.Text(), "listening") {
				close(listening)
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatalf("examples/fulfil did not listen within 30 s:\n%s", out)
	}
	return "http://" + addr + "/webhooks", dsn, out
}

// TestWebhookConsumer runs the README's "Webhooks: the consumer side" end to end: examples/fulfil
// with a fresh secret, the demo given the same secret by PAYGW_DEMO_WEBHOOK_SECRET, an order paid
// as in the walkthrough, and the fulfilment row in the consumer's database, once.
func TestWebhookConsumer(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	secret := testenv.WebhookSecret(t)
	url, fulfilDSN, fulfilOut := fulfil(t, repo, dir, secret)
	_, _, log, env := demo(t, repo, dir, map[string]string{
		"PAYGW_DEMO_WEBHOOK_SECRET": secret, "PAYGW_DEMO_WEBHOOK_URL": url})
	token, err := os.ReadFile(filepath.Join(dir, ".demo", "api_token"))
	if err != nil {
		t.Fatal(err)
	}
	api := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, env["PAYGW_URL"]+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("Idempotency-Key", "consumer-"+testenv.Random(6))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return string(b)
	}
	api("PUT", "/v1/stock/A-100", `{"num":10,"price_fen":1999}`)
	m := tradeNo.FindStringSubmatch(api("POST", "/v1/orders", `{"user_id":42,"sku":"A-100","num":1}`))
	if m == nil {
		t.Fatal("no trade_no in the create's answer")
	}
	trade := m[1]
	notify := exec.Command("bash", "scripts/alipay-notify.sh", trade, "19.99")
	notify.Dir = dir
	notify.Env = append(os.Environ(), "PAYGW_URL="+env["PAYGW_URL"])
	if b, err := notify.CombinedOutput(); err != nil || !strings.HasSuffix(strings.TrimSpace(string(b)), "success") {
		t.Fatalf("scripts/alipay-notify.sh: %v\n%s", err, b)
	}
	testenv.Until(t, 30*time.Second, "the fulfilment row", func() bool {
		return testenv.Count(t, fulfilDSN, `SELECT COUNT(*) FROM fulfilment WHERE trade_no = ? AND amount_fen = 1999`, trade) == 1
	})
	if n := testenv.Count(t, fulfilDSN, `SELECT COUNT(*) FROM webhook_receipt WHERE event_type = 'order.paid'`); n != 1 {
		t.Errorf("%d order.paid receipts, want 1", n)
	}
	if !strings.Contains(fulfilOut.String(), "type=order.paid trade_no="+trade) {
		t.Errorf("examples/fulfil did not log the applied event:\n%s\ndemo log:\n%s", fulfilOut, log)
	}
}
