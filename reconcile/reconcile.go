// Package reconcile finds payments whose notification never came: it asks each channel about
// the open attempts of orders the buyer was sent to pay, and applies what a verified answer says
// through the one apply path, so an answer and a late notification of the same payment apply
// once between them. A channel's close ends its attempt only; apply closes the order once none of
// its attempts is open, or once the open ones are past reconcile.query_max_age (closeStale).
// It matches the channels' daily bills against the books too (bill.go): serve's daily runs
// (daily.go) and `paygw reconcile bill` alike, one at a time under the bill lease.
package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Applier applies a verified event exactly once, and sweeps refunds stranded as PENDING beside
// their applied payment (apply.Applier).
type Applier interface {
	Apply(ctx context.Context, ev payment.Event) (payment.Outcome, error)
	SettleStranded(ctx context.Context) (int, error)
}

// Config is the reconcile block.
type Config struct {
	QueryAfter  time.Duration // first query once an attempt is this old
	QueryMaxAge time.Duration // stop asking after this
	QPS         int           // per channel, outbound
}

// Answers a run tallies besides the channels' own states.
const (
	answerFailed     = "FAILED"     // the channel could not be asked
	answerUnverified = "UNVERIFIED" // its response did not verify or did not parse
)

// Job asks the channels.
type Job struct {
	db       *repository.DB
	applier  Applier
	queriers map[string]channels.Querier
	cfg      Config
	log      zerolog.Logger
	now      func() time.Time

	// Metrics counts queries, discrepancies and completed runs; nil counts nothing. Set before use.
	Metrics *metrics.Metrics
}

// New builds the job over the queriers of the channels that can query.
func New(db *repository.DB, a Applier, qs []channels.Querier, cfg Config, log zerolog.Logger) *Job {
	m := make(map[string]channels.Querier, len(qs))
	for _, q := range qs {
		m[q.Name()] = q
	}
	return &Job{db: db, applier: a, queriers: m, cfg: cfg, log: log, now: time.Now}
}

// Options narrow one run; zero values take the configuration's.
type Options struct {
	Channel   string
	TradeNo   string        // ask about this order now, whatever its backoff
	OlderThan time.Duration // ask about attempts older than this (default QueryAfter)
	MaxAge    time.Duration // and younger than this (default QueryMaxAge)
	DryRun    bool          // ask, print, change nothing
	Out       io.Writer     // one line per order asked, then the summary; nil for none
}

// Summary counts a run's answers.
type Summary struct {
	Asked, Paid, Refunded, Closed, NotPaid, Failed, Unverified int
	Applied                                                    int // events that changed something (not REPEAT)
	// Stale counts the attempts given up on: past query_max_age, of orders another channel
	// closed (closeStale).
	Stale int
}

func (s Summary) String() string {
	out := fmt.Sprintf("asked %d: paid %d, paid and refunded %d, closed %d, not paid %d, failed %d, unverified %d; %d event(s) applied",
		s.Asked, s.Paid, s.Refunded, s.Closed, s.NotPaid, s.Failed, s.Unverified, s.Applied)
	if s.Stale > 0 {
		out += fmt.Sprintf("; %d attempt(s) past query_max_age closed", s.Stale)
	}
	return out
}

// maxPerRun bounds one run; the rest wait for the next.
const maxPerRun = 1000

// concurrency bounds the questions in flight per channel.
const concurrency = 4

