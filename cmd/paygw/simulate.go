package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paygw/paygw/simulate"
)

const simulateUsage = `paygw simulate — play a payment channel against a running gateway

Usage:
  paygw simulate keys   --out DIR
  paygw simulate notify --channel alipay|wechatpay|stripe|unionpay --trade-no T --amount-fen N
                        [--status paid|closed|refund|pending] [--repeat N] [--concurrency N]
                        [--refund-fen N] [--refund-total-fen N] [--refund-id ID] [--charset CS]
                        [--schedule [--speedup F]] [--target URL] [--keys DIR]
  paygw simulate serve  --keys DIR [--addr 127.0.0.1:8090] [--state FILE] [--notify URL]

keys writes sandbox key material for every channel into DIR, plus DIR/channels.yaml: the
channels: block that makes a gateway trust it. notify signs real-format notifications with those
keys and sends them, printing each reply and a summary. --repeat sends the same bytes N times
(--concurrency at once); --schedule instead redelivers on the channel's real retry schedule
(divided by --speedup) until the gateway answers success, the way the channel would.
A refund is of --refund-fen (default the whole amount); Alipay and Stripe state the payment's
refunded total instead, --refund-total-fen (default --refund-fen). WeChat notifies only paid
trades and refunds. --charset gbk|gb2312 signs an Alipay notification in that charset.
serve is a fake of the four channels' servers: it answers trade queries, signed as each channel
signs, about the trades added with POST /_sim/trades {"channel","trade_no","amount_fen","status",
"txn_id"} (status paid, pending, closed, refunded), notifying --notify (the gateway's base URL) of
each unless "drop_notify":true. --state keeps the trades in FILE across restarts.
`

func simulateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, simulateUsage)
		return errors.New("simulate: keys or notify?")
	}
	switch args[0] {
	case "keys":
		fs := flag.NewFlagSet("simulate keys", flag.ContinueOnError)
		fs.SetOutput(stderr)
		out := fs.String("out", "", "directory for the sandbox keys (created if missing)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *out == "" {
			return errors.New("simulate keys: --out DIR is required")
		}
		m, err := simulate.WriteKeys(*out, time.Now())
		if err != nil {
			return fmt.Errorf("simulate keys: %w", err)
		}
		fmt.Fprintf(stdout, "wrote sandbox keys for %d channels to %s; config: %s\n", len(m.Channels()), *out, m.ConfigPath)
		return nil
	case "notify":
		return simulateNotify(ctx, args[1:], stdout, stderr)
	case "serve":
		return simulateServe(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, simulateUsage)
		return nil
	}
	fmt.Fprint(stderr, simulateUsage)
	return fmt.Errorf("simulate: unknown subcommand %q", args[0])
}

func simulateNotify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate notify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	channel := fs.String("channel", "", "alipay, wechatpay, stripe or unionpay")
	var p simulate.Payment
	fs.StringVar(&p.TradeNo, "trade-no", "", "the order's trade_no")
	fs.Int64Var(&p.AmountFen, "amount-fen", 0, "amount in minor units (fen, cents)")
	fs.StringVar(&p.Status, "status", simulate.StatusPaid, "paid, closed, refund or pending")
	fs.StringVar(&p.Currency, "currency", "CNY", "ISO 4217 currency")
	fs.StringVar(&p.TxnID, "txn-id", "", "the channel's transaction id (default: derived from the trade_no)")
	fs.Int64Var(&p.RefundFen, "refund-fen", 0, "for --status refund: this refund's amount (default: the whole amount)")
	fs.Int64Var(&p.RefundTotalFen, "refund-total-fen", 0, "for --status refund: the refunded total after it, as Alipay and Stripe state it (default: --refund-fen)")
	fs.StringVar(&p.RefundID, "refund-id", "", "for --status refund: the channel's refund id (default: derived)")
	charset := fs.String("charset", "", "alipay only: utf-8 (default), gbk or gb2312")
	repeat := fs.Int("repeat", 1, "send the same notification N times")
	concurrency := fs.Int("concurrency", 1, "how many of the repeats are in flight at once")
	schedule := fs.Bool("schedule", false, "redeliver on the channel's retry schedule until success")
	speedup := fs.Float64("speedup", 1, "divide the retry schedule's delays by this")
	target := fs.String("target", "http://127.0.0.1:8080", "the gateway's base URL (or the full notify_url)")
	keys := fs.String("keys", ".demo", "directory written by `paygw simulate keys`")
	timeout := fs.Duration("timeout", 15*time.Second, "timeout of each delivery")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case p.TradeNo == "":
		return errors.New("simulate notify: --trade-no is required")
	case p.AmountFen < 0:
		return errors.New("simulate notify: --amount-fen must not be negative")
	case *repeat < 1 || *concurrency < 1:
		return errors.New("simulate notify: --repeat and --concurrency must be at least 1")
	case *speedup <= 0:
		return errors.New("simulate notify: --speedup must be positive")
	case p.RefundFen < 0 || p.RefundTotalFen < 0:
		return errors.New("simulate notify: --refund-fen and --refund-total-fen must not be negative")
	case *charset != "" && *channel != "alipay":
		return errors.New("simulate notify: --charset is for --channel alipay")
	}
	signers, err := simulate.LoadSigners(*keys)
	if err != nil {
		return fmt.Errorf("simulate notify: %w", err)
	}
	signer, ok := signers[*channel]
	if !ok {
		return fmt.Errorf("simulate notify: --channel must be one of alipay, wechatpay, stripe, unionpay (got %q)", *channel)
	}
	if a, ok := signer.(simulate.AlipaySigner); ok && *charset != "" {
		a.Charset = *charset
		signer = a
	}
	client := &http.Client{Timeout: *timeout}
	url := simulate.NotifyURL(*target, *channel)
	print := func(r simulate.Reply) { fmt.Fprintln(stdout, r) }
	var replies []simulate.Reply
	if *schedule {
		if replies, err = simulate.Redeliver(ctx, client, url, signer, p, *speedup, print); err != nil {
			return fmt.Errorf("simulate notify: %w", err)
		}
	} else {
		m, err := signer.Sign(p)
		if err != nil {
			return fmt.Errorf("simulate notify: %w", err)
		}
		replies = simulate.Storm(ctx, client, url, m, *repeat, *concurrency, print)
	}
	fmt.Fprintln(stdout, simulate.Summary(replies))
	if last := replies[len(replies)-1]; *schedule && last.Kind() != "success" {
		return errors.New("simulate notify: the gateway never answered success")
	}
	return nil
}

// simulateServe runs the fake channel until ctx ends.
func simulateServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.String("keys", ".demo", "directory written by `paygw simulate keys`")
	addr := fs.String("addr", simulate.FakeAddr, "listen address (loopback)")
	state := fs.String("state", "", "file keeping the trades across restarts")
	notify := fs.String("notify", "", "the gateway's base URL to notify of trades (none when empty)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fake, err := simulate.NewFake(*keys, *notify)
	if err != nil {
		return fmt.Errorf("simulate serve: %w", err)
	}
	if *state != "" {
		if err := fake.KeepState(*state); err != nil {
			return fmt.Errorf("simulate serve: --state: %w", err)
		}
	}
	srv := &http.Server{Addr: *addr, Handler: fake.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(stdout, "fake channels on http://%s (trades: POST /_sim/trades)\n", *addr)
	select {
	case err := <-errc:
		return fmt.Errorf("simulate serve: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
