package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
)

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
		path := tempFile(t, "paygw.yaml",
			fmt.Sprintf("http:\n  addr: %q\n  adress: \"127.0.0.1:9\"\nmysql:\n  dsn: \"root@tcp(127.0.0.1:1)/paygw\"\n", freeAddr(t)))
		r := serveFails(t, path, 5*time.Second, "refuse the config")
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
		r := serveFails(t, path, 10*time.Second, "give up on MySQL")
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

// serveFails runs `paygw serve` with the config at path; it must exit non-zero, having taken no
// longer than limit to do what.
func serveFails(t *testing.T, path string, limit time.Duration, what string) result {
	t.Helper()
	start := time.Now()
	r := runPaygw(t, nil, "serve", "--config", path)
	if r.code == 0 {
		t.Fatalf("exit code 0, want non-zero; stderr:\n%s", r.stderr)
	}
	if d := time.Since(start); d > limit {
		t.Errorf("took %s to %s, want under %s", d, what, limit)
	}
	return r
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
	migrate(t, path)
	s := startServer(t, path, addr)
	s.stop()
	out := s.out.String()
	for _, want := range []string{`"cn":"CFCA TEST CS CA"`, `"cn":"CFCA TEST OCA1"`, `"signature_algorithm":"SHA1-RSA"`, `"not_after":`} {
		if !strings.Contains(out, want) {
			t.Errorf("serve's start-up log has no %s:\n%s", want, out)
		}
	}
}
