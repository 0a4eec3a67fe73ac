package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/paygw/paygw/console"
	"github.com/paygw/paygw/internal/testenv"
)

// TestServeConsole: the real binary serves the console on http.addr. Two replicas with the same
// console.session_key_file accept each other's sessions (as behind one load balancer); with
// console.enabled false there is no console at all.
func TestServeConsole(t *testing.T) {
	viewer := newToken(t)
	keyFile := tempFile(t, "console.key", testenv.Secret(t, testenv.Random(32))+"\n")
	extra := fmt.Sprintf("auth:\n  api_tokens:\n    - {name: look, token: %q, roles: [viewer]}\nconsole:\n  session_key_file: %q\n", viewer, keyFile)
	dsn := testenv.NewDatabase(t)
	addr1, addr2 := freeAddr(t), freeAddr(t)
	s1 := startServer(t, migratedConfig(t, settings{addr: addr1, dsn: dsn, extra: extra}), addr1)
	s2 := startServer(t, writeConfig(t, settings{addr: addr2, dsn: dsn, extra: extra}), addr2)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	res, err := noRedirect.Get(s1.url + console.Prefix + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Security-Policy") != console.CSP {
		t.Fatalf("GET /console/login: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
	if csrf == nil {
		t.Fatalf("no CSRF token in the login form:\n%s", body)
	}
	form := url.Values{console.TokenField: {viewer}, console.CSRFField: {string(csrf[1])}}
	req, _ := http.NewRequest("POST", s1.url+console.Prefix+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range res.Cookies() {
		req.AddCookie(c)
	}
	res, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	session := testenv.Cookie(res.Cookies(), console.SessionCookie)
	if res.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("login: %d, session cookie %v", res.StatusCode, session)
	}

	// The other replica reads the session: the same key signs both.
	req, _ = http.NewRequest("GET", s2.url+console.Prefix+"/search", nil)
	req.AddCookie(session)
	res, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="who">look<`) {
		t.Fatalf("the session on the other replica: %d\n%s", res.StatusCode, body)
	}

	addr3 := freeAddr(t)
	off := strings.Replace(extra, "console:\n", "console:\n  enabled: false\n", 1)
	s3 := startServer(t, writeConfig(t, settings{addr: addr3, dsn: dsn, extra: off}), addr3)
	res, err = noRedirect.Get(s3.url + console.Prefix + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("console.enabled false: GET /console/login %d, want 404", res.StatusCode)
	}
	for _, s := range []*server{s1, s2, s3} {
		s.stop()
		if strings.Contains(s.out.String(), viewer) {
			t.Fatalf("serve's output holds the token:\n%s", s.out)
		}
		if strings.Contains(s.out.String(), "console.session_key_file is not set") {
			t.Fatalf("serve warns about a session key file that is set:\n%s", s.out)
		}
	}
	if !strings.Contains(s2.out.String(), `"route":"/console/search","status":200`) || !strings.Contains(s2.out.String(), `"token_name":"look"`) {
		t.Fatalf("no access log line of the console's search on the second replica:\n%s", s2.out)
	}
}
