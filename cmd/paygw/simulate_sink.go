package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/paygw/paygw/simulate"
)

// sinkSecretEnv holds the sink's secret when --secret is not given, so that it need not show in
// the process list.
const sinkSecretEnv = "PAYGW_SINK_SECRET" // #nosec G101 -- the name of a variable, not a credential

func (a *app) simSinkCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "webhook-sink --secret whsec_...",
		Short: "a merchant's webhook receiver that verifies, counts and misbehaves on request",
		Long: `Receive paygw's webhooks as a merchant would, until SIGINT or SIGTERM: every POST is verified
as the Standard Webhooks specification says (webhook/) with --secret (repeat it for a rotation, or
set ` + sinkSecretEnv + `), then answered 204, or 500 for the --fail-rate fraction, after --slow.
GET /stats answers the counts as JSON: requests, refused (401), malformed (400), failed (500),
accepted, distinct event ids, duplicates, ids per type, orders paid by two event ids, events that
arrived before an earlier event of their order; /stats?orders=1 adds each order's events.
--record FILE appends one JSON line per delivery answered 2xx (webhook_id, type, trade_no, the
event's timestamp, the time received), written before the answer goes out, so FILE keeps what
the sink acknowledged across a SIGKILL and a restart with the same FILE; the counts of /stats
start again at zero with each process. Deliveries failed on purpose are not recorded.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	f := c.Flags()
	var opt simulate.SinkOptions
	addr := f.String("addr", simulate.SinkAddr, "listen address")
	f.StringArrayVar(&opt.Secrets, "secret", nil, "whsec_ secret to verify with (repeatable; default $"+sinkSecretEnv+")")
	f.Float64Var(&opt.FailRate, "fail-rate", 0, "the fraction of verified deliveries answered 500, from 0 to 1")
	f.DurationVar(&opt.Slow, "slow", 0, "wait this long before each answer")
	quiet := f.Bool("quiet", false, "print no line per delivery")
	record := f.String("record", "", "append one JSON line per delivery answered 2xx to this file, before answering")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if len(opt.Secrets) == 0 && os.Getenv(sinkSecretEnv) != "" {
			opt.Secrets = []string{os.Getenv(sinkSecretEnv)}
		}
		if !*quiet {
			opt.Log = a.stdout
		}
		if *record != "" {
			rf, err := simulate.OpenSinkRecord(*record)
			if err != nil {
				return fmt.Errorf("simulate webhook-sink: --record: %w", err)
			}
			defer rf.Close() // every line is written before its answer; nothing is buffered
			opt.Record = rf
		}
		sink, err := simulate.NewSink(opt)
		if err != nil {
			return usagef("simulate webhook-sink: %v (--secret, --fail-rate, --slow)", err)
		}
		return a.serveUntil(cmd.Context(), "simulate webhook-sink", *addr, sink.Handler(), sinkBanner(*addr, opt))
	}
	return c
}

func sinkBanner(addr string, opt simulate.SinkOptions) string {
	return fmt.Sprintf("webhook sink on http://%s (stats: GET /stats; %d secret(s), fail rate %g, slow %s)",
		addr, len(opt.Secrets), opt.FailRate, opt.Slow.Round(time.Millisecond))
}
