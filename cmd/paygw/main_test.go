package main

// These tests build the real binary once and drive it as an operator would: a config file,
// `paygw serve` on a loopback port, SIGINT, `paygw migrate` and `paygw sweep`, against the real
// MariaDB and Redis of internal/testenv.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/simulate"
	migrations "github.com/paygw/paygw/sql"
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
	fmt.Fprintf(&b, "mysql:\n  dsn: %q\n", s.dsn)
	fmt.Fprintf(&b, "redis:\n  addr: %q\n", s.redisAddr)
	if s.redisPassword != "" {
		fmt.Fprintf(&b, "  password: %q\n", s.redisPassword)
	}
	if s.token != "" {
		fmt.Fprintf(&b, "auth:\n  api_tokens:\n    - name: order-service\n      token: %q\n", s.token)
	}
	b.WriteString(s.extra)
	path := filepath.Join(t.TempDir(), "paygw.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
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

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is one running `paygw serve`.
type server struct {
	t      *testing.T
	cmd    *exec.Cmd
	out    *lockedBuffer // stdout and stderr together
	done   chan struct{} // closed when the process has exited
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
		out:  &lockedBuffer{},
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

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.done:
			t.Fatalf("paygw serve exited with %d before answering /healthz:\n%s", s.cmd.ProcessState.ExitCode(), s.out)
		default:
		}
		res, err := s.client.Get(s.url + "/healthz")
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("paygw serve: /healthz not 200 within 10s (last error %v):\n%s", err, s.out)
		}
		time.Sleep(50 * time.Millisecond)
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
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return response{code: res.StatusCode, body: string(b), header: res.Header}
}