// Run asks about every due attempt once. An error means the run could not happen (the database
// did not answer); what a channel answered or failed to answer is in the summary.
func (j *Job) Run(ctx context.Context, o Options) (Summary, error) {
	if o.OlderThan == 0 && o.TradeNo == "" {
		o.OlderThan = j.cfg.QueryAfter
	}
	if o.MaxAge == 0 {
		o.MaxAge = j.cfg.QueryMaxAge
	}
	if o.Channel != "" && j.queriers[o.Channel] == nil {
		return Summary{}, fmt.Errorf("channel %q cannot be asked: not enabled, or its outbound credentials are missing", o.Channel)
	}
	if !o.DryRun {
		if n, err := j.applier.SettleStranded(ctx); err != nil {
			return Summary{}, err
		} else if n > 0 {
			j.log.Info().Int("payments", n).Msg("counted in refunds left pending beside their applied payment")
		}
	}
	now := j.now().UTC()
	from, to := now.Add(-o.MaxAge), now.Add(-o.OlderThan)
	for name := range j.queriers {
		if o.Channel == "" || o.Channel == name {
			if _, err := j.db.SeedAttempts(ctx, name, from, to); err != nil {
				return Summary{}, err
			}
		}
	}
	due, err := j.db.DueAttempts(ctx, repository.AttemptFilter{From: from, To: to, Now: now, AnyTime: o.TradeNo != "",
		Channel: o.Channel, TradeNo: o.TradeNo, Limit: maxPerRun})
	if err != nil {
		return Summary{}, err
	}

	var mu sync.Mutex // guards sum, answered and the output
	var sum Summary
	answered := map[string]int{} // verified answers by channel
	byChannel := map[string][]repository.DueAttempt{}
	for _, a := range due {
		if j.queriers[a.Channel] != nil { // an attempt on a channel that cannot be asked waits
			byChannel[a.Channel] = append(byChannel[a.Channel], a)
		}
	}
	var wg sync.WaitGroup
	for name, list := range byChannel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.askAll(ctx, j.queriers[name], list, o, func(a repository.DueAttempt, r result) {
				mu.Lock()
				defer mu.Unlock()
				sum.add(r)
				if r.err == nil {
					answered[a.Channel]++
				}
				if o.Out != nil {
					fmt.Fprintf(o.Out, "%s %s %s: %s\n", a.TradeNo, a.Channel, r.answerText(), r.action(o.DryRun))
				}
			})
		}()
	}
	wg.Wait()
	if err := j.closeStale(ctx, o, from, &sum); err != nil {
		return sum, err
	}
	if err := ctx.Err(); err != nil {
		return sum, err
	}
	if err := j.recordSuccess(ctx, o, byChannel, answered); err != nil {
		return sum, err
	}
	if o.Out != nil {
		fmt.Fprintln(o.Out, sum)
	}
	return sum, ctx.Err()
}

// recordSuccess stores, for each channel a full run covered (not a dry run, not one order), that
// the query succeeded: nothing was due, or at least one of its answers verified. A channel whose
// every answer failed has not succeeded, whatever the other channels did.
func (j *Job) recordSuccess(ctx context.Context, o Options, due map[string][]repository.DueAttempt, answered map[string]int) error {
	if o.DryRun || o.TradeNo != "" {
		return nil
	}
	now := j.now()
	for name := range j.queriers {
		if o.Channel != "" && o.Channel != name || len(due[name]) > 0 && answered[name] == 0 {
			continue
		}
		if err := j.db.RecordQuerySuccess(ctx, name, now); err != nil {
			return err
		}
	}
	return nil
}

// staleWindow bounds how far back closeStale looks, so that its scan stays small as attempts
// accumulate: an attempt that passed query_max_age more than this before any run saw it (the job
// stopped for a week) leaves its order WAIT_PAY, as every order was left before closeStale.
const staleWindow = 7 * 24 * time.Hour

