package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/paygw/paygw/simulate"
)

const simulateLong = `Play a payment channel against a running gateway.

  paygw simulate keys   --out DIR
  paygw simulate notify --channel alipay|wechatpay|stripe|unionpay --trade-no T --amount-fen N
                        [--status paid|closed|refund|pending] [--repeat N] [--concurrency N]
                        [--refund-fen N] [--refund-total-fen N] [--refund-id ID] [--charset CS]
                        [--schedule [--speedup F]] [--target URL] [--keys DIR]
  paygw simulate serve  --keys DIR [--addr 127.0.0.1:8090] [--state FILE] [--notify URL]
  paygw simulate webhook-sink --secret whsec_... [--addr 127.0.0.1:8099] [--fail-rate 0.3] [--slow 2s]
                              [--record FILE]

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
webhook-sink plays the merchant's side of paygw's webhooks: it verifies each delivery (Standard
Webhooks), answers 204, or 500 for the --fail-rate fraction, after --slow, and counts what it
accepted at GET /stats; --record FILE also appends each accepted delivery to FILE before answering.
`

func (a *app) simulateCmd() *cobra.Command {
	c := a.group("simulate", "play a payment channel against a gateway", a.simKeysCmd(), a.simNotifyCmd(), a.simServeCmd(),
		a.simSinkCmd())
	c.Long = simulateLong
	return c
}

func (a *app) simKeysCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "keys --out DIR",
		Short: "write sandbox keys for every channel, and DIR/channels.yaml to trust them",
		Args:  cobra.NoArgs,
	}, exitFailed)
	out := c.Flags().String("out", "", "`DIR` for the sandbox keys (created if missing)")
	_ = c.MarkFlagRequired("out")
	c.RunE = func(*cobra.Command, []string) error {
		m, err := simulate.WriteKeys(*out, time.Now())
		if err != nil {
			return fmt.Errorf("simulate keys: %w", err)
		}
		fmt.Fprintf(a.stdout, "wrote sandbox keys for %d channels to %s; config: %s\n", len(m.Channels()), *out, m.ConfigPath)
		return nil
	}
	return c
}

// notifyFlags are `paygw simulate notify`'s flags.
type notifyFlags struct {
	p                   simulate.Payment
	channel, charset    string
	repeat, concurrency int
	schedule            bool
	speedup             float64
	target, keys        string
	timeout             time.Duration
}

