package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

// outboundTimeout bounds one question to a channel.
const outboundTimeout = 10 * time.Second

// queriers builds the trade queriers of the enabled channels, warning once for each channel
// whose outbound credentials are missing.
func queriers(cfg *config.Config, chs []channels.Channel, log zerolog.Logger) ([]channels.Querier, error) {
	qs, skipped, err := all.QueriersFromConfig(cfg.Channels, chs, &http.Client{Timeout: outboundTimeout})
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		log.Warn().Err(s).Msg("trade queries off for this channel; it still verifies notifications")
	}
	return qs, nil
}

func reconcileConfig(cfg *config.Config) reconcile.Config {
	return reconcile.Config{QueryAfter: cfg.Reconcile.QueryAfter, QueryMaxAge: cfg.Reconcile.QueryMaxAge, QPS: cfg.Reconcile.QPS}
}

func (a *app) reconcileCmd() *cobra.Command {
	return a.group("reconcile", "find payments whose notification never came: ask the channels, match their bills",
		a.queryCmd(), a.billCmd())
}

func (a *app) queryCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "query",
		Short: "ask the channels about WAIT_PAY orders whose notification never came",
		Long: `Ask the channels about the open payment attempts whose notification never came, once, and
apply what each verified answer says through the one apply path: a line per order asked, then a
summary. Exit 0 whatever the channels answered; 1 if the run could not happen.`,
		Args: cobra.NoArgs,
	}, exitFailed)
	var o reconcile.Options
	f := c.Flags()
	f.StringVar(&o.Channel, "channel", "", "ask only this `CHANNEL`")
	f.StringVar(&o.TradeNo, "trade-no", "", "ask about this order (`TRADE_NO`) only, whatever its backoff")
	f.DurationVar(&o.OlderThan, "older-than", 0, "ask about attempts older than this (default reconcile.query_after)")
	f.DurationVar(&o.MaxAge, "max-age", 0, "and younger than this (default reconcile.query_max_age)")
	f.BoolVar(&o.DryRun, "dry-run", false, "ask and print, change nothing")
	asJSON := jsonFlag(c)
	return a.withConfig(c, func(ctx context.Context, cfg *config.Config, log zerolog.Logger, _ []string) error {
		// --older-than 0s asks about everything due now: tell it from "not given".
		return a.query(ctx, cfg, o, c.Flags().Changed("older-than"), *asJSON, log)
	})
}

// queryJSON is `paygw reconcile query --json`.
type queryJSON struct {
	Answers    []string `json:"answers"` // one line per order asked, as the text output prints it
	Asked      int      `json:"asked"`
	Paid       int      `json:"paid"`
	Refunded   int      `json:"refunded"`
	Closed     int      `json:"closed"`
	NotPaid    int      `json:"not_paid"`
	Failed     int      `json:"failed"`
	Unverified int      `json:"unverified"`
	Applied    int      `json:"applied"`
	Stale      int      `json:"stale"`
}

// query is one run of the query job.
func (a *app) query(ctx context.Context, cfg *config.Config, o reconcile.Options, olderThanSet, asJSON bool, log zerolog.Logger) error {
	s, err := openStores(ctx, cfg, storeOptions{conns: 8, oneShot: true}, log)
	if err != nil {
		return err
	}
	defer s.Close()
	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		return err
	}
	qs, err := queriers(cfg, chs, log)
	if err != nil {
		return err
	}
	if len(qs) == 0 {
		return errors.New("reconcile query: no enabled channel has its outbound credentials configured")
	}
	rc := reconcileConfig(cfg)
	if olderThanSet && o.OlderThan == 0 {
		rc.QueryAfter = 0
	}
	var lines strings.Builder
	o.Out = a.stdout
	if asJSON {
		o.Out = &lines
	}
	sum, err := reconcile.New(s.db, s.applier, qs, rc, log).Run(ctx, o)
	if err == nil && !o.DryRun {
		err = audit(ctx, s.db, "reconcile.query", "reconcile:"+cmp.Or(o.TradeNo, o.Channel, "all"), nil, sum)
	}
	if err != nil || !asJSON {
		return err
	}
	answers := strings.Split(strings.TrimSpace(lines.String()), "\n")
	answers = answers[:len(answers)-1] // the summary's line
	return writeJSON(a.stdout, queryJSON{Answers: answers, Asked: sum.Asked, Paid: sum.Paid, Refunded: sum.Refunded,
		Closed: sum.Closed, NotPaid: sum.NotPaid, Failed: sum.Failed, Unverified: sum.Unverified, Applied: sum.Applied, Stale: sum.Stale})
}

// channelDay is the zone of channel's day (bills.DayZone), with reconcile.stripe_timezone for Stripe.
func channelDay(cfg *config.Config, channel string) *time.Location {
	stripeDay, _ := time.LoadLocation(cfg.Reconcile.StripeTimezone) // validated
	return bills.DayZone(channel, stripeDay)
}

