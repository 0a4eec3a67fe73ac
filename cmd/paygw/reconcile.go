package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/all"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/guard"
	"github.com/paygw/paygw/identity"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
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

// reconcileCmd is `paygw reconcile query`: one run, a line per order asked and a summary.
func reconcileCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "bill" {
		return billCmd(ctx, args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "query" {
		return errors.New("reconcile: the subcommands are `paygw reconcile query` and `paygw reconcile bill` (see --help)")
	}
	fs := flag.NewFlagSet("reconcile query", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default $PAYGW_CONFIG, else "+config.DefaultPath+")")
	var o reconcile.Options
	fs.StringVar(&o.Channel, "channel", "", "ask only this channel")
	fs.StringVar(&o.TradeNo, "trade-no", "", "ask about this order only, whatever its backoff")
	fs.DurationVar(&o.OlderThan, "older-than", 0, "ask about attempts older than this (default reconcile.query_after)")
	fs.DurationVar(&o.MaxAge, "max-age", 0, "and younger than this (default reconcile.query_max_age)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "ask and print, change nothing")
	fs.Usage = func() {
		fmt.Fprint(stderr, "paygw reconcile query: ask the channels about WAIT_PAY orders whose notification never came\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("reconcile query: unexpected argument %q", fs.Arg(0))
	}
	// --older-than 0s asks about everything due now: tell it from "not given".
	olderThanSet := false
	fs.Visit(func(f *flag.Flag) { olderThanSet = olderThanSet || f.Name == "older-than" })
	cfg, err := config.Load(config.Path(*path), os.Environ())
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	db, applier, done, err := openApplier(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer done()
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
	o.Out = stdout
	_, err = reconcile.New(db, applier, qs, rc, log).Run(ctx, o)
	return err
}

// Exit codes of `paygw reconcile bill` beyond 0 (settled) and 1 (could not run, or the bill was
// refused as another merchant's or another day's).
const (
	exitDiscrepancies = 3
	exitUntrusted     = 4
)

// errDiscrepancies makes main exit with exitDiscrepancies: the run completed and found lines a
// person must look at.
var errDiscrepancies = errors.New("discrepancies remain")

// errUntrusted makes main exit with exitUntrusted: the run completed, but the bill does not hold
// together, so it repaired nothing; stdout says why.
var errUntrusted = errors.New("the bill is untrusted: nothing was repaired")

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

// billCmd is `paygw reconcile bill`: one channel's day against its bill.
func billCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile bill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (default $PAYGW_CONFIG, else "+config.DefaultPath+")")
	channel := fs.String("channel", "", "alipay, wechatpay, stripe, unionpay, or csv (the generic format)")
	date := fs.String("date", "", "the bill's day, YYYY-MM-DD, in the channel's time")
	file := fs.String("file", "", "the bill in the channel's real format (default: download it from the channel)")
	csvChannel := fs.String("csv-channel", "csv", "with --channel csv: the channel the generic bill's lines were paid through")
	report := fs.String("report", "", "write the discrepancies to OUT.json or OUT.csv")
	if err := fs.Parse(args); err != nil {
		return err
	}
	day, err := time.Parse(time.DateOnly, *date)
	if err != nil {
		return errors.New("reconcile bill: --date YYYY-MM-DD is required")
	}
	cfg, err := config.Load(config.Path(*path), os.Environ())
	if err != nil {
		return err
	}
	// A run is of one channel's day, in that channel's zone, and of one source: a generic csv
	// bill stands beside the channel's own, never in its place.
	matchAs, source := *channel, repository.SourceChannel
	if matchAs == "csv" {
		matchAs, source = *csvChannel, repository.SourceCSV
	}
	stripeDay, _ := time.LoadLocation(cfg.Reconcile.StripeTimezone) // validated
	loc := bills.DayZone(matchAs, stripeDay)
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, loc)
	log := newLogger(cfg.Log, stderr)
	var r bills.Reader
	from := *file
	if *file != "" {
		f, err := os.Open(*file) // #nosec G304 -- the bill the operator names
		if err != nil {
			return fmt.Errorf("reconcile bill: %w", err)
		}
		defer f.Close()
		if r, err = billReader(*channel, f, day); err != nil {
			return fmt.Errorf("reconcile bill: %s: %w", *file, err)
		}
	}

	db, applier, done, err := openApplier(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer done()
	job := reconcile.New(db, applier, nil, reconcileConfig(cfg), log)
	// One bill run at a time, whether serve's or this one: the same lease.
	ctx, release, err := job.HoldBillLease(ctx, leaseHolder("reconcile bill"))
	if err != nil {
		return fmt.Errorf("reconcile bill: %w", err)
	}
	defer release()
	if *file == "" {
		// Without --file: the channel's own download, over its outbound credentials.
		from = fmt.Sprintf("the %s bill of %s as downloaded", *channel, day.Format(time.DateOnly))
		b, err := downloadBill(ctx, cfg, *channel, day, log)
		if err != nil {
			return fmt.Errorf("reconcile bill: %w", err)
		}
		defer b.Close()
		if r, err = b.Open(); err != nil {
			return fmt.Errorf("reconcile bill: %s: %w", from, err)
		}
	}
	progress := billProgress(stderr)
	bc := reconcile.BillConfig{LocalOnlyGrace: cfg.Reconcile.LocalOnlyGrace, Location: loc, Source: source, Downloaded: *file == "",
		Identity: billIdentity(cfg.Channels, matchAs)}
	rep, err := job.MatchBill(ctx, matchAs, day, r, bc, progress)
	if err != nil {
		return fmt.Errorf("reconcile bill: %s: %w", from, err)
	}
	printBillSummary(stdout, rep)
	if *report != "" {
		if err := writeBillReport(ctx, job, *report, rep); err != nil {
			return fmt.Errorf("reconcile bill: --report: %w", err)
		}
	}
	switch {
	case !rep.Trusted:
		return errUntrusted
	case !rep.Settled():
		return errDiscrepancies
	}
	return nil
}

// leaseHolder names this process in a lease (at most 64 bytes): what it runs, host and pid.
func leaseHolder(what string) string {
	h := what + " on " + holderName()
	if len(h) > 64 {
		h = h[:64]
	}
	return h
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
		head, _ := json.Marshal(rep) // plain values: cannot fail
		_, _ = w.Write(head[:len(head)-1])
		_, _ = w.WriteString(`,"discrepancies":[`)
		first := true
		err = job.Discrepancies(ctx, rep.RunID, func(d reconcile.Discrepancy) error {
			if !first {
				_ = w.WriteByte(',')
			}
			first = false
			row, _ := json.Marshal(d)
			_, werr := w.Write(row)
			return werr
		})
		_, _ = w.WriteString("]}\n")
	}
	return errors.Join(err, w.Flush(), f.Close())
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

// billCheckEvery is how often serve looks for a daily bill to run: a failed run is tried again
// at the next look.
const billCheckEvery = 10 * time.Minute

// dailyBills runs yesterday's bill of every channel with outbound credentials once it is past
// reconcile.bill_at in that channel's time (Beijing time for the Chinese channels,
// reconcile.stripe_timezone for Stripe), under the bill lease (reconcile.BillLease, the one
// `paygw reconcile bill` takes too).
type dailyBills struct {
	db           *repository.DB
	job          *reconcile.Job
	ds           []channels.BillDownloader
	holder       string
	hour, minute int
	stripeDay    *time.Location
	grace        time.Duration
	ids          config.Channels
	log          zerolog.Logger
}

// serveDailyBills looks every billCheckEvery, and at start: a day with a complete run of the
// channel's bill is done; any other (none yet, or one that failed) is run, and a failure is
// logged and tried again at the next look.
func serveDailyBills(ctx context.Context, cfg *config.Config, db *repository.DB, applier reconcile.Applier, ds []channels.BillDownloader, holder string, met *metrics.Metrics, log zerolog.Logger) {
	hour, minute, _ := cfg.Reconcile.BillAtClock() // validated
	stripeDay, _ := time.LoadLocation(cfg.Reconcile.StripeTimezone)
	job := reconcile.New(db, applier, nil, reconcileConfig(cfg), log)
	job.Metrics = met
	d := dailyBills{db: db, job: job, ds: ds, holder: holder, hour: hour, minute: minute, stripeDay: stripeDay,
		grace: cfg.Reconcile.LocalOnlyGrace, ids: cfg.Channels, log: log}
	t := time.NewTicker(billCheckEvery)
	defer t.Stop()
	for {
		d.once(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// once is one look: the bills due at now that have no complete run, run under the lease.
func (b dailyBills) once(ctx context.Context, now time.Time) {
	type due struct {
		d   channels.BillDownloader
		day time.Time
	}
	var todo []due
	for _, d := range b.ds {
		loc := bills.DayZone(d.Name(), b.stripeDay)
		local := now.In(loc)
		y, m, dd := local.Date()
		if local.Before(time.Date(y, m, dd, b.hour, b.minute, 0, 0, loc)) {
			continue
		}
		day := time.Date(y, m, dd-1, 0, 0, 0, 0, loc)
		if done, err := b.done(ctx, d.Name(), day); done || err != nil {
			if err != nil {
				b.log.Warn().Err(err).Str("channel", d.Name()).Msg("reconcile bill: reading the day's run")
			}
			continue
		}
		todo = append(todo, due{d, day})
	}
	if len(todo) == 0 {
		return
	}
	ctx, release, err := b.job.HoldBillLease(ctx, b.holder)
	if err != nil {
		var held *reconcile.LeaseHeldError
		if !errors.As(err, &held) {
			b.log.Warn().Err(err).Msg("reconcile bill: the lease")
		}
		return // another replica or a `paygw reconcile bill` runs, or the database is away: next look
	}
	defer release()
	for _, t := range todo {
		if ctx.Err() != nil {
			return
		}
		// Another replica may have completed it between the look and the lease.
		if done, err := b.done(ctx, t.d.Name(), t.day); done || err != nil {
			continue
		}
		rep, err := b.run(ctx, t.d, t.day)
		l := b.log.With().Str("channel", t.d.Name()).Str("bill_date", t.day.Format(time.DateOnly)).Logger()
		if err != nil {
			l.Warn().Err(err).Msg("reconcile bill: the daily run failed; tried again at the next look")
			continue
		}
		ev := l.Info()
		if !rep.Settled() || !rep.Trusted {
			ev = l.Warn()
		}
		ev.Int("lines", rep.Lines).Interface("counts", rep.Counts).Bool("trusted", rep.Trusted).Strs("untrusted", rep.Untrusted).
			Bool("settled", rep.Settled()).Msg("reconcile bill")
	}
}

// done reports whether channel's day has a complete run of the channel's own bill (trusted or
// not: an untrusted one waits for a person, not for another download).
func (b dailyBills) done(ctx context.Context, channel string, day time.Time) (bool, error) {
	_, err := b.db.RunOf(ctx, channel, repository.SourceChannel, day)
	if errors.Is(err, payment.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// run downloads d's bill of day and runs it.
func (b dailyBills) run(ctx context.Context, d channels.BillDownloader, day time.Time) (reconcile.BillReport, error) {
	f, err := d.DownloadBill(ctx, day)
	if err != nil {
		return reconcile.BillReport{}, err
	}
	defer f.Close()
	r, err := f.Open()
	if err != nil {
		return reconcile.BillReport{}, err
	}
	return b.job.MatchBill(ctx, d.Name(), day, r, reconcile.BillConfig{LocalOnlyGrace: b.grace, Location: day.Location(),
		Source: repository.SourceChannel, Downloaded: true, Identity: billIdentity(b.ids, d.Name())}, nil)
}

// openApplier opens what a one-shot command needs to apply events as serve does: MySQL, Redis
// bound to the database's identity, and the Applier. done closes them.
func openApplier(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*repository.DB, *apply.Applier, func(), error) {
	db, err := repository.Open(ctx, cfg.MySQL.DSN, 8)
	if err != nil {
		return nil, nil, nil, err
	}
	redis.SetLogger(guard.LibraryLogger(log))
	g := guard.New(guardOptions(cfg.Redis, nil), log)
	applier := apply.New(db, g, cfg.Idempotency.RedisTTL, log)
	g.Suspend()
	if err := identity.New(db, g, log.Level(zerolog.WarnLevel), applier.ForgetMarkers).Check(ctx); err != nil {
		log.Warn().Err(err).Msg("database identity unknown: redis markers off for this run")
	}
	return db, applier, func() { _ = g.Close(); _ = db.Close() }, nil
}
