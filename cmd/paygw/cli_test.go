package main

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandPaths lists every command of the tree (the root as ""), walked from the code so that a
// command added later is tested too.
func commandPaths(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		out[strings.Join(path, " ")] = c
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)
	return out
}

// Every command's --help exits 0 and prints its description, its usage line, every flag and the
// exit codes it can return.
func TestEveryCommandHasHelp(t *testing.T) {
	cmds := commandPaths(t)
	for _, want := range []string{"", "serve", "migrate", "migrate status", "sweep", "purge", "doctor", "markers", "markers flush",
		"why", "reconcile", "reconcile query", "reconcile bill", "simulate", "simulate keys", "simulate notify", "simulate serve", "simulate webhook-sink",
		"version", "completion", "help"} {
		if cmds[want] == nil {
			t.Errorf("no command %q in the tree", want)
		}
	}
	for path, c := range cmds {
		t.Run("paygw "+path, func(t *testing.T) {
			r := runPaygw(t, nil, append(strings.Fields(path), "--help")...)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0\nstderr:\n%s", r.code, r.stderr)
			}
			// cobra shows the long description when there is one, else the short one.
			desc := c.Short
			if c.Long != "" {
				desc, _, _ = strings.Cut(c.Long, "\n")
			}
			for _, want := range []string{desc, "Usage:\n  paygw", "Exit codes:\n  0  ok\n", "  2  usage error: "} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("no %q in the help:\n%s", want, r.stdout)
				}
			}
			c.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if !strings.Contains(r.stdout, "--"+f.Name) {
					t.Errorf("flag --%s not in the help:\n%s", f.Name, r.stdout)
				}
			})
		})
	}
}

// Each command lists the exit codes it can return, from the one table.
func TestHelpListsTheCommandsExitCodes(t *testing.T) {
	for path, codes := range map[string][]string{
		"reconcile bill": {"  1  failed", "  3  the run completed and discrepancies remain", "  4  the bill is untrusted"},
		"doctor":         {"  1  failed"},
		"why":            {"  1  failed"},
		"version":        {},
	} {
		r := runPaygw(t, nil, append(strings.Fields(path), "--help")...)
		for _, want := range codes {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("paygw %s --help: no %q:\n%s", path, want, r.stdout)
			}
		}
		if path != "reconcile bill" && strings.Contains(r.stdout, "  3  ") {
			t.Errorf("paygw %s --help lists exit 3, which only reconcile bill returns:\n%s", path, r.stdout)
		}
	}
	// The synopsis shows --file as optional.
	if r := runPaygw(t, nil, "reconcile", "bill", "--help"); !strings.Contains(r.stdout, "[--file PATH]") {
		t.Errorf("reconcile bill's synopsis does not show --file as optional:\n%s", r.stdout)
	}
}