// billIdentity is whom channel's bills must name, from its configuration.
func billIdentity(c config.Channels, channel string) reconcile.Identity {
	switch channel {
	case "alipay":
		return reconcile.Identity{Account: c.Alipay.SellerID}
	case "wechatpay":
		ids := slices.Clone(c.WeChatPay.AppIDs)
		if c.WeChatPay.AppID != "" {
			ids = append(ids, c.WeChatPay.AppID)
		}
		return reconcile.Identity{Merchant: c.WeChatPay.MchID, AppIDs: ids}
	case "unionpay":
		return reconcile.Identity{Merchant: c.UnionPay.MerID}
	}
	return reconcile.Identity{}
}

func (a *app) billCmd() *cobra.Command {
	c := exits(&cobra.Command{
		Use:   "bill --channel C --date YYYY-MM-DD [--file PATH] [--report OUT.json|OUT.csv] [--json]",
		Short: "match a channel's daily bill against our books",
		Long: `Match one channel's bill of one day (in the channel's time: Beijing time for alipay, wechatpay
and unionpay, reconcile.stripe_timezone for stripe) against our books, and repair what the bill
proves: a payment whose notification was lost is applied. Without --file the bill is downloaded
from the channel over its outbound credentials. A run takes the bill lease serve's daily bills
take: one bill run at a time.`,
		Args: cobra.NoArgs,
	}, exitFailed, exitDiscrepancies, exitUntrusted)
	var b billFlags
	f := c.Flags()
	f.StringVar(&b.channel, "channel", "", "the `CHANNEL`: alipay, wechatpay, stripe, unionpay, or csv (the generic format)")
	f.Var(&b.date, "date", "the bill's day, YYYY-MM-DD, in the channel's time")
	f.StringVar(&b.file, "file", "", "the bill at `PATH`, in the channel's real format (default: download it from the channel)")
	f.StringVar(&b.csvChannel, "csv-channel", "csv", "with --channel csv: the `CHANNEL` the generic bill's lines were paid through")
	f.StringVar(&b.report, "report", "", "write the report with its discrepancies to `OUT`.json, or the discrepancies to OUT.csv")
	b.asJSON = jsonFlag(c)
	_ = c.MarkFlagRequired("channel")
	_ = c.MarkFlagRequired("date")
	return a.withConfig(c, func(ctx context.Context, cfg *config.Config, log zerolog.Logger, _ []string) error {
		return a.bill(ctx, cfg, b, log)
	})
}

// billFlags are `paygw reconcile bill`'s flags.
type billFlags struct {
	channel, file, csvChannel, report string
	date                              dayFlag
	asJSON                            *bool
}

// billChannels are the values of --channel.
var billChannels = []string{"alipay", "wechatpay", "stripe", "unionpay", "csv"}

// dayFlag is a flag holding a day, YYYY-MM-DD.
type dayFlag struct{ day time.Time }

func (d *dayFlag) String() string {
	if d.day.IsZero() {
		return ""
	}
	return d.day.Format(time.DateOnly)
}

func (d *dayFlag) Set(s string) error {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return fmt.Errorf("want a day as YYYY-MM-DD, e.g. %s", time.Now().Format(time.DateOnly))
	}
	d.day = t
	return nil
}

func (d *dayFlag) Type() string { return "YYYY-MM-DD" }

