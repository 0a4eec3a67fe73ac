// Command paygw is the payment-callback gateway: `paygw serve`, and the one-shot commands an
// operator runs beside it (`paygw --help` lists them, each with its flags and exit codes).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // reconcile.stripe_timezone resolves on hosts without tzdata
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, runs the command they name and returns the exit code (exit.go's table).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	code := exitCode(err)
	switch code {
	case exitOK, exitDiscrepancies, exitUntrusted:
		// The run completed; what it found is on stdout.
	case exitUsage:
		fmt.Fprintln(stderr, "paygw:", err)
		if cmd != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	default:
		fmt.Fprintln(stderr, "paygw:", err)
	}
	return code
}