func TestRestartReplaysOriginalResult(t *testing.T) {
	const orderBody = `{"user_id":123,"sku":"A-100","num":1}`
	key := map[string]string{"Idempotency-Key": "restart-1"}

	tests := map[string]struct {
		secondRedis string // redis.addr of the server after the restart
	}{
		"redis up":                 {secondRedis: testenv.RedisAddr()},
		"redis down after restart": {secondRedis: "127.0.0.1:1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dsn := testenv.NewDatabase(t)
			token := newToken(t)
			addr := freeAddr(t)
			first := writeConfig(t, settings{addr: addr, dsn: dsn, token: token})
			second := writeConfig(t, settings{addr: addr, dsn: dsn, token: token, redisAddr: tc.secondRedis})

			s1 := startServer(t, first, addr)
			if r := s1.do("PUT", "/v1/stock/A-100", token, nil, `{"num":100,"price_fen":1999}`); r.code != http.StatusOK {
				t.Fatalf("PUT /v1/stock/A-100: %d %s", r.code, r.body)
			}
			orig := s1.do("POST", "/v1/orders", token, key, orderBody)
			if orig.code != http.StatusCreated {
				t.Fatalf("first POST /v1/orders: %d %s", orig.code, orig.body)
			}
			if v := orig.header.Get("Idempotent-Replayed"); v != "" {
				t.Fatalf("first POST /v1/orders: Idempotent-Replayed: %q on a fresh result", v)
			}
			if !strings.Contains(orig.body, `"trade_no":"`) {
				t.Fatalf("first POST /v1/orders: no trade_no in %s", orig.body)
			}
			s1.stop()

			s2 := startServer(t, second, addr)
			again := s2.do("POST", "/v1/orders", token, key, orderBody)
			if again.code != orig.code {
				t.Errorf("replay after restart: status %d, want %d (body %s)", again.code, orig.code, again.body)
			}
			if again.body != orig.body {
				t.Errorf("replay after restart: body differs\n got: %s\nwant: %s", again.body, orig.body)
			}
			if v := again.header.Get("Idempotent-Replayed"); v != "true" {
				t.Errorf("replay after restart: Idempotent-Replayed: %q, want \"true\"", v)
			}
			if got, want := again.header.Get("Content-Type"), orig.header.Get("Content-Type"); got != want {
				t.Errorf("replay after restart: Content-Type %q, want %q", got, want)
			}
			s2.stop()

			if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record WHERE biz_type = 'order_create'`); n != 1 {
				t.Errorf("idempotent_record rows for order_create: %d, want 1", n)
			}
			if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM idempotent_record
				WHERE biz_type = 'order_create' AND scope = 'order-service' AND idem_key = 'restart-1' AND status = 1`); n != 1 {
				t.Errorf("successful record for (order-service, restart-1): %d, want 1", n)
			}
			if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders`); n != 1 {
				t.Errorf("orders rows: %d, want 1", n)
			}
			if n := testenv.Count(t, dsn, `SELECT num FROM stock WHERE sku = ?`, "A-100"); n != 99 {
				t.Errorf("stock of A-100: %d, want 99", n)
			}
			for i, out := range []string{s1.out.String(), s2.out.String()} {
				if strings.Contains(out, token) {
					t.Errorf("server %d logged the API token:\n%s", i+1, out)
				}
			}
		})
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	t.Run("unknown key", func(t *testing.T) {
		// A typo beside http.addr: refused rather than silently ignored.
		path := filepath.Join(t.TempDir(), "paygw.yaml")
		body := fmt.Sprintf("http:\n  addr: %q\n  adress: \"127.0.0.1:9\"\nmysql:\n  dsn: \"root@tcp(127.0.0.1:1)/paygw\"\n", freeAddr(t))
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r := runPaygw(t, nil, "serve", "--config", path)
		if r.code == 0 {
			t.Fatalf("exit code 0, want non-zero; stderr:\n%s", r.stderr)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("took %s to refuse the config, want well under 5s", d)
		}
		msg := strings.TrimRight(r.stderr, "\n")
		if !strings.HasPrefix(msg, "paygw:") || !strings.Contains(msg, "adress") {
			t.Errorf("stderr %q: want a line starting with \"paygw:\" naming the key \"adress\"", r.stderr)
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("stderr is %d lines, want one:\n%s", strings.Count(msg, "\n")+1, r.stderr)
		}
	})

	t.Run("mysql unreachable", func(t *testing.T) {
		path := writeConfig(t, settings{addr: freeAddr(t), dsn: "root@tcp(127.0.0.1:1)/paygw"})
		start := time.Now()
		r := runPaygw(t, nil, "serve", "--config", path)
		if r.code == 0 {
			t.Fatalf("exit code 0, want non-zero; stderr:\n%s", r.stderr)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %s to give up on MySQL, want under 10s", d)
		}
		// The start-up log line comes first; the reason is the one "paygw:" line, at the end.
		lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
		var reasons []string
		for _, l := range lines {
			if strings.HasPrefix(l, "paygw:") {
				reasons = append(reasons, l)
			}
		}
		if len(reasons) != 1 || lines[len(lines)-1] != reasons[0] {
			t.Fatalf("want exactly one \"paygw:\" line, last; stderr:\n%s", r.stderr)
		}
		if !strings.Contains(strings.ToLower(reasons[0]), "mysql") {
			t.Errorf("reason %q does not mention mysql", reasons[0])
		}
	})
}

// statusLines returns the migration lines of `migrate` / `migrate status` output.
func statusLines(t *testing.T, out string) []string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestMigrateStatusAndSweep(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn})

	for i := 1; i <= 2; i++ { // the second run has nothing to do and must still succeed
		r := runPaygw(t, nil, "migrate", "--config", path)
		if r.code != 0 {
			t.Fatalf("migrate run %d: exit %d\nstdout:\n%s\nstderr:\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
	r := runPaygw(t, nil, "migrate", "status", "--config", path)
	if r.code != 0 {
		t.Fatalf("migrate status: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	lines := statusLines(t, r.stdout)
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) < 4 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	if len(lines) != len(files) {
		t.Fatalf("migrate status: %d lines, want %d:\n%s", len(lines), len(files), r.stdout)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("%05d ", i+1)) || !strings.Contains(l, " applied ") {
			t.Errorf("migrate status line %d: %q, want migration %05d applied", i+1, l, i+1)
		}
	}
	for _, table := range []string{"idempotent_record", "orders", "stock"} {
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, table); n != 1 {
			t.Errorf("table %s: not created by migrate", table)
		}
	}

	sweep := func(env ...string) string {
		t.Helper()
		r := runPaygw(t, env, "sweep", "--config", path)
		if r.code != 0 {
			t.Fatalf("sweep: exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		return r.stdout
	}
	if out := sweep(); !strings.HasPrefix(out, "swept 0 ") {
		t.Fatalf("sweep on an empty table: %q, want \"swept 0 ...\"", out)
	}

	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// One record stuck for an hour, one that is processing right now; the times are the
	// database's own, as the sweeper's are.
	const insert = `INSERT INTO idempotent_record (idem_key, biz_type, scope, request_hash, status, update_time)
		VALUES (?, 'order_create', 'order-service', ?, 0, NOW(3) - INTERVAL ? SECOND)`
	hash := strings.Repeat("a", 64)
	if _, err := db.Exec(insert, "stale-1", hash, 3600); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(insert, "fresh-1", hash, 0); err != nil {
		t.Fatal(err)
	}

	if out := sweep("PAYGW_IDEMPOTENCY__DB_TIMEOUT_CLEAN_SECONDS=60"); !strings.HasPrefix(out, "swept 1 ") {
		t.Fatalf("sweep with a 60s timeout: %q, want \"swept 1 ...\"", out)
	}
	if n := testenv.Count(t, dsn, `SELECT status FROM idempotent_record WHERE idem_key = 'stale-1'`); n != 2 {
		t.Errorf("stale record status %d after the sweep, want 2 (failed)", n)
	}
	if n := testenv.Count(t, dsn, `SELECT status FROM idempotent_record WHERE idem_key = 'fresh-1'`); n != 0 {
		t.Errorf("fresh record status %d after the sweep, want 0 (still processing)", n)
	}
}

func TestVersionAndHelp(t *testing.T) {
	if r := runPaygw(t, nil, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "paygw ") {
		t.Errorf("paygw version: exit %d, stdout %q; want 0 and \"paygw <version>\"", r.code, r.stdout)
	}
	r := runPaygw(t, nil, "serve", "--help")
	if r.code != 0 {
		t.Errorf("paygw serve --help: exit %d, want 0", r.code)
	}
	// The flag package prints "-config"; --config is the same flag.
	if out := r.stdout + r.stderr; !strings.Contains(out, "-config") {
		t.Errorf("paygw serve --help does not mention --config:\n%s", out)
	}
	if r := runPaygw(t, nil, "bogus"); r.code == 0 {
		t.Errorf("paygw bogus: exit 0, want non-zero")
	} else if !strings.Contains(r.stderr, `unknown command "bogus"`) {
		t.Errorf("paygw bogus: stderr does not name the command:\n%s", r.stderr)
	}
	if r := runPaygw(t, nil); r.code == 0 {
		t.Errorf("paygw with no command: exit 0, want non-zero")
	}
}

func TestSecretsNotLogged(t *testing.T) {
	t.Run("serving", func(t *testing.T) {
		dsn := testenv.NewDatabase(t)
		token, redisPassword := newToken(t), testenv.Secret(t, "redis-pw-"+testenv.Random(12))
		addr := freeAddr(t)
		// Redis "down" so that the password is never needed, only configured.
		path := writeConfig(t, settings{addr: addr, dsn: dsn, token: token, redisAddr: "127.0.0.1:1", redisPassword: redisPassword})
		s := startServer(t, path, addr)
		if r := s.do("PUT", "/v1/stock/S-1", token, nil, `{"num":1,"price_fen":1}`); r.code != http.StatusOK {
			t.Fatalf("PUT /v1/stock/S-1: %d %s", r.code, r.body)
		}
		// A refused request is logged; the token sent with it must not be.
		if r := s.do("POST", "/v1/orders", token+"x", map[string]string{"Idempotency-Key": "secret-1"}, `{}`); r.code != http.StatusUnauthorized {
			t.Fatalf("POST /v1/orders with a wrong token: %d %s", r.code, r.body)
		}
		s.stop()
		out := s.out.String()
		for what, secret := range map[string]string{"API token": token, "redis password": redisPassword} {
			if strings.Contains(out, secret) {
				t.Errorf("the %s appears in the server's output:\n%s", what, out)
			}
		}
		if !strings.Contains(out, "order-service") {
			t.Errorf("the masked config (client name order-service) is not logged:\n%s", out)
		}
	})

	t.Run("failing start", func(t *testing.T) {
		// The DSN's password reaches the start-up log and the error line of a failed start.
		password := testenv.Secret(t, "mysql-pw-"+testenv.Random(12))
		path := writeConfig(t, settings{addr: freeAddr(t), dsn: "paygw:" + password + "@tcp(127.0.0.1:1)/paygw", token: newToken(t)})
		r := runPaygw(t, nil, "serve", "--config", path)
		if r.code == 0 {
			t.Fatalf("exit 0 with MySQL unreachable")
		}
		if out := r.stdout + r.stderr; strings.Contains(out, password) {
			t.Errorf("the MySQL password appears in the output:\n%s", out)
		}
		if !strings.Contains(r.stderr, "order-service") {
			t.Errorf("the masked config is not logged before the failure:\n%s", r.stderr)
		}
	})
}

// `paygw markers flush` starts a new epoch in the database, which every replica binds within
// identity.Interval; before the migrations it says what to run.
func TestMarkersFlush(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn})
	if r := runPaygw(t, nil, "markers", "flush", "--config", path); r.code == 0 || !strings.Contains(r.stderr, "paygw migrate") {
		t.Fatalf("flush before migrate: exit %d, stderr %q; want a failure naming `paygw migrate`", r.code, r.stderr)
	}
	if r := runPaygw(t, nil, "migrate", "--config", path); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	instance := func() (string, int) {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var id string
		var epoch int
		if err := db.QueryRow(`SELECT instance_id, epoch FROM db_identity`).Scan(&id, &epoch); err != nil {
			t.Fatal(err)
		}
		return id, epoch
	}
	id, epoch := instance()
	if len(id) != 32 || epoch != 1 {
		t.Fatalf("after migrate: instance %q epoch %d, want 32 hex digits and epoch 1", id, epoch)
	}
	r := runPaygw(t, nil, "markers", "flush", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "epoch is now 2") {
		t.Fatalf("markers flush: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if id2, epoch2 := instance(); id2 != id || epoch2 != 2 {
		t.Fatalf("after flush: instance %q epoch %d, want %q and 2", id2, epoch2, id)
	}
	if r := runPaygw(t, nil, "markers", "--config", path); r.code == 0 {
		t.Fatal("`paygw markers` without flush succeeded")
	}
	other := testenv.EmptyDatabase(t)
	if r := runPaygw(t, nil, "migrate", "--config", writeConfig(t, settings{dsn: other})); r.code != 0 {
		t.Fatalf("migrate another database: exit %d\n%s", r.code, r.stderr)
	}
	if n := testenv.Count(t, other, `SELECT COUNT(*) FROM db_identity WHERE instance_id = ?`, id); n != 0 {
		t.Fatal("two databases migrated with the same instance id")
	}
}

// A configuration with UnionPay's real test certificates (SHA-1 signed, as UnionPay's whole PKI
// is) starts, and serve says at start which chain it trusts.
func TestServeStartsWithUnionPayTestCertificates(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	addr := freeAddr(t)
	certs, err := filepath.Abs("../../channels/unionpay/testdata/vectors")
	if err != nil {
		t.Fatal(err)
	}
	path := writeConfig(t, settings{addr: addr, dsn: dsn, extra: fmt.Sprintf(`channels:
  unionpay:
    enabled: true
    mer_id: "777290058110048"
    root_cert_file: %q
    intermediate_cert_file: %q
    signer_name: "00040000:SIGN"
`, filepath.Join(certs, "acp_test_root.cer.pem"), filepath.Join(certs, "acp_test_middle.cer.pem"))})
	if r := runPaygw(t, nil, "migrate", "--config", path); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	s := startServer(t, path, addr)
	s.stop()
	out := s.out.String()
	for _, want := range []string{`"cn":"CFCA TEST CS CA"`, `"cn":"CFCA TEST OCA1"`, `"signature_algorithm":"SHA1-RSA"`, `"not_after":`} {
		if !strings.Contains(out, want) {
			t.Errorf("serve's start-up log has no %s:\n%s", want, out)
		}
	}
}

// `paygw why` prints what GET /v1/payments explains, on a terminal.
func TestWhy(t *testing.T) {
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn})
	if r := runPaygw(t, nil, "migrate", "--config", path); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PWHY1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', NOW(3), NOW(3))`)
	r := runPaygw(t, nil, "why", "PWHY1", "--config", path)
	if r.code != 0 || !strings.Contains(r.stdout, "PWHY1 WAIT_PAY") || !strings.Contains(r.stdout, "Not paid: no notification has come") ||
		!strings.Contains(r.stdout, "order created for 19.99 CNY") {
		t.Fatalf("why: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runPaygw(t, nil, "why", "PNOSUCH", "--config", path); r.code == 0 || !strings.Contains(r.stderr, "no order PNOSUCH") {
		t.Fatalf("why of an unknown order: exit %d, stderr %q", r.code, r.stderr)
	}
}

// `paygw reconcile query` against the fake channel: one line per order asked, a summary, exit 0
// whatever it found; --dry-run changes nothing; a channel that cannot be asked is an error.
func TestReconcileQueryCommand(t *testing.T) {
	dir, man := sandboxKeys(t)
	fake, err := simulate.NewFake(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	fakeSrv := httptest.NewServer(fake.Handler())
	defer fakeSrv.Close()
	channelsYAML, err := os.ReadFile(man.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	extra := strings.ReplaceAll(string(channelsYAML), "http://"+simulate.FakeAddr, fakeSrv.URL)
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn, extra: extra})
	if r := runPaygw(t, nil, "migrate", "--config", path); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PRECON1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', NOW(3), NOW(3))`)
	testenv.Exec(t, dsn, `INSERT INTO payment_attempt (trade_no, channel, created_time, next_query_at) VALUES ('PRECON1', 'alipay', NOW(3), NOW(3))`)
	if _, err := fake.Add(t.Context(), simulate.FakeTrade{Channel: "alipay", TradeNo: "PRECON1", AmountFen: 1999, Status: simulate.FakePaid, DropNotify: true}); err != nil {
		t.Fatal(err)
	}

	dry := runPaygw(t, nil, "reconcile", "query", "--config", path, "--older-than", "0s", "--channel", "alipay", "--dry-run")
	if dry.code != 0 || !strings.Contains(dry.stdout, "PRECON1 alipay PAID: dry run") || !strings.Contains(dry.stdout, "asked 1: paid 1") {
		t.Fatalf("dry run: exit %d\nstdout:\n%s\nstderr:\n%s", dry.code, dry.stdout, dry.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE status = 'PAID'`); n != 0 {
		t.Fatal("the dry run changed the order")
	}
	r := runPaygw(t, nil, "reconcile", "query", "--config", path, "--older-than", "0s")
	if r.code != 0 || !strings.Contains(r.stdout, "PRECON1 alipay PAID: applied: [APPLIED]") || !strings.Contains(r.stdout, "asked 1: paid 1") {
		t.Fatalf("reconcile query: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM notify_journal WHERE trade_no = 'PRECON1' AND source = 'query'`); n != 1 {
		t.Fatalf("journal rows from the query = %d, want 1", n)
	}
	// Nothing left to ask: still exit 0, and the summary says so.
	if again := runPaygw(t, nil, "reconcile", "query", "--config", path, "--older-than", "0s"); again.code != 0 || !strings.Contains(again.stdout, "asked 0") {
		t.Fatalf("second run: exit %d\n%s\n%s", again.code, again.stdout, again.stderr)
	}
	if bad := runPaygw(t, nil, "reconcile", "query", "--config", path, "--channel", "paypal"); bad.code == 0 || !strings.Contains(bad.stderr, "paypal") {
		t.Fatalf("unknown channel: exit %d, stderr %q", bad.code, bad.stderr)
	}
	for _, out := range []string{dry.stdout + dry.stderr, r.stdout + r.stderr} {
		for _, s := range []string{man.Stripe.APIKey, man.UnionPay.MerchantSignCertPassword} {
			if strings.Contains(out, s) {
				t.Fatal("reconcile query printed a merchant secret")
			}
		}
	}
}

// wechatBill writes a WeChat trade bill in its real format: backtick-prefixed fields, then the
// summary header and line (rows states the summary's 总交易单数).
func wechatBill(t *testing.T, rows int, lines ...string) string {
	t.Helper()
	header := "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"
	body := header + "\r\n" + strings.Join(lines, "\r\n") + "\r\n" +
		"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\r\n" +
		fmt.Sprintf("`%d,`19.99,`0.00,`0.00,`0.00000,`19.99,`0.00\r\n", rows)
	path := filepath.Join(t.TempDir(), "wechat_bill.txt")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// `paygw reconcile bill --file` with a real WeChat bill: a payment whose notification was lost
// is repaired (exit 0); a bill whose summary disagrees with its lines is untrusted (exit 4, in
// the report); a bill that is not one stops with one line naming the file (exit 1).
func TestReconcileBillCommand(t *testing.T) {
	_, man := sandboxKeys(t)
	channelsYAML, err := os.ReadFile(man.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	dsn := testenv.EmptyDatabase(t)
	path := writeConfig(t, settings{dsn: dsn, extra: string(channelsYAML)})
	if r := runPaygw(t, nil, "migrate", "--config", path); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s", r.code, r.stderr)
	}
	testenv.Exec(t, dsn, `INSERT INTO orders (trade_no, user_id, sku, num, amount_fen, currency, status, create_time, update_time)
		VALUES ('PBILL1', 1, 'S', 1, 1999, 'CNY', 'WAIT_PAY', '2026-11-30 01:00:00', '2026-11-30 01:00:00')`)
	line := "`2026-11-30 17:07:11,`wx0000000000000000,`1900000001,`0,`,`4200000925202611304997714292,`PBILL1,`openid,`NATIVE,`SUCCESS,`OTHERS,`CNY,`19.99,`0.00,`0,`0,`0.00,`0.00,`,`,`goods,`,`0.00000,`0.60%,`19.99,`0.00,`"
	report := filepath.Join(t.TempDir(), "report.json")

	r := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30",
		"--file", wechatBill(t, 1, line), "--report", report)
	if r.code != 0 || !strings.Contains(r.stdout, "CHANNEL_ONLY") {
		t.Fatalf("repairing bill: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE trade_no = 'PBILL1' AND status = 'PAID' AND channel = 'wechatpay'`); n != 1 {
		t.Fatal("the bill did not repair the order")
	}
	var rep struct {
		Channel  string         `json:"channel"`
		BillDate string         `json:"bill_date"`
		Lines    int            `json:"lines"`
		Counts   map[string]int `json:"counts"`
		Rows     []struct {
			Class, Repair string
			TradeNo       string `json:"trade_no"`
		} `json:"discrepancies"`
	}
	raw, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(raw, &rep) != nil || rep.Channel != "wechatpay" || rep.BillDate != "2026-11-30" || rep.Lines != 1 ||
		len(rep.Rows) != 1 || rep.Rows[0].Repair != "APPLIED" || rep.Rows[0].TradeNo != "PBILL1" {
		t.Fatalf("report %s (%v)", raw, err)
	}

	// The same day again, its summary claiming two rows: the payment now matches, the summary does
	// not, so the bill is untrusted (exit 4) and says why.
	again := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30",
		"--file", wechatBill(t, 2, line), "--report", report)
	if again.code != 4 || !strings.Contains(again.stdout, "SUMMARY_MISMATCH") || !strings.Contains(again.stdout, "MATCHED") ||
		!strings.Contains(again.stdout, "untrusted, nothing repaired: the summary disagrees") {
		t.Fatalf("summary mismatch: exit %d\nstdout:\n%s\nstderr:\n%s", again.code, again.stdout, again.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM recon_run WHERE status = 'complete'`); n != 2 {
		t.Fatalf("complete runs = %d, want 2: a re-run is a run of its own", n)
	}

	notABill := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notABill, []byte("just some text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := runPaygw(t, nil, "reconcile", "bill", "--config", path, "--channel", "wechatpay", "--date", "2026-11-30", "--file", notABill)
	if bad.code != 1 || !strings.Contains(bad.stderr, notABill) || strings.Count(strings.TrimSpace(bad.stderr), "\n") != 0 {
		t.Fatalf("not a bill: exit %d, stderr %q; want exit 1 and one line naming the file", bad.code, bad.stderr)
	}
}