// bill is one channel's day against its bill.
func (a *app) bill(ctx context.Context, cfg *config.Config, b billFlags, log zerolog.Logger) error {
	if !slices.Contains(billChannels, b.channel) {
		return usagef("reconcile bill: --channel %q: want one of %s", b.channel, strings.Join(billChannels, ", "))
	}
	// A run is of one channel's day, in that channel's zone, and of one source: a generic csv
	// bill stands beside the channel's own, never in its place.
	matchAs, source := b.channel, repository.SourceChannel
	if matchAs == "csv" {
		matchAs, source = b.csvChannel, repository.SourceCSV
	}
	loc := channelDay(cfg, matchAs)
	day := time.Date(b.date.day.Year(), b.date.day.Month(), b.date.day.Day(), 0, 0, 0, 0, loc)
	if now := time.Now().In(loc); b.file == "" && !now.After(day.AddDate(0, 0, 1)) {
		// A channel makes a day's bill once the day is over in its own time.
		return usagef("reconcile bill: --date %s is not over yet in %s's day (%s, now %s): its bill does not exist yet; ask for an earlier day",
			b.date.day.Format(time.DateOnly), matchAs, loc, now.Format("2006-01-02 15:04"))
	}
	s, err := openStores(ctx, cfg, storeOptions{conns: 8, oneShot: true}, log)
	if err != nil {
		return err
	}
	defer s.Close()
	job := reconcile.New(s.db, s.applier, nil, reconcileConfig(cfg), log)
	// One bill run at a time, whether serve's or this one: the same lease.
	ctx, release, err := job.HoldBillLease(ctx, lease.Holder("reconcile bill"))
	if err != nil {
		return fmt.Errorf("reconcile bill: %w", err)
	}
	defer release()
	r, from, closeBill, err := openBill(ctx, cfg, b, day, log)
	if err != nil {
		return fmt.Errorf("reconcile bill: %w", err)
	}
	defer closeBill()
	bc := reconcile.BillConfig{LocalOnlyGrace: cfg.Reconcile.LocalOnlyGrace, Location: loc, Source: source, Downloaded: b.file == "",
		Identity: billIdentity(cfg.Channels, matchAs), FeeRate: billFeeRates(cfg.Channels)[matchAs]}
	rep, err := job.MatchBill(ctx, matchAs, day, r, bc, billProgress(a.stderr))
	if err != nil {
		return fmt.Errorf("reconcile bill: %s: %w", from, err)
	}
	if err := audit(ctx, s.db, "reconcile.bill", "reconciliation:"+strconv.FormatInt(rep.RunID, 10), nil,
		map[string]any{"channel": rep.Channel, "bill_date": rep.BillDate, "counts": rep.Counts, "trusted": rep.Trusted}); err != nil {
		return fmt.Errorf("reconcile bill: audit: %w", err)
	}
	if err := a.printBill(ctx, job, rep, b); err != nil {
		return err
	}
	switch {
	case !rep.Trusted:
		return errUntrusted
	case !rep.Settled():
		return errDiscrepancies
	}
	return nil
}

// openBill opens the bill of b: --file, else the channel's download. from names it in errors.
func openBill(ctx context.Context, cfg *config.Config, b billFlags, day time.Time, log zerolog.Logger) (r bills.Reader, from string, closeBill func(), err error) {
	if b.file != "" {
		f, err := os.Open(b.file) // #nosec G304 -- the bill the operator names
		if err != nil {
			return nil, "", nil, err
		}
		if r, err = billReader(b.channel, f, day); err != nil {
			f.Close()
			return nil, "", nil, fmt.Errorf("%s: %w", b.file, err)
		}
		return r, b.file, func() { f.Close() }, nil
	}
	// Without --file: the channel's own download, over its outbound credentials.
	from = fmt.Sprintf("the %s bill of %s as downloaded", b.channel, day.Format(time.DateOnly))
	bf, err := downloadBill(ctx, cfg, b.channel, day, log)
	if err != nil {
		return nil, "", nil, err
	}
	if r, err = bf.Open(); err != nil {
		bf.Close()
		return nil, "", nil, fmt.Errorf("%s: %w", from, err)
	}
	return r, from, func() { bf.Close() }, nil
}

// printBill prints the run's summary (or, with --json, its report) and writes --report.
func (a *app) printBill(ctx context.Context, job *reconcile.Job, rep reconcile.BillReport, b billFlags) error {
	if *b.asJSON {
		w := bufio.NewWriter(a.stdout)
		if err := errors.Join(writeBillJSON(ctx, w, job, rep), w.Flush()); err != nil {
			return fmt.Errorf("reconcile bill: --json: %w", err)
		}
	} else {
		printBillSummary(a.stdout, rep)
	}
	if b.report != "" {
		if err := writeBillReport(ctx, job, b.report, rep); err != nil {
			return fmt.Errorf("reconcile bill: --report: %w", err)
		}
	}
	return nil
}

// billIdentities is whom each channel's bills must name, from the configuration.
func billIdentities(c config.Channels) map[string]reconcile.Identity {
	ids := map[string]reconcile.Identity{}
	for _, ch := range []string{"alipay", "wechatpay", "unionpay"} {
		ids[ch] = billIdentity(c, ch)
	}
	return ids
}

// billFeeRates is each channel's fee rate (channels.X.fee_rate), from the configuration.
func billFeeRates(c config.Channels) map[string]reconcile.FeeRate {
	rates := map[string]reconcile.FeeRate{}
	for ch, ppm := range c.FeeRates() {
		rates[ch] = reconcile.FeeRate{PPM: ppm, Set: true}
	}
	return rates
}