func (a *app) simNotifyCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "notify --channel C --trade-no T --amount-fen N",
		Short: "sign real-format notifications with the sandbox keys and send them",
		Long: `Sign a notification in the channel's real format with the keys of ` + "`paygw simulate keys`" + ` and send it,
printing each reply and a summary. Exit 1 when the gateway accepted none of them (every one refused,
answered retry or not delivered), or, with --schedule, never answered success.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	var n notifyFlags
	f := c.Flags()
	f.StringVar(&n.channel, "channel", "", "alipay, wechatpay, stripe or unionpay")
	f.StringVar(&n.p.TradeNo, "trade-no", "", "the order's trade_no")
	f.Int64Var(&n.p.AmountFen, "amount-fen", 0, "amount in minor units (fen, cents)")
	f.StringVar(&n.p.Status, "status", simulate.StatusPaid, "paid, closed, refund or pending")
	f.StringVar(&n.p.Currency, "currency", "CNY", "ISO 4217 currency")
	f.StringVar(&n.p.TxnID, "txn-id", "", "the channel's transaction id (default: derived from the trade_no)")
	f.Int64Var(&n.p.RefundFen, "refund-fen", 0, "for --status refund: this refund's amount (default: the whole amount)")
	f.Int64Var(&n.p.RefundTotalFen, "refund-total-fen", 0, "for --status refund: the refunded total after it, as Alipay and Stripe state it (default: --refund-fen)")
	f.StringVar(&n.p.RefundID, "refund-id", "", "for --status refund: the channel's refund id (default: derived)")
	f.StringVar(&n.charset, "charset", "", "alipay only: utf-8 (default), gbk or gb2312")
	f.IntVar(&n.repeat, "repeat", 1, "send the same notification N times")
	f.IntVar(&n.concurrency, "concurrency", 1, "how many of the repeats are in flight at once")
	f.BoolVar(&n.schedule, "schedule", false, "redeliver on the channel's retry schedule until success")
	f.Float64Var(&n.speedup, "speedup", 1, "divide the retry schedule's delays by this")
	f.StringVar(&n.target, "target", "http://127.0.0.1:8080", "the gateway's base `URL` (or the full notify_url)")
	f.StringVar(&n.keys, "keys", ".demo", "`DIR` written by paygw simulate keys")
	f.DurationVar(&n.timeout, "timeout", 15*time.Second, "timeout of each delivery")
	_ = c.MarkFlagRequired("channel")
	_ = c.MarkFlagRequired("trade-no")
	c.RunE = func(cmd *cobra.Command, _ []string) error { return a.simNotify(cmd.Context(), n) }
	return c
}

// check refuses flags that parse but make no sense together.
func (n notifyFlags) check() error {
	switch {
	case !slices.Contains([]string{"alipay", "wechatpay", "stripe", "unionpay"}, n.channel):
		return usagef("simulate notify: --channel must be one of alipay, wechatpay, stripe, unionpay (got %q)", n.channel)
	case n.p.AmountFen < 0:
		return usagef("simulate notify: --amount-fen must not be negative")
	case n.repeat < 1 || n.concurrency < 1:
		return usagef("simulate notify: --repeat and --concurrency must be at least 1")
	case n.speedup <= 0:
		return usagef("simulate notify: --speedup must be positive")
	case n.p.RefundFen < 0 || n.p.RefundTotalFen < 0:
		return usagef("simulate notify: --refund-fen and --refund-total-fen must not be negative")
	case n.charset != "" && n.channel != "alipay":
		return usagef("simulate notify: --charset is for --channel alipay")
	}
	return nil
}

func (a *app) simNotify(ctx context.Context, n notifyFlags) error {
	if err := n.check(); err != nil {
		return err
	}
	signers, err := simulate.LoadSigners(n.keys)
	if err != nil {
		return fmt.Errorf("simulate notify: %w", err)
	}
	signer, ok := signers[n.channel]
	if !ok {
		return fmt.Errorf("simulate notify: %s holds no %s keys", n.keys, n.channel)
	}
	if s, ok := signer.(simulate.AlipaySigner); ok && n.charset != "" {
		s.Charset = n.charset
		signer = s
	}
	client := &http.Client{Timeout: n.timeout}
	url := simulate.NotifyURL(n.target, n.channel)
	print := func(r simulate.Reply) { fmt.Fprintln(a.stdout, r) }
	var replies []simulate.Reply
	if n.schedule {
		if replies, err = simulate.Redeliver(ctx, client, url, signer, n.p, n.speedup, print); err != nil {
			return fmt.Errorf("simulate notify: %w", err)
		}
	} else {
		m, err := signer.Sign(n.p)
		if err != nil {
			return fmt.Errorf("simulate notify: %w", err)
		}
		replies = simulate.Storm(ctx, client, url, m, n.repeat, n.concurrency, print)
	}
	fmt.Fprintln(a.stdout, simulate.Summary(replies))
	if last := replies[len(replies)-1]; n.schedule && last.Kind() != "success" {
		return errors.New("simulate notify: the gateway never answered success")
	}
	if !slices.ContainsFunc(replies, func(r simulate.Reply) bool { return r.Kind() == "success" }) {
		return fmt.Errorf("simulate notify: the gateway accepted none of the %d notification(s)", len(replies))
	}
	return nil
}

func (a *app) simServeCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "serve --keys DIR",
		Short: "a fake of the four channels' servers: trade queries and bills",
		Long: `Serve a fake of the four channels' servers until SIGINT or SIGTERM: it answers trade queries
and bill downloads, signed as each channel signs, about the trades added with POST /_sim/trades,
and notifies --notify of each unless "drop_notify":true.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	f := c.Flags()
	keys := f.String("keys", ".demo", "`DIR` written by paygw simulate keys")
	addr := f.String("addr", simulate.FakeAddr, "listen address (loopback)")
	state := f.String("state", "", "file keeping the trades across restarts")
	notify := f.String("notify", "", "the gateway's base URL to notify of trades (none when empty)")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.simServe(cmd.Context(), *keys, *addr, *state, *notify)
	}
	return c
}

// simServe runs the fake channel until ctx ends.
func (a *app) simServe(ctx context.Context, keys, addr, state, notify string) error {
	fake, err := simulate.NewFake(keys, notify)
	if err != nil {
		return fmt.Errorf("simulate serve: %w", err)
	}
	if state != "" {
		if err := fake.KeepState(state); err != nil {
			return fmt.Errorf("simulate serve: --state: %w", err)
		}
	}
	return a.serveUntil(ctx, "simulate serve", addr, fake.Handler(),
		fmt.Sprintf("fake channels on http://%s (trades: POST /_sim/trades)", addr))
}

// serveUntil serves h on addr, prints banner once listening, and stops when ctx ends.
func (a *app) serveUntil(ctx context.Context, name, addr string, h http.Handler, banner string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	fmt.Fprintln(a.stdout, banner)
	select {
	case err := <-errc:
		return fmt.Errorf("%s: %w", name, err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
