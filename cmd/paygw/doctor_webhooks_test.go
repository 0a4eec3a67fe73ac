package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
)

// TestDoctorWebhooks: each endpoint gets a line: ok when its secrets are well formed and it
// answers; WARN for plain http to a host that is not this machine; FAIL when it does not answer.
// A malformed secret fails the config without showing the secret.
func TestDoctorWebhooks(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, b, c := testenv.WebhookSecret(t), testenv.WebhookSecret(t), testenv.WebhookSecret(t)
	extra := fmt.Sprintf(`webhooks:
  endpoints:
    - {name: fulfil, url: "http://%s/webhooks", secret: %s, events: [order.paid]}
    - {name: remote, url: "http://paygw-doctor.invalid/hooks", secrets: [%s, %s]}
    - {name: down, url: "https://127.0.0.1:1/hooks", secret: %s}
`, l.Addr(), a, b, c, a)
	path := writeConfig(t, settings{addr: freeAddr(t), dsn: dsn, token: newToken(t), extra: extra})
	r := runPaygw(t, nil, "doctor", "--config", path, "--no-probe")
	for _, want := range []string{
		"ok   webhook fulfil: http://" + l.Addr().String() + " reachable, 1 secret(s) well formed, order.paid",
		"WARN webhook remote: plain http to paygw-doctor.invalid, which is not this machine",
		"FAIL webhook remote: paygw-doctor.invalid is not reachable",
		"FAIL webhook down: 127.0.0.1:1 is not reachable",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "WARN webhook fulfil") || strings.Contains(r.stdout, "WARN webhook down") {
		t.Errorf("a loopback endpoint was warned about:\n%s", r.stdout)
	}
	if r.code != exitFailed {
		t.Errorf("exit %d, want %d", r.code, exitFailed)
	}
	for _, s := range []string{a, b, c} {
		if strings.Contains(r.stdout, s[6:]) {
			t.Error("doctor printed a webhook secret")
		}
	}

	bad := "whsec_" + strings.Repeat("QUJD", 4) // 12 bytes
	path = writeConfig(t, settings{addr: freeAddr(t), dsn: dsn, token: newToken(t),
		extra: "webhooks:\n  endpoints:\n    - {name: short, url: \"http://127.0.0.1:1/\", secret: " + bad + "}\n"})
	r = runPaygw(t, nil, "doctor", "--config", path, "--no-probe")
	if r.code != exitFailed || !strings.Contains(r.stdout, "FAIL config: ") || !strings.Contains(r.stdout, "webhooks.endpoints[0].secret") ||
		strings.Contains(r.stdout+r.stderr, bad[6:]) {
		t.Errorf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