// billReader opens f as channel's bill, in the format bills.FileFormat names, as downloads open.
func billReader(channel string, f *os.File, day time.Time) (bills.Reader, error) {
	format, err := bills.FileFormat(channel, f.Name())
	if err != nil {
		return nil, fmt.Errorf("--channel: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return bills.Open(format, f, info.Size(), day)
}

func printBillSummary(w io.Writer, rep reconcile.BillReport) {
	classes := make([]string, 0, len(rep.Counts))
	for c := range rep.Counts {
		classes = append(classes, c)
	}
	sort.Strings(classes)
	fmt.Fprintf(w, "%s %s (%s): %d lines, trusted %v\n", rep.Channel, rep.BillDate, rep.Source, rep.Lines, rep.Trusted)
	for _, c := range classes {
		fmt.Fprintf(w, "  %-24s %d\n", c, rep.Counts[c])
	}
	for _, why := range rep.Untrusted {
		fmt.Fprintf(w, "  untrusted, nothing repaired: %s\n", why)
	}
	if rep.SummaryMismatch != "" {
		fmt.Fprintf(w, "  summary: %s\n", rep.SummaryMismatch)
	}
	for _, b := range rep.BadLines {
		fmt.Fprintf(w, "  bad %s\n", b)
	}
}

// writeBillReport writes the report as JSON, or its discrepancies as CSV, by the file's ending,
// streaming the rows from the database: memory stays flat whatever the bill's size.
func writeBillReport(ctx context.Context, job *reconcile.Job, path string, rep reconcile.BillReport) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // #nosec G304 -- the report path the operator names
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		c := csv.NewWriter(w)
		_ = c.Write([]string{"class", "trade_no", "channel_txn_id", "bill_amount_fen", "local_amount_fen", "local_status", "repair"})
		err = job.Discrepancies(ctx, rep.RunID, func(d reconcile.Discrepancy) error {
			return c.Write([]string{d.Class, d.TradeNo, d.ChannelTxnID, optInt(d.BillAmountFen), optInt(d.LocalAmountFen), d.LocalStatus, d.Repair})
		})
		c.Flush()
		err = errors.Join(err, c.Error())
	} else {
		err = writeBillJSON(ctx, w, job, rep)
	}
	return errors.Join(err, w.Flush(), f.Close())
}

// writeBillJSON writes the report and its discrepancies as one JSON document, streaming the rows
// from the database.
func writeBillJSON(ctx context.Context, w *bufio.Writer, job *reconcile.Job, rep reconcile.BillReport) error {
	head, _ := json.Marshal(rep) // plain values: cannot fail
	_, _ = w.Write(head[:len(head)-1])
	_, _ = w.WriteString(`,"discrepancies":[`)
	first := true
	err := job.Discrepancies(ctx, rep.RunID, func(d reconcile.Discrepancy) error {
		if !first {
			_ = w.WriteByte(',')
		}
		first = false
		row, _ := json.Marshal(d)
		_, werr := w.Write(row)
		return werr
	})
	_, _ = w.WriteString("]}\n")
	return err
}

func optInt(p *int64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(*p, 10)
}

// billProgress reports a bill run's progress: a bar on a terminal, a plain line every 10 s
// otherwise (a log, a cron job's mail).
func billProgress(w io.Writer) func(lines int) {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) { // #nosec G115 -- a file descriptor
		bar := progressbar.NewOptions64(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("bill lines"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
		return func(lines int) { _ = bar.Set(lines) }
	}
	last := time.Now()
	return func(lines int) {
		if time.Since(last) >= 10*time.Second {
			fmt.Fprintf(w, "reconcile bill: %d lines read\n", lines)
			last = time.Now()
		}
	}
}

// billDownloadTimeout bounds one bill download: a bill is far larger than a query's answer.
const billDownloadTimeout = 10 * time.Minute

// billDownloaders builds the bill downloaders of the enabled channels, warning once for each
// channel whose outbound credentials are missing.
func billDownloaders(cfg *config.Config, chs []channels.Channel, log zerolog.Logger) ([]channels.BillDownloader, error) {
	stripeDay, _ := time.LoadLocation(cfg.Reconcile.StripeTimezone) // validated
	ds, skipped, err := all.BillDownloadersFromConfig(cfg.Channels, chs, stripeDay, &http.Client{Timeout: billDownloadTimeout})
	if err != nil {
		return nil, err
	}
	for _, s := range skipped {
		log.Warn().Err(s).Msg("bill downloads off for this channel")
	}
	return ds, nil
}

// downloadBill fetches channel's bill of day through the channel, configured as serve would.
func downloadBill(ctx context.Context, cfg *config.Config, channel string, day time.Time, log zerolog.Logger) (*channels.BillFile, error) {
	if channel == "csv" {
		return nil, errors.New("--channel csv is a file format: --file is required")
	}
	chs, err := all.FromConfig(cfg.Channels)
	if err != nil {
		return nil, err
	}
	ds, err := billDownloaders(cfg, chs, log)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Name() == channel {
			return d.DownloadBill(ctx, day)
		}
	}
	return nil, fmt.Errorf("--channel %q: not enabled, or its outbound credentials are missing: give the bill with --file", channel)
}
