// Command secretscan proves a test run logged none of the secrets its tests configured: it reads
// the secrets file (one per line, written by testenv.Secret) and a log file, and exits 1 naming,
// by their first four characters only, the secrets the log contains.
//
//	go run ./internal/secretscan -secrets .test.secrets -log .test.log
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	logPath := fs.String("log", "", "log file to scan")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secretsPath == "" || *logPath == "" {
		return errors.New("usage: secretscan -secrets FILE -log FILE")
	}
	secrets, err := readSecrets(*secretsPath)
	if err != nil {
		return err
	}
	log, err := os.ReadFile(*logPath)
	if err != nil {
		return err
	}
	found := scan(secrets, log)
	if len(found) == 0 {
		fmt.Fprintf(stdout, "secretscan: none of %d secrets appears in %s (%d bytes)\n", len(secrets), *logPath, len(log))
		return nil
	}
	for _, s := range found {
		fmt.Fprintf(stderr, "secretscan: %s appears in %s: secret %s...\n", *logPath, *logPath, prefix(s))
	}
	return fmt.Errorf("%d secret(s) found in %s", len(found), *logPath)
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

// scan returns the secrets that occur in log.
func scan(secrets []string, log []byte) []string {
	var found []string
	for _, s := range secrets {
		if bytes.Contains(log, []byte(s)) {
			found = append(found, s)
		}
	}
	return found
}

// prefix is what a report may show of a secret: its first four bytes.
func prefix(s string) string {
	if len(s) > 4 {
		return s[:4]
	}
	return s
}
