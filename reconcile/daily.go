package reconcile

import (
	"context"
	"errors"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// BillCheckEvery is how often serve looks for a daily bill to run: a failed run is tried again
// at the next look.
const BillCheckEvery = 10 * time.Minute

// DailyConfig is when serve runs yesterday's bills, and how.
type DailyConfig struct {
	Hour, Minute   int                                 // reconcile.bill_at, in each channel's own time
	Zone           func(channel string) *time.Location // the zone of channel's day
	LocalOnlyGrace time.Duration
	Identities     map[string]Identity // whom each channel's bills must name
	FeeRates       map[string]FeeRate  // each channel's fee rate, when it configures one
	Holder         string              // this replica in the bill lease
}

// DailyBills runs yesterday's bill of every channel it can download once it is past bill_at in
// that channel's time, under the bill lease (the one `paygw reconcile bill` takes too).
type DailyBills struct {
	job *Job
	ds  []channels.BillDownloader
	cfg DailyConfig
}

// DailyBills builds the daily bill runs of the channels ds download.
func (j *Job) DailyBills(ds []channels.BillDownloader, cfg DailyConfig) *DailyBills {
	return &DailyBills{job: j, ds: ds, cfg: cfg}
}

// Serve looks at start and every BillCheckEvery until ctx ends: a day with a complete run of the
// channel's bill is done; any other (none yet, or one that failed) is run, and a failure is logged
// and tried again at the next look.
func (b *DailyBills) Serve(ctx context.Context) {
	lease.Every(ctx, BillCheckEvery, true, func(ctx context.Context) { b.Once(ctx, time.Now()) })
}

// due is a channel's bill day to run.
type due struct {
	d   channels.BillDownloader
	day time.Time
}

// Once is one look at now: the bills due that have no complete run, run under the lease.
func (b *DailyBills) Once(ctx context.Context, now time.Time) {
	todo := b.due(ctx, now)
	if len(todo) == 0 {
		return
	}
	log := b.job.log
	ctx, release, err := b.job.HoldBillLease(ctx, b.cfg.Holder)
	if err != nil {
		var held *lease.HeldError
		if !errors.As(err, &held) {
			log.Warn().Err(err).Msg("reconcile bill: the lease")
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
		l := log.With().Str("channel", t.d.Name()).Str("bill_date", t.day.Format(time.DateOnly)).Logger()
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

// due lists the channels past bill_at at now whose yesterday has no complete run.
func (b *DailyBills) due(ctx context.Context, now time.Time) []due {
	var todo []due
	for _, d := range b.ds {
		loc := b.cfg.Zone(d.Name())
		local := now.In(loc)
		y, m, dd := local.Date()
		if local.Before(time.Date(y, m, dd, b.cfg.Hour, b.cfg.Minute, 0, 0, loc)) {
			continue
		}
		day := time.Date(y, m, dd-1, 0, 0, 0, 0, loc)
		if done, err := b.done(ctx, d.Name(), day); done || err != nil {
			if err != nil {
				b.job.log.Warn().Err(err).Str("channel", d.Name()).Msg("reconcile bill: reading the day's run")
			}
			continue
		}
		todo = append(todo, due{d, day})
	}
	return todo
}

// done reports whether channel's day has a complete run of the channel's own bill (trusted or
// not: an untrusted one waits for a person, not for another download).
func (b *DailyBills) done(ctx context.Context, channel string, day time.Time) (bool, error) {
	_, err := b.job.db.RunOf(ctx, channel, repository.SourceChannel, day)
	if errors.Is(err, payment.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// run downloads d's bill of day and runs it.
func (b *DailyBills) run(ctx context.Context, d channels.BillDownloader, day time.Time) (BillReport, error) {
	f, err := d.DownloadBill(ctx, day)
	if err != nil {
		return BillReport{}, err
	}
	defer f.Close()
	r, err := f.Open()
	if err != nil {
		return BillReport{}, err
	}
	return b.job.MatchBill(ctx, d.Name(), day, r, BillConfig{LocalOnlyGrace: b.cfg.LocalOnlyGrace, Location: day.Location(),
		Source: repository.SourceChannel, Downloaded: true, Identity: b.cfg.Identities[d.Name()], FeeRate: b.cfg.FeeRates[d.Name()]}, nil)
}
