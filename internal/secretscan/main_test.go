package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	dir := t.TempDir()
	// Deliberately not registered with testenv.Secret: these must appear in this test's own files.
	secrets := filepath.Join(dir, "secrets")
	if err := os.WriteFile(secrets, []byte("whsec_leaked0001\n\ntok-clean-000001\nwhsec_leaked0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		log     string
		wantErr bool
	}{
		"clean":  {log: "=== RUN TestX\n--- PASS: TestX\nok  \tpkg\t0.1s\n"},
		"leaked": {log: "level=warn msg=\"config\" secret=whsec_leaked0001\n", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			log := filepath.Join(dir, name+".log")
			if err := os.WriteFile(log, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			err := run([]string{"-secrets", secrets, "-log", log}, &stdout, &stderr)
			if (err != nil) != tc.wantErr {
				t.Fatalf("run = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !strings.Contains(stderr.String(), "secret whse...") {
					t.Errorf("report does not name the secret by its prefix: %q", stderr.String())
				}
				if strings.Contains(stderr.String(), "leaked0001") || strings.Contains(err.Error(), "leaked0001") {
					t.Errorf("report shows more than the prefix: %q", stderr.String())
				}
			}
		})
	}
}

func TestShortSecretRefused(t *testing.T) {
	dir := t.TempDir()
	secrets, log := filepath.Join(dir, "secrets"), filepath.Join(dir, "log")
	if err := os.WriteFile(secrets, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-secrets", secrets, "-log", log}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("a two-byte secret was accepted")
	}
}

// A directory is scanned through its *.log files, at any depth; other files are not logs.
func TestScanDirectory(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets")
	if err := os.WriteFile(secrets, []byte("whsec_leaked0001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "services")
	files := map[string]string{
		"mariadb-3306.log":      "clean\n",
		"redis-6379/server.log": "got whsec_leaked0001\n",
		"mariadb-3306/ibdata1":  "whsec_leaked0001 in a data file, not a log\n",
	}
	for name, body := range files {
		p := filepath.Join(logs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clean := filepath.Join(dir, "test.log")
	if err := os.WriteFile(clean, []byte("ok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	err := run([]string{"-secrets", secrets, "-log", clean, "-log", logs}, &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(stderr.String(), filepath.Join("redis-6379", "server.log")) || strings.Contains(stderr.String(), "ibdata1") {
		t.Fatalf("run = %v, report %q; want the leak in redis-6379/server.log alone", err, stderr.String())
	}
	if err := os.Remove(filepath.Join(logs, "redis-6379", "server.log")); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-secrets", secrets, "-log", clean, "-log", logs}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("clean logs: %v", err)
	}
}

// A whsec_ secret leaks as itself, as its base64 part without the prefix, and as the HMAC key it
// decodes to, raw, in hex or in another base64 alphabet; a different key is not reported.
func TestScanWebhookSecretForms(t *testing.T) {
	key := []byte("\xfb\xff\x00webhook-key-of-24-bytes!") // 27 bytes, with + and / in its base64
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another-key-of-24-bytes!!"))
	tests := map[string]struct {
		log  string
		leak bool
	}{
		"whole":       {"secret=" + secret, true},
		"base64 part": {"key=" + strings.TrimPrefix(secret, "whsec_") + " ok", true},
		"hex key":     {"key=" + hex.EncodeToString(key), true},
		"raw key":     {"key=" + string(key), true},
		"url base64":  {"key=" + base64.RawURLEncoding.EncodeToString(key), true},
		"another key": {"secret=" + other, false},
		"prefix only": {"secret=whsec_*** masked", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			found := scan([]string{secret}, []byte(tc.log))
			if (len(found) > 0) != tc.leak {
				t.Fatalf("scan found %d, want leak %v", len(found), tc.leak)
			}
		})
	}
}
