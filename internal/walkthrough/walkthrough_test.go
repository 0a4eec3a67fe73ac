// Package walkthrough runs README.md's walkthrough as a newcomer would: `scripts/demo.sh` (what
// `make run` calls) in a directory of its own, then every command of the README's "Walkthrough"
// section in order, then SIGTERM to the demo.
package walkthrough

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
)

const section = "## Walkthrough (after `make run`)"

// The demo's default addresses, as the README writes them, and the environment variable that
// moves each in scripts/demo.sh.
var ports = []struct{ host, env string }{
	{"localhost:8080", "PAYGW_HTTP_PORT"},
	{"127.0.0.1:8090", "PAYGW_FAKE_PORT"},
	{"127.0.0.1:9090", "PAYGW_ADMIN_PORT"},
}

// commands reads the shell commands of the README's walkthrough: the lines of its ```sh blocks,
// continuation lines joined, comments dropped.
func commands(t *testing.T, readme string) []string {
	t.Helper()
	start := strings.Index(readme, section)
	if start < 0 {
		t.Fatalf("README.md has no %q section", section)
	}
	body := readme[start+len(section):]
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end]
	}
	var cmds []string
	in, cur := false, ""
	for _, line := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case !in:
		case cur == "" && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")):
		case strings.HasSuffix(line, `\`):
			cur += strings.TrimSuffix(line, `\`)
		default:
			cmds = append(cmds, cur+line)
			cur = ""
		}
	}
	if len(cmds) < 10 {
		t.Fatalf("the walkthrough has %d commands; the parser missed its ```sh blocks", len(cmds))
	}
	return cmds
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// portOf is the port of a host:port address in a DSN or an address.
func portOf(t *testing.T, s string) string {
	t.Helper()
	m := regexp.MustCompile(`:(\d+)\)?/?$`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no port in %q", s)
	}
	return m[1]
}

// demo lays out dir as a checkout (scripts/, bin/paygw) and starts scripts/demo.sh there on
// free ports and a database of its own. It returns the demo's process and its environment.
// extra is more of the demo's environment.
func demo(t *testing.T, repo, dir string, extra map[string]string) (*exec.Cmd, <-chan error, *bytes.Buffer, map[string]string) {
	t.Helper()
	if err := os.Symlink(filepath.Join(repo, "scripts"), filepath.Join(dir, "scripts")); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "paygw"), "./cmd/paygw")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	db := "walkthrough_" + testenv.Random(8)
	testenv.Exec(t, testenv.ServerDSN(), "CREATE DATABASE "+db) // as scripts/services.sh makes `paygw`
	t.Cleanup(func() { testenv.Exec(t, testenv.ServerDSN(), "DROP DATABASE IF EXISTS "+db) })
	env := map[string]string{
		"MYSQL_PORT":    portOf(t, testenv.ServerDSN()),
		"REDIS_PORT":    portOf(t, testenv.RedisAddr()),
		"PAYGW_DEMO_DB": db,
	}
	for _, p := range ports {
		env[p.env] = freePort(t)
	}
	env["PAYGW_URL"] = "http://127.0.0.1:" + env["PAYGW_HTTP_PORT"] // scripts/alipay-notify.sh
	maps.Copy(env, extra)
	cmd := exec.Command("bash", "scripts/demo.sh")
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ready := "http://127.0.0.1:" + env["PAYGW_HTTP_PORT"] + "/readyz"
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if r, err := http.Get(ready); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("scripts/demo.sh exited (%v) before it served:\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not answer %s in 90 s:\n%s", ready, out)
		}
	}
	return cmd, exited, out, env
}

var tradeNo = regexp.MustCompile(`"trade_no":"(P[0-9a-f]+)"`)