// closeStale gives up on the open attempts that are asked no more (made before maxAgeFrom, that
// is more than query_max_age ago) of WAIT_PAY orders another channel has closed: each becomes
// a close event of its channel, applied like a channel's close, so the last one closes the order
// inside apply's transaction. Orders no channel closed keep their attempts open and stay
// WAIT_PAY, as before. A payment that comes later is PAID_AFTER_CLOSE.
func (j *Job) closeStale(ctx context.Context, o Options, maxAgeFrom time.Time, sum *Summary) error {
	stale, err := j.db.StaleAttempts(ctx, repository.StaleFilter{From: maxAgeFrom.Add(-staleWindow), To: maxAgeFrom,
		Channel: o.Channel, TradeNo: o.TradeNo, Limit: maxPerRun})
	if err != nil {
		return err
	}
	for _, a := range stale {
		if ctx.Err() != nil {
			return nil // Run reports ctx.Err()
		}
		action := "dry run: not closed"
		if !o.DryRun {
			outcome, err := j.applier.Apply(ctx, staleClose(a))
			if err != nil {
				action = "could not close: " + err.Error() // the next run tries again
				j.log.Warn().Err(err).Str("channel", a.Channel).Str("trade_no", a.TradeNo).Msg("closing an attempt past query_max_age")
			} else {
				action = "closed: " + string(outcome)
				sum.Stale++
				if outcome != payment.OutcomeRepeat {
					sum.Applied++
				}
			}
		}
		if o.Out != nil {
			fmt.Fprintf(o.Out, "%s %s past query_max_age, another channel closed: %s\n", a.TradeNo, a.Channel, action)
		}
	}
	return nil
}

// staleClose is the close event that gives up on attempt a: of a's channel, naming its
// channel_ref (so it closes a, see repository.CloseAttempts), journalled with source query and
// a notify id of its own per attempt.
func staleClose(a repository.DueAttempt) payment.Event {
	id := "query:max-age:" + a.TradeNo
	if a.ChannelRef != "" {
		id += ":" + a.ChannelRef
	}
	if len(id) > maxNotifyID {
		sum := sha256.Sum256([]byte(a.TradeNo + "\x00" + a.ChannelRef))
		id = "query:max-age:" + hex.EncodeToString(sum[:16])
	}
	last := "never asked"
	if a.LastQueryAt != nil {
		last = fmt.Sprintf("last asked %s: %s", a.LastQueryAt.UTC().Format(time.RFC3339), a.LastAnswer)
	}
	return payment.Event{
		Channel: a.Channel, NotifyID: id, TradeNo: a.TradeNo, ChannelTxnID: a.ChannelRef, Kind: payment.KindClosed,
		Status: "QUERY_MAX_AGE", Source: payment.SourceQuery,
		Raw: []byte(fmt.Sprintf("attempt made %s, past reconcile.query_max_age after another channel closed the order; asked %d time(s), %s",
			a.CreatedTime.UTC().Format(time.RFC3339), a.QueryCount, last)),
	}
}

// maxNotifyID is the width of notify_journal.notify_id.
const maxNotifyID = 128

// askAll asks about one channel's attempts, at most QPS a second and concurrency at once.
func (j *Job) askAll(ctx context.Context, q channels.Querier, list []repository.DueAttempt, o Options, done func(repository.DueAttempt, result)) {
	qps := max(j.cfg.QPS, 1)
	tick := time.NewTicker(time.Second / time.Duration(qps))
	defer tick.Stop()
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for _, a := range list {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			done(a, j.ask(ctx, q, a, o.DryRun))
		}()
	}
	wg.Wait()
}

// result is what asking about one attempt gave.
type result struct {
	answer   channels.TradeAnswer
	err      error
	outcomes []payment.Outcome
	applyErr error
}

// ask asks about one attempt, applies what the answer says, and stores the answer with the
// attempt's next question time.
func (j *Job) ask(ctx context.Context, q channels.Querier, a repository.DueAttempt, dryRun bool) result {
	var r result
	r.answer, r.err = q.QueryTrade(ctx, channels.TradeQuery{TradeNo: a.TradeNo, ChannelRef: a.ChannelRef, OrderTime: a.OrderTime})
	j.Metrics.ReconcileQuery(a.Channel, r.answerText())
	if r.err != nil {
		j.log.Warn().Err(r.err).Str("channel", a.Channel).Str("trade_no", a.TradeNo).Msg("trade query")
	}
	if dryRun {
		return r
	}
	for _, ev := range r.answer.Events {
		ev.Source = payment.SourceQuery
		outcome, err := j.applier.Apply(ctx, ev)
		if err != nil {
			r.applyErr = err // asked again at the next run, as a notification would be redelivered
			break
		}
		r.outcomes = append(r.outcomes, outcome)
	}
	now := j.now().UTC()
	next := now.Add(backoff(a.QueryCount))
	if r.applyErr != nil {
		next = now // the answer is known; only applying it failed
	}
	if err := j.db.RecordQuery(ctx, a.Attempt, now, r.answerText(), r.statusText(), next); err != nil {
		j.log.Warn().Err(err).Str("trade_no", a.TradeNo).Msg("could not store the query's answer")
	}
	return r
}

