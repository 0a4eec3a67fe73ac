package main

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/internal/testenv/sandbox"
	"github.com/paygw/paygw/simulate"
)

// sandboxChannels writes fresh sandbox keys and returns the channels: block trusting them, its
// outbound calls sent to a running fake channel.
func sandboxChannels(t *testing.T) (string, simulate.Manifest) {
	t.Helper()
	_, channelsYAML, man := sandboxFake(t)
	return channelsYAML, man
}

// sandboxFake writes fresh sandbox keys, starts a fake channel that knows them and returns it with
// the channels: block trusting the keys, its outbound calls sent to the fake.
func sandboxFake(t *testing.T) (*simulate.Fake, string, simulate.Manifest) {
	t.Helper()
	sb := sandbox.WithFake(t)
	return sb.Fake, string(sb.Config), sb.Manifest
}

// checkLines returns the checklist's lines by status.
func checkLines(out string) (ok, fail, skip []string) {
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "ok   "):
			ok = append(ok, l)
		case strings.HasPrefix(l, "FAIL "):
			fail = append(fail, l)
		case strings.HasPrefix(l, "skip "):
			skip = append(skip, l)
		}
	}
	return ok, fail, skip
}

// A good deployment: every check passes beside a running serve, every channel refuses the
// self-signed probe and answers the query of an order that cannot exist.
func TestDoctorGood(t *testing.T) {
	channelsYAML, man := sandboxChannels(t)
	dsn := testenv.NewDatabase(t)
	addr := freeAddr(t)
	path := writeConfig(t, settings{addr: addr, dsn: dsn, token: newToken(t),
		extra: channelsYAML + "reconcile:\n  query_interval: 0s\n"})
	s := startServer(t, path, addr)
	r := runPaygw(t, nil, "doctor", "--config", path)
	js := runPaygw(t, nil, "doctor", "--config", path, "--json")
	s.stop()
	t.Logf("checklist:\n%s", r.stdout)
	// --json: the same checks, in the same order, in one document.
	var doc doctorJSON
	decodeJSON(t, js, &doc)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if js.code != 0 || !doc.OK || doc.Failed != 0 || len(doc.Checks) != len(lines) {
		t.Fatalf("doctor --json: exit %d, ok %v, failed %d, %d checks for %d lines\n%s", js.code, doc.OK, doc.Failed, len(doc.Checks), len(lines), js.stdout)
	}
	for i, c := range doc.Checks {
		if !strings.HasPrefix(lines[i], fmt.Sprintf("%-4s %s: ", c.Status, c.Name)) || c.Detail == "" {
			t.Errorf("doctor --json check %d = %+v, the text says %q", i, c, lines[i])
		}
	}
	ok, fail, _ := checkLines(r.stdout)
	if r.code != 0 || len(fail) > 0 {
		t.Fatalf("doctor: exit %d, failures %q\nstdout:\n%s\nstderr:\n%s", r.code, fail, r.stdout, r.stderr)
	}
	all := strings.Join(ok, "\n")
	for _, want := range []string{
		"ok   config: ", "ok   secrets auth: ", "ok   mysql: reachable", "ok   mysql migrations: all ",
		"ok   mysql session: isolation READ-COMMITTED, innodb_lock_wait_timeout 5 s", "ok   clock: within ", "ok   redis: ",
		"ok   key channels.alipay.alipay_public_key_file: ", "RSA public key, 2048 bits",
		"ok   key channels.alipay.app_private_key_file: ", "RSA private key, 2048 bits",
		"ok   key channels.wechatpay.platform_public_key_file: ", "ok   key channels.wechatpay.merchant_private_key_file: ",
		"ok   cert channels.unionpay.root_cert_file: ", "ok   cert channels.unionpay.intermediate_cert_file: ",
		"ok   key channels.unionpay.sign_cert_file: ", "ok   cert channels.unionpay.sign_cert_file: ",
		"ok   unionpay chain: root ", "ok   unionpay chain: intermediate ", "expires in ",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no %q in the checklist:\n%s", want, r.stdout)
		}
	}
	for _, ch := range man.Channels() {
		for _, want := range []string{"ok   probe " + ch + ": ", "ok   query " + ch + ": "} {
			if !strings.Contains(all, want) {
				t.Errorf("no %q in the checklist:\n%s", want, r.stdout)
			}
		}
	}
	// The probes were refused: nothing reached the books.
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM notify_journal`) + testenv.Count(t, dsn, `SELECT COUNT(*) FROM anomaly`); n != 0 {
		t.Fatalf("the probes left %d journal or anomaly rows", n)
	}
	if out := r.stdout + r.stderr; strings.Contains(out, man.Stripe.APIKey) || strings.Contains(out, man.UnionPay.MerchantSignCertPassword) {
		t.Fatal("doctor printed a merchant secret")
	}
}

// writeCert writes a self-signed RSA certificate valid over [from, to) as PEM.
func writeCert(t *testing.T, from, to time.Time) string {
	t.Helper()
	key := testenv.NewRSAKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(0x5eed), Subject: pkix.Name{CommonName: "Tenpay.com Root CA"},
		NotBefore: from, NotAfter: to}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tempFile(t, "wechatpay_platform.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
}

// A broken deployment: doctor exits non-zero and the failing check is named on a FAIL line.
func TestDoctorBroken(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	alipayKey := tempFile(t, "alipay_private.pem", string(simulate.PEMPrivateKey(testenv.NewRSAKey(t))))
	now := time.Now()
	wechat := func(certFile string) string {
		return fmt.Sprintf(`channels:
  wechatpay:
    enabled: true
    mch_id: "1900000001"
    app_id: "wx0000000000000000"
    api_v3_key: "0123456789abcdef0123456789abcdef"
    platform_certificate_files: [%q]
