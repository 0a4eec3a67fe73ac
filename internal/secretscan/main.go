// Command secretscan proves a test run logged none of the secrets its tests configured: it reads
// the secrets file (one per line, written by testenv.Secret) and the logs named by -log (a file,
// or a directory whose *.log files are read, recursively; -log may repeat), and exits 1 naming,
// by their first four characters only, the secrets a log contains.
//
//	go run ./internal/secretscan -secrets .test.secrets -log .test.log -log .services
//
// What it sees is only what reaches those files. `make test` gives it the output of `go test -v`
// (.test.log: what the tests and the code under test wrote through t.Log, the test loggers and
// the test processes' stdout and stderr) and the logs of the services the tests ran against
// (.services/: MariaDB and Redis). It does not see what a child process wrote into a
// test's temporary directory (removed when the test ends) unless the test copied it to its log,
// nor HTTP bodies or Redis values that were never logged. A whsec_ secret (a webhook endpoint's,
// Stripe's) is also found by its base64 part alone and by the key it decodes to (see forms).
package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "secretscan:", err)
		os.Exit(1)
	}
}

// minLen: shorter strings would match ordinary text by chance, so the tests' secrets are longer.
const minLen = 8

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("secretscan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secretsPath := fs.String("secrets", os.Getenv("PAYGW_TEST_SECRETS_FILE"), "file of secrets, one per line (default $PAYGW_TEST_SECRETS_FILE)")
	var logArgs []string
	fs.Func("log", "log file, or directory of *.log files, to scan (repeatable)", func(p string) error {
		logArgs = append(logArgs, p)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secretsPath == "" || len(logArgs) == 0 {
		return errors.New("usage: secretscan -secrets FILE -log FILE|DIR [-log FILE|DIR ...]")
	}
	secrets, err := readSecrets(*secretsPath)
	if err != nil {
		return err
	}
	logs, err := logFiles(logArgs)
	if err != nil {
		return err
	}
	var total int64
	var hits int
	for _, path := range logs {
		log, err := os.ReadFile(path) // #nosec G304 -- reading the logs the caller names is this tool's job
		if err != nil {
			return err
		}
		total += int64(len(log))
		for _, s := range scan(secrets, log) {
			hits++
			fmt.Fprintf(stderr, "secretscan: secret %s... appears in %s\n", prefix(s), path)
		}
	}
	if hits > 0 {
		return fmt.Errorf("%d secret(s) found in %d log(s)", hits, len(logs))
	}
	fmt.Fprintf(stdout, "secretscan: none of %d secrets appears in %d log(s) (%d bytes): %s\n", len(secrets), len(logs), total, strings.Join(logs, " "))
	return nil
}

// logFiles lists the files args name: a file as it is, a directory as the *.log files under it.
func logFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, a)
			continue
		}
		err = filepath.WalkDir(a, func(p string, d iofs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && strings.HasSuffix(p, ".log") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readSecrets reads one secret a line, dropping blanks and repeats. A secret shorter than minLen
// is an error, not skipped silently: it could never be told apart from ordinary text.
func readSecrets(path string) ([]string, error) {
	f, err := os.Open(path) // #nosec G304 G703 -- reading the file the caller names is this tool's job
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		s := strings.TrimRight(sc.Text(), "\r")
		switch {
		case s == "" || seen[s]:
			continue
		case len(s) < minLen:
			return nil, fmt.Errorf("%s:%d: secret %s... is shorter than %d bytes", path, n, prefix(s), minLen)
		}
		seen[s] = true
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sort.Strings(out)
	return out, nil
}

// scan returns the secrets that occur in log, in any of their forms.
func scan(secrets []string, log []byte) []string {
	var found []string
	for _, s := range secrets {
		for _, f := range forms(s) {
			if bytes.Contains(log, f) {
				found = append(found, s)
				break
			}
		}
	}
	return found
}

// webhookPrefix starts a Standard Webhooks (and Stripe) signing secret.
const webhookPrefix = "whsec_"

// forms are the texts that give s away. A whsec_ secret is also given away by its base64 part
// alone, and, when that decodes, by the HMAC key it stands for: raw, hex, or re-encoded in the
// other base64 alphabets (a log line that prints the key a signer used).
func forms(s string) [][]byte {
	out := [][]byte{[]byte(s)}
	body, ok := strings.CutPrefix(s, webhookPrefix)
	if !ok || len(body) < minLen {
		return out
	}
	out = append(out, []byte(body))
	key, err := base64.StdEncoding.DecodeString(body)
	if err != nil || len(key) < minLen {
		return out
	}
	seen := map[string]bool{body: true}
	for _, f := range []string{string(key), hex.EncodeToString(key), base64.RawStdEncoding.EncodeToString(key),
		base64.URLEncoding.EncodeToString(key), base64.RawURLEncoding.EncodeToString(key)} {
		if !seen[f] {
			seen[f] = true
			out = append(out, []byte(f))
		}
	}
	return out
}

// prefix is what a report may show of a secret: its first four bytes.
func prefix(s string) string {
	if len(s) > 4 {
		return s[:4]
	}
	return s
}