func (r result) answerText() string {
	switch {
	case errors.Is(r.err, channels.ErrBadSignature), errors.Is(r.err, channels.ErrMalformed):
		return answerUnverified
	case r.err != nil:
		return answerFailed
	}
	return string(r.answer.State)
}

func (r result) statusText() string {
	if r.err != nil {
		return r.err.Error()
	}
	return r.answer.Status
}

// action says what was done, for the run's output.
func (r result) action(dryRun bool) string {
	switch {
	case r.err != nil:
		return "nothing changed (" + r.err.Error() + ")"
	case len(r.answer.Events) == 0:
		return "nothing to apply (" + r.answer.Status + ")"
	case dryRun:
		return fmt.Sprintf("dry run: %d event(s) not applied (%s)", len(r.answer.Events), r.answer.Status)
	case r.applyErr != nil:
		return fmt.Sprintf("applied %v, then could not apply the rest: %v", r.outcomes, r.applyErr)
	}
	return fmt.Sprintf("applied: %v (%s)", r.outcomes, r.answer.Status)
}

func (s *Summary) add(r result) {
	s.Asked++
	switch r.answerText() {
	case string(channels.TradePaid):
		s.Paid++
	case string(channels.TradeRefunded):
		s.Refunded++
	case string(channels.TradeClosed):
		s.Closed++
	case string(channels.TradeNotPaid):
		s.NotPaid++
	case answerUnverified:
		s.Unverified++
	default:
		s.Failed++
	}
	for _, o := range r.outcomes {
		if o != payment.OutcomeRepeat {
			s.Applied++
		}
	}
}

// backoff is the wait before asking about an attempt again after its n-th answer (n from 0):
// about 1m, 2m, 5m, 10m, 30m, 1h, then hourly.
func backoff(n int) time.Duration {
	steps := []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour}
	if n < len(steps) {
		return steps[n]
	}
	return time.Hour
}

// The recon_job label of paygw_reconcile_last_success_timestamp_seconds.
const (
	JobQuery = metrics.JobQuery
	JobBill  = metrics.JobBill
)

// Serve runs the job every interval until ctx ends, on whichever replica holds the lease
// (lease.ReconcileQuery): taken with an expiry of two intervals, so a replica that dies hands over
// within two intervals. Two runs that overlap anyway stay harmless: Apply decides.
func (j *Job) Serve(ctx context.Context, every time.Duration, holder string) {
	defer func() { _ = j.db.ReleaseLease(context.WithoutCancel(ctx), lease.ReconcileQuery, holder) }()
	lease.Every(ctx, every, false, func(ctx context.Context) {
		ok, err := j.db.TakeLease(ctx, lease.ReconcileQuery, holder, 2*every)
		if err != nil || !ok {
			return // another replica runs it, or the database is away: next tick
		}
		j.serveOnce(ctx)
	})
}

// serveOnce is one run of serve's: logged, and counted when it succeeds.
func (j *Job) serveOnce(ctx context.Context) {
	sum, err := j.Run(ctx, Options{})
	if err != nil && ctx.Err() == nil {
		j.log.Warn().Err(err).Msg("reconcile query run")
		return
	}
	if sum.Asked > 0 || sum.Stale > 0 {
		j.log.Info().Int("asked", sum.Asked).Int("paid", sum.Paid).Int("refunded", sum.Refunded).Int("closed", sum.Closed).
			Int("not_paid", sum.NotPaid).Int("failed", sum.Failed).Int("unverified", sum.Unverified).Int("applied", sum.Applied).
			Int("stale", sum.Stale).Msg("reconcile query")
	}
}