// TestWalkthrough runs every command of README.md's walkthrough against scripts/demo.sh, then
// checks what the walkthrough says happened: every order it created is PAID, with the source it
// names, and SIGTERM stops the demo with exit 0 and the fake channel gone.
func TestWalkthrough(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds := commands(t, string(readme))
	dir := t.TempDir()
	proc, exited, log, env := demo(t, repo, dir, nil)

	shellEnv := append(os.Environ(), "PATH="+failingCurl(t, dir)+":"+os.Getenv("PATH"))
	for k, v := range env {
		shellEnv = append(shellEnv, k+"="+v)
	}
	var trades []string
	outputs := map[string]string{}
	for _, c := range cmds {
		for _, p := range ports {
			c = strings.ReplaceAll(c, p.host, strings.Split(p.host, ":")[0]+":"+env[p.env])
		}
		if len(trades) > 0 {
			c = strings.ReplaceAll(c, "<trade_no>", trades[len(trades)-1])
		}
		if name, _, ok := strings.Cut(c, "="); ok && regexp.MustCompile(`^[A-Z_]+$`).MatchString(name) {
			// An assignment: its value is the environment of every later command.
			sh := exec.Command("bash", "-c", c+`; printf %s "$`+name+`"`)
			sh.Dir, sh.Env = dir, shellEnv
			out, err := sh.Output()
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			shellEnv = append(shellEnv, name+"="+string(out))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		sh := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-c", c)
		sh.Dir, sh.Env = dir, shellEnv
		out, err := sh.CombinedOutput()
		cancel()
		t.Logf("$ %s\n%s", c, out)
		if err != nil {
			t.Fatalf("%s: %v\n%s\ndemo log:\n%s", c, err, out, log)
		}
		if m := tradeNo.FindSubmatch(out); m != nil && strings.Contains(c, "/v1/orders") {
			trades = append(trades, string(m[1]))
		}
		outputs[c] = string(out)
	}

	checkOutputs(t, outputs)
	checkPaid(t, env, dir, trades, []payment.Source{payment.SourceNotify, payment.SourceNotify, payment.SourceQuery, payment.SourceBill})

	if err := syscall.Kill(proc.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("scripts/demo.sh after SIGTERM: %v (want exit 0)\n%s", err, log)
	}
	if strings.Contains(log.String(), "unbound variable") {
		t.Fatalf("scripts/demo.sh's shutdown:\n%s", log)
	}
	if c, err := net.Dial("tcp", "127.0.0.1:"+env["PAYGW_FAKE_PORT"]); err == nil {
		c.Close()
		t.Fatal("the fake channel still listens after the demo stopped")
	}
}

// failingCurl makes a directory whose curl is the real one with --fail-with-body, so that a 4xx
// or 5xx answer fails its command (a plain curl exits 0 on them).
func failingCurl(t *testing.T, dir string) string {
	t.Helper()
	real, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("the walkthrough needs curl: %v", err)
	}
	bin := filepath.Join(dir, "testbin")
	script := "#!/bin/sh\nexec " + real + " --fail-with-body \"$@\"\n"
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "curl"), []byte(script), 0o755); err != nil { // #nosec G306 -- a test's own script
		t.Fatal(err)
	}
	return bin
}

// checkOutputs checks what the walkthrough's comments promise of single commands.
func checkOutputs(t *testing.T, outputs map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for c, out := range outputs {
		switch {
		case strings.HasPrefix(c, "scripts/alipay-notify.sh"):
			seen["notify"] = true
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if lines[len(lines)-1] != "success" {
				t.Errorf("%s answered %q, want success at the end", c, out)
			}
		case strings.Contains(c, "reconcile bill"):
			seen["bill"] = true
			if !regexp.MustCompile(`CHANNEL_ONLY\s+1\b`).MatchString(out) {
				t.Errorf("%s: want CHANNEL_ONLY 1, got\n%s", c, out)
			}
		case strings.Contains(c, "/metrics"):
			seen["metrics"] = true
			if !strings.Contains(out, `paygw_notifications_total{`) {
				t.Errorf("%s: no paygw_notifications_total series:\n%s", c, out)
			}
		}
	}
	for _, k := range []string{"notify", "bill", "metrics"} {
		if !seen[k] {
			t.Errorf("the walkthrough lost its %s step", k)
		}
	}
}

// checkPaid asks the gateway about every order the walkthrough created: each must be PAID, with
// nothing refunded, and its payment must come from the source the walkthrough names.
func checkPaid(t *testing.T, env map[string]string, dir string, trades []string, sources []payment.Source) {
	t.Helper()
	if len(trades) != len(sources) {
		t.Fatalf("the walkthrough created %d orders %v, want %d", len(trades), trades, len(sources))
	}
	token, err := os.ReadFile(filepath.Join(dir, ".demo", "api_token"))
	if err != nil {
		t.Fatal(err)
	}
	for i, trade := range trades {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+env["PAYGW_HTTP_PORT"]+"/v1/payments/"+trade, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Order struct {
				Status      string `json:"status"`
				RefundedFen int64  `json:"refunded_fen"`
			} `json:"order"`
			Explanation struct {
				Facts []struct {
					Source string `json:"source"`
				} `json:"facts"`
			} `json:"explanation"`
		}
		err = json.NewDecoder(res.Body).Decode(&v)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var srcs []string
		for _, f := range v.Explanation.Facts {
			srcs = append(srcs, f.Source)
		}
		if v.Order.Status != "PAID" || v.Order.RefundedFen != 0 || !slices.Contains(srcs, string(sources[i])) {
			t.Errorf("order %d (%s): status %s, refunded %d, facts from %v; want PAID, 0, a fact from %q",
				i+1, trade, v.Order.Status, v.Order.RefundedFen, srcs, sources[i])
		}
	}
}