// A command line that cannot run exits 2 with one line saying why and where the help is; a
// command that runs and fails exits 1.
func TestExitCodes(t *testing.T) {
	// A configuration that loads (its MySQL is never reached by the cases that use it).
	cfg := writeConfig(t, settings{dsn: "root@tcp(127.0.0.1:1)/paygw"})
	tests := map[string]struct {
		args []string
		code int
		want []string // in stderr
	}{
		"no command":                {nil, exitUsage, []string{"no command given"}},
		"unknown command":           {[]string{"bogus"}, exitUsage, []string{`unknown command "bogus" for "paygw"`, "Run 'paygw --help'"}},
		"unknown flag":              {[]string{"serve", "--bogus"}, exitUsage, []string{"unknown flag: --bogus", "Run 'paygw serve --help'"}},
		"unexpected argument":       {[]string{"sweep", "extra"}, exitUsage, []string{`unknown command "extra" for "paygw sweep"`}},
		"group without subcommand":  {[]string{"reconcile"}, exitUsage, []string{"reconcile needs a subcommand"}},
		"unknown subcommand":        {[]string{"markers", "bogus"}, exitUsage, []string{`unknown command "bogus" for "paygw markers"`}},
		"missing required flag":     {[]string{"reconcile", "bill", "--date", "2026-12-03"}, exitUsage, []string{`required flag(s) "channel" not set`}},
		"date not YYYY-MM-DD":       {[]string{"reconcile", "bill", "--channel", "alipay", "--date", "12/03/2026"}, exitUsage, []string{`invalid argument "12/03/2026" for "--date"`, "want a day as YYYY-MM-DD"}},
		"unknown bill channel":      {[]string{"reconcile", "bill", "--channel", "paypal", "--date", "2026-12-03", "--config", cfg}, exitUsage, []string{`--channel "paypal"`}},
		"bill of a day not over":    {[]string{"reconcile", "bill", "--channel", "alipay", "--date", time.Now().AddDate(0, 0, 1).Format(time.DateOnly), "--config", cfg}, exitUsage, []string{"is not over yet in alipay's day", "its bill does not exist yet"}},
		"why without an order":      {[]string{"why"}, exitUsage, []string{"name one order: a trade_no, --channel-txn-id"}},
		"why of no trade_no":        {[]string{"why", "not a trade no", "--config", cfg}, exitUsage, []string{"is not a trade_no"}},
		"simulate keys without out": {[]string{"simulate", "keys"}, exitUsage, []string{`required flag(s) "out" not set`}},
		"simulate bad repeat":       {[]string{"simulate", "notify", "--channel", "alipay", "--trade-no", "T1", "--repeat", "0"}, exitUsage, []string{"--repeat and --concurrency must be at least 1"}},
		"sink with a bad secret":    {[]string{"simulate", "webhook-sink", "--secret", "whsec_c2hvcnQ="}, exitUsage, []string{"malformed secret", "decodes to 5 bytes"}},
		"sink without a secret":     {[]string{"simulate", "webhook-sink"}, exitUsage, []string{"malformed secret"}},
		"completion of no shell":    {[]string{"completion", "tcsh"}, exitUsage, []string{`invalid argument "tcsh"`}},
		"config missing":            {[]string{"sweep", "--config", filepath.Join(t.TempDir(), "none.yaml")}, exitFailed, []string{"none.yaml"}},
		"mysql unreachable":         {[]string{"purge", "--config", cfg}, exitFailed, []string{"paygw:"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := runPaygw(t, nil, tc.args...)
			if r.code != tc.code {
				t.Fatalf("paygw %s: exit %d, want %d\nstderr:\n%s", strings.Join(tc.args, " "), r.code, tc.code, r.stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr has no %q:\n%s", want, r.stderr)
				}
			}
			if tc.code == exitUsage && !strings.Contains(r.stderr, "--help' for usage.") {
				t.Errorf("a usage error does not point to the help:\n%s", r.stderr)
			}
			if tc.code == exitFailed && (strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.HasPrefix(r.stderr, "paygw: ")) {
				t.Errorf("a failure is not one line:\n%s", r.stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	if r := runPaygw(t, nil, "version"); r.code != 0 || !strings.HasPrefix(r.stdout, "paygw ") {
		t.Errorf("paygw version: exit %d, stdout %q; want 0 and \"paygw <version>\"", r.code, r.stdout)
	}
}

// paygw completion prints a script each shell loads; bash's is checked by bash itself.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "__start_paygw", "zsh": "#compdef paygw", "fish": "complete -c paygw"} {
		r := runPaygw(t, nil, "completion", shell)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("completion %s: exit %d, no %q in\n%.300s", shell, r.code, want, r.stdout)
		}
		if shell == "bash" {
			script := filepath.Join(t.TempDir(), "paygw.bash")
			if err := os.WriteFile(script, []byte(r.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := execBash(t, "source "+script+" && complete -p paygw"); err != nil || !strings.Contains(out, "paygw") {
				t.Errorf("bash cannot load the completion: %v\n%s", err, out)
			}
		}
	}
	// Completion asks the binary itself: the subcommands of reconcile.
	r := runPaygw(t, nil, "__complete", "reconcile", "")
	if r.code != 0 || !strings.Contains(r.stdout, "bill") || !strings.Contains(r.stdout, "query") {
		t.Errorf("__complete reconcile: exit %d\n%s", r.code, r.stdout)
	}
}