`, certFile)
	}
	alipay := func(pub string) string {
		return fmt.Sprintf("channels:\n  alipay:\n    enabled: true\n    app_id: \"2021\"\n    alipay_public_key_file: %q\n", pub)
	}
	tests := map[string]struct {
		s    settings
		args []string
		want []string // substrings of FAIL lines, one each
	}{
		"missing key file": {
			s:    settings{dsn: dsn, extra: alipay(filepath.Join(t.TempDir(), "nowhere.pem"))},
			want: []string{"FAIL key channels.alipay.alipay_public_key_file: ", "FAIL channels: config channels.alipay.alipay_public_key_file"},
		},
		"private key where the public one goes": {
			s:    settings{dsn: dsn, extra: alipay(alipayKey)},
			want: []string{"FAIL key channels.alipay.alipay_public_key_file: " + alipayKey + " is a private key"},
		},
		"expired certificate": {
			s:    settings{dsn: dsn, extra: wechat(writeCert(t, now.AddDate(-2, 0, 0), now.AddDate(0, 0, -3)))},
			want: []string{"FAIL cert channels.wechatpay.platform_certificate_files[0]: ", "expired 3 day(s) ago"},
		},
		"absent certificate": {
			s:    settings{dsn: dsn, extra: wechat(filepath.Join(t.TempDir(), "absent.pem"))},
			want: []string{"FAIL cert channels.wechatpay.platform_certificate_files[0]: ", "no such file"},
		},
		"mysql unreachable": {
			s:    settings{dsn: "root@tcp(127.0.0.1:1)/paygw", extra: wechat(writeCert(t, now.Add(-time.Hour), now.AddDate(1, 0, 0)))},
			want: []string{"FAIL mysql: ", "skip clock: MySQL unreachable"},
		},
		"redis unreachable": {
			s:    settings{dsn: dsn, redisAddr: "127.0.0.1:1", extra: wechat(writeCert(t, now.Add(-time.Hour), now.AddDate(1, 0, 0)))},
			want: []string{"FAIL redis: 127.0.0.1:1"},
		},
		"serve not running": {
			s:    settings{dsn: dsn, extra: wechat(writeCert(t, now.Add(-time.Hour), now.AddDate(1, 0, 0)))},
			args: []string{}, // probes on
			want: []string{"FAIL probe wechatpay: no paygw serve answers at http://", "--no-probe"},
		},
		"no channel and no client": {
			s:    settings{dsn: dsn},
			want: []string{"FAIL secrets auth: auth.api_tokens is empty", "FAIL channels: no channel is enabled"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.s.addr = freeAddr(t)
			if tc.s.token == "" && name != "no channel and no client" {
				tc.s.token = newToken(t)
			}
			path := writeConfig(t, tc.s)
			args := []string{"doctor", "--config", path, "--no-probe"}
			if tc.args != nil {
				args = append([]string{"doctor", "--config", path}, tc.args...)
			}
			start := time.Now()
			r := runPaygw(t, nil, args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("doctor took %s", d)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("no %q in the checklist:\n%s", w, r.stdout)
				}
			}
			if _, fail, _ := checkLines(r.stdout); len(fail) == 0 {
				t.Errorf("no FAIL line:\n%s", r.stdout)
			}
			if !strings.Contains(r.stderr, "a check failed") {
				t.Errorf("stderr %q does not say a check failed", r.stderr)
			}
		})
	}

	t.Run("config refused", func(t *testing.T) {
		path := writeConfig(t, settings{dsn: dsn, extra: "idempotency:\n  retention: 1h\n"})
		r := runPaygw(t, nil, "doctor", "--config", path)
		if r.code != 1 || !strings.HasPrefix(r.stdout, "FAIL config: ") || !strings.Contains(r.stdout, "idempotency.retention") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("config refused, json", func(t *testing.T) {
		path := writeConfig(t, settings{dsn: dsn, extra: "idempotency:\n  retention: 1h\n"})
		r := runPaygw(t, nil, "doctor", "--config", path, "--json")
		var doc doctorJSON
		decodeJSON(t, r, &doc)
		if r.code != 1 || doc.OK || doc.Failed != 1 || len(doc.Checks) != 1 || doc.Checks[0].Status != "FAIL" || doc.Checks[0].Name != "config" ||
			!strings.Contains(doc.Checks[0].Detail, "idempotency.retention") {
			t.Fatalf("exit %d, %+v\nstderr:\n%s", r.code, doc, r.stderr)
		}
	})
}

// doctorJSON is `paygw doctor --json`.
type doctorJSON struct {
	OK     bool `json:"ok"`
	Failed int  `json:"failed"`
	Checks []struct {
		Status string `json:"status"`
		Name   string `json:"name"`
		Detail string `json:"detail"`
	} `json:"checks"`
}
