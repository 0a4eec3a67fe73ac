package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/paygw/paygw/config"
)

// version is set at build time with -ldflags "-X main.version=..."; else the module version.
var version = ""

// app is what every command writes to: stdout for results, stderr for logs and errors.
type app struct {
	stdout, stderr io.Writer
}

const rootLong = `paygw — payment-callback gateway: the notify_url you register at your payment channels, and
the /v1 API your services call.

The config file is --config, else $PAYGW_CONFIG, else ` + config.DefaultPath + `; PAYGW_<SECTION>__<KEY>
environment variables override it (PAYGW_MYSQL__DSN, PAYGW_IDEMPOTENCY__REDIS_TTL=5s).
Commands with --json print one JSON document on stdout; logs always go to stderr.`

// newRoot builds the command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	a := &app{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "paygw",
		Short:         "payment-callback gateway",
		Long:          rootLong,
		SilenceErrors: true, // run prints the one error line and picks the exit code
		SilenceUsage:  true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usagef("no command given")
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(a.serveCmd(), a.migrateCmd(), a.sweepCmd(), a.purgeCmd(), a.doctorCmd(), a.markersCmd(),
		a.whyCmd(), a.reconcileCmd(), a.simulateCmd(), a.versionCmd(), completionCmd(root))
	root.SetUsageTemplate(usageTemplate(root))
	root.InitDefaultHelpCmd()
	finish(root)
	return root
}

// group is a command that only holds subcommands: alone, it is a usage error.
func (a *app) group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs, // an unknown subcommand is named as one
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usagef("%s needs a subcommand", cmd.Name())
		},
	}
	c.AddCommand(subs...)
	return c
}

// withConfig gives c a --config flag and makes fn its run, called with the loaded, validated
// configuration and the logger it configures (on stderr).
func (a *app) withConfig(c *cobra.Command, fn func(ctx context.Context, cfg *config.Config, log zerolog.Logger, args []string) error) *cobra.Command {
	path := configFlag(c)
	c.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := config.Load(config.Path(*path), os.Environ())
		if err != nil {
			return err
		}
		return fn(cmd.Context(), cfg, newLogger(cfg.Log, a.stderr), args)
	}
	return c
}

func configFlag(c *cobra.Command) *string {
	return c.Flags().String("config", "", "the config `FILE` (default $PAYGW_CONFIG, else "+config.DefaultPath+")")
}

func jsonFlag(c *cobra.Command) *bool {
	return c.Flags().Bool("json", false, "print one JSON document on stdout instead of text (logs stay on stderr)")
}

// writeJSON prints v as the command's one JSON document.
func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

func newLogger(c config.Log, w io.Writer) zerolog.Logger {
	if c.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	level, _ := zerolog.ParseLevel(c.Level) // validated
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print paygw's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(a.stdout, "paygw", buildVersion())
			return err
		},
	}
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}

// completionCmd prints the shell completion script of root.
func completionCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "print the shell completion script",
		Long: `Print the completion script for a shell on stdout. Load it with, for example:
  bash:  source <(paygw completion bash)
  zsh:   paygw completion zsh > "${fpath[1]}/_paygw"
  fish:  paygw completion fish > ~/.config/fish/completions/paygw.fish`,
		ValidArgs: []string{"bash", "zsh", "fish", "powershell"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			}
			return root.GenPowerShellCompletionWithDesc(w)
		},
	}
}
