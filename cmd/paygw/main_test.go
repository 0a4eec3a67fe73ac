package main

// These tests build the real binary once and drive it as an operator would: a config file,
// `paygw serve` on a loopback port, SIGINT, `paygw migrate` and `paygw sweep`, against the real
// MariaDB and Redis of internal/testenv.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
)

// bin is the paygw binary built by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "paygw-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdir:", err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "paygw")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "go build ./cmd/paygw:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// childEnv is the test's environment without any PAYGW_ variable, so that a developer's own
// overrides (PAYGW_CONFIG, PAYGW_MYSQL__DSN) cannot leak into the binary under test.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYGW_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// settings is what a test config file varies.
type settings struct {
	addr          string
	dsn           string
	redisAddr     string
	redisPassword string
	token         string
	logLevel      string // log.level; "" for the default
	extra         string // more YAML, appended as is
}

// writeConfig writes s as a YAML config file in a temporary directory and returns its path.
func writeConfig(t *testing.T, s settings) string {
	t.Helper()
	if s.addr == "" {
		s.addr = "127.0.0.1:8080"
	}
	if s.redisAddr == "" {
		s.redisAddr = testenv.RedisAddr()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "http:\n  addr: %q\n  shutdown_timeout: 5s\n", s.addr)
	fmt.Fprintf(&b, "log:\n  format: json\n")
	if s.logLevel != "" {
		fmt.Fprintf(&b, "  level: %q\n", s.logLevel)
	}
	fmt.Fprintf(&b, "mysql:\n  dsn: %q\n", s.dsn)
	fmt.Fprintf(&b, "redis:\n  addr: %q\n", s.redisAddr)
	if s.redisPassword != "" {
		fmt.Fprintf(&b, "  password: %q\n", s.redisPassword)
	}
	if s.token != "" {
		fmt.Fprintf(&b, "auth:\n  api_tokens:\n    - name: order-service\n      token: %q\n", s.token)
	}
	b.WriteString(s.extra)
	return tempFile(t, "paygw.yaml", b.String())
}

// tempFile writes text to a file of that name in a directory of the test's own; it returns the
// file's path.
func tempFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// migratedConfig writes s as a config file, runs `paygw migrate` on it and returns its path.
func migratedConfig(t *testing.T, s settings) string {
	t.Helper()
	path := writeConfig(t, s)
	migrate(t, path)
	return path
}

// migrate runs `paygw migrate` with the config file at path.
func migrate(t *testing.T, path string) {
	t.Helper()
	if r := runPaygw(t, nil, "migrate", "--config", path); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// newToken is a fresh API token, registered as a secret the run's logs must not show.
func newToken(tb testing.TB) string { return testenv.Secret(tb, "tok-"+testenv.Random(16)) }

// result is one finished command.
type result struct {
	code           int
	stdout, stderr string
}

// runPaygw runs the binary to completion (at most 30 s) with extra environment variables.
func runPaygw(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("paygw %s: still running after 30s\nstderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("paygw %s: %v", strings.Join(args, " "), err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// server is one running `paygw serve`.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    *testenv.LogBuffer // stdout and stderr together
	done   chan struct{}      // closed when the process has exited
	url    string
	client *http.Client
}

// startServer runs `paygw serve --config path` and waits (at most 10 s) for /healthz to answer
// 200. The process is killed at the end of the test if it is still running.
func startServer(t *testing.T, path, addr string) *server {
	t.Helper()
	s := &server{
		t:    t,
		cmd:  exec.Command(bin, "serve", "--config", path),
		out:  &testenv.LogBuffer{},
		done: make(chan struct{}),
		url:  "http://" + addr,
		// No keep-alive: a connection to a stopped server must never carry the next request.
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	s.cmd.Env = childEnv()
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
			return
		default:
		}
		_ = s.cmd.Process.Kill()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Errorf("paygw serve (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	})

	switch err := waitOK(s.client, s.url+"/healthz", s.done, 10*time.Second, 50*time.Millisecond); {
	case errors.Is(err, errExited):
		t.Fatalf("paygw serve exited with %d before answering /healthz:\n%s", s.cmd.ProcessState.ExitCode(), s.out)
	case err != nil:
		t.Fatalf("paygw serve: /healthz %v:\n%s", err, s.out)
	}
	return s
}

// errExited: the process waitOK waited on ended first.
var errExited = errors.New("exited")

// waitOK asks url with client every so often until it answers 200 (nil), the process ends (done
// closes: errExited) or within passes (an error with the last request's own, if it had one).
func waitOK(client *http.Client, url string, done <-chan struct{}, within, every time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		select {
		case <-done:
			return errExited
		default:
		}
		res, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not 200 within %s (last error %v)", within, err)
		}
		time.Sleep(every)
	}
}

// stop sends SIGINT and requires a clean exit (code 0, "stopped" logged) within 15 s.
func (s *server) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		s.t.Fatalf("SIGINT: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		s.t.Fatalf("paygw serve did not exit within 15s of SIGINT:\n%s", s.out)
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Fatalf("paygw serve exited with %d after SIGINT, want 0:\n%s", code, s.out)
	}
	if !strings.Contains(s.out.String(), `"stopped"`) {
		s.t.Fatalf("paygw serve did not log \"stopped\":\n%s", s.out)
	}
}

type response struct {
	code   int
	body   string
	header http.Header
}

func (s *server) do(method, path, token string, header map[string]string, body string) response {
	s.t.Helper()
	r := testenv.Send(s.t, s.client, testenv.APIRequest(s.t, method, s.url+path, token, body, header))
	return response{code: r.Code, body: r.Body, header: r.Header}
}

// execBash runs script with bash.
func execBash(t *testing.T, script string) (string, error) {
	t.Helper()
	out, err := exec.Command("bash", "-c", script).CombinedOutput()
	return string(out), err
}

// decodeJSON decodes r's stdout into v, requiring it to be exactly one JSON document with no
// unknown field.
func decodeJSON(t *testing.T, r result, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(r.stdout))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("stdout is not the JSON document: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	if d.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", r.stdout)
	}
}

// waitFor waits until cond holds (testenv.Until), and shows the server's output, when s is not
// nil, if it does not within d.
func waitFor(t *testing.T, d time.Duration, s *server, what string, cond func() bool) {
	t.Helper()
	if s != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("server output:\n%s", s.out.String())
			}
		})
	}
	testenv.Until(t, d, what, cond)
}
