package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/user"
	"strings"
	"testing"

	"github.com/paygw/paygw/internal/testenv"
)

// rolesConfig is the auth block of a client of each form: a roles-less clear token (admin), a
// token_sha256 for finance, a token_file for the order service, a clear viewer token.
type rolesConfig struct {
	legacy, finance, shop, viewer string
	yaml                          string
}

func newRolesConfig(t *testing.T) rolesConfig {
	file, shop := testenv.TokenFile(t)
	c := rolesConfig{legacy: newToken(t), finance: newToken(t), shop: shop, viewer: newToken(t)}
	digest := sha256.Sum256([]byte(c.finance))
	c.yaml = fmt.Sprintf(`auth:
  api_tokens:
    - {name: legacy, token: %q}
    - {name: fin, token_sha256: %s, roles: [finance]}
    - {name: shop, token_file: %q, roles: [order_service]}
    - {name: look, token: %q, roles: [viewer]}
`, c.legacy, hex.EncodeToString(digest[:]), file, c.viewer)
	return c
}

// TestServeRoles: the real binary with a token of each form. Each works, with its roles; the
// roles-less one is admin and warned about at start; no token reaches the log; the writes, by
// HTTP and by a command, are in the audit trail, which purge leaves alone.
func TestServeRoles(t *testing.T) {
	rc := newRolesConfig(t)
	addr := freeAddr(t)
	dsn := testenv.NewDatabase(t)
	path := migratedConfig(t, settings{addr: addr, dsn: dsn, extra: rc.yaml})
	s := startServer(t, path, addr)

	rid := map[string]string{"X-Request-Id": "rid-serve-stock"}
	if r := s.do("PUT", "/v1/stock/ROLE-1", rc.shop, rid, `{"num":2,"price_fen":300}`); r.code != 200 {
		t.Fatalf("shop (token_file) PUT stock: %d %s", r.code, r.body)
	}
	r := s.do("PUT", "/v1/stock/ROLE-1", rc.viewer, nil, `{"num":9,"price_fen":300}`)
	if r.code != 403 || !strings.Contains(r.body, `"role":"order_service"`) {
		t.Fatalf("viewer PUT stock: %d %s, want 403 naming order_service", r.code, r.body)
	}
	if r := s.do("GET", "/v1/audit", rc.viewer, nil, ""); r.code != 403 || !strings.Contains(r.body, `"role":"finance"`) {
		t.Fatalf("viewer GET audit: %d %s, want 403 naming finance", r.code, r.body)
	}
	if r := s.do("GET", "/v1/audit?actor=legacy", rc.legacy, nil, ""); r.code != 200 {
		t.Fatalf("roles-less token GET audit: %d %s, want 200 (admin)", r.code, r.body)
	}
	entries := auditOf(t, s, rc.finance, "?target=stock:ROLE-1")
	if len(entries) != 1 || entries[0]["actor"] != "shop" || entries[0]["role"] != "order_service" ||
		entries[0]["action"] != "stock.put" || entries[0]["request_id"] != "rid-serve-stock" {
		t.Fatalf("finance (token_sha256) reads the stock audit: %v", entries)
	}

	if r := runPaygw(t, nil, "markers", "flush", "--config", path); r.code != 0 {
		t.Fatalf("markers flush: exit %d\n%s", r.code, r.stderr)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	cli := auditOf(t, s, rc.finance, "?actor=cli:"+u.Username+"&target=epoch")
	if len(cli) != 1 || cli[0]["action"] != "markers.flush" || cli[0]["role"] != "admin" ||
		!strings.HasPrefix(fmt.Sprint(cli[0]["request_id"]), "cli-") || fmt.Sprint(cli[0]["before"]) != "map[epoch:1]" ||
		fmt.Sprint(cli[0]["after"]) != "map[epoch:2]" {
		t.Fatalf("markers flush audit row: %v", cli)
	}
	testenv.Exec(t, dsn, `INSERT INTO audit_log (at, actor, role, action, target, request_id)
		VALUES ('2001-01-01', 'ancient', 'admin', 'test.old', 'old', 'r')`)
	if r := runPaygw(t, nil, "purge", "--config", path); r.code != 0 {
		t.Fatalf("purge: exit %d\n%s", r.code, r.stderr)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM audit_log WHERE actor = 'ancient'`); n != 1 {
		t.Fatalf("purge removed the 2001 audit row: %d left", n)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM audit_log WHERE action = 'retention.purge'`); n != 1 {
		t.Fatalf("purge left %d audit rows of its own, want 1", n)
	}
	s.stop()
	checkServeLog(t, s.out.String(), rc)
}

// checkServeLog: the start-up warning names the roles-less client, an access line names the
// client of each request, and no token appears anywhere.
func checkServeLog(t *testing.T, out string, rc rolesConfig) {
	t.Helper()
	for _, tok := range []string{rc.legacy, rc.finance, rc.shop, rc.viewer} {
		if strings.Contains(out, tok) {
			t.Fatalf("serve's output holds a token:\n%s", out)
		}
	}
	var warned, shopLine bool
	for line := range strings.Lines(out) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m["level"] == "warn" && m["token_name"] == "legacy" && strings.Contains(fmt.Sprint(m["message"]), "admin") {
			warned = true
		}
		if m["message"] == "request" && m["token_name"] == "shop" && m["route"] == "/v1/stock/:sku" &&
			m["status"] == float64(200) && m["request_id"] == "rid-serve-stock" && m["duration_ms"] != nil {
			shopLine = true
		}
	}
	if !warned || !shopLine {
		t.Fatalf("warning about the roles-less token %v, access line of the shop's PUT %v:\n%s", warned, shopLine, out)
	}
}

func auditOf(t *testing.T, s *server, token, query string) []map[string]any {
	t.Helper()
	r := s.do("GET", "/v1/audit"+query, token, nil, "")
	var page struct {
		Entries []map[string]any `json:"entries"`
	}
	if r.code != 200 || json.Unmarshal([]byte(r.body), &page) != nil {
		t.Fatalf("GET /v1/audit%s: %d %s", query, r.code, r.body)
	}
	return page.Entries
}

// TestRolesConfigRefused: an unknown role stops serve at the config load, naming the key; the
// doctor lists each client, how its token is given and its roles, never the token.
func TestRolesConfigRefused(t *testing.T) {
	bad := writeConfig(t, settings{dsn: "root@tcp(127.0.0.1:1)/x", extra: "auth:\n  api_tokens:\n    - {name: x, token: " + newToken(t) + ", roles: [viewer, root]}\n"})
	r := runPaygw(t, nil, "serve", "--config", bad)
	if r.code == 0 || !strings.Contains(r.stderr, "auth.api_tokens[0].roles[1]") || !strings.Contains(r.stderr, `unknown role "root"`) {
		t.Fatalf("serve with an unknown role: exit %d\n%s", r.code, r.stderr)
	}
	rc := newRolesConfig(t)
	path := migratedConfig(t, settings{dsn: testenv.NewDatabase(t), extra: rc.yaml})
	r = runPaygw(t, nil, "doctor", "--config", path)
	for _, want := range []string{"WARN token legacy: by token, no roles: works as admin", "ok   token fin: by token_sha256, roles finance",
		"ok   token shop: by token_file ", "roles order_service", "ok   token look: by token, roles viewer"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor does not say %q:\n%s", want, r.stdout)
		}
	}
	for _, tok := range []string{rc.legacy, rc.finance, rc.shop, rc.viewer} {
		if strings.Contains(r.stdout+r.stderr, tok) {
			t.Fatalf("doctor shows a token:\n%s%s", r.stdout, r.stderr)
		}
	}
}
