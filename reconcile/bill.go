package reconcile

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Classes of a bill run's lines (one discrepancy row each, but MATCHED and REFUND_MATCHED, which
// are only counted).
const (
	ClassMatched              = "MATCHED"
	ClassChannelOnly          = "CHANNEL_ONLY"
	ClassStatusMismatch       = "STATUS_MISMATCH"
	ClassAmountMismatch       = "AMOUNT_MISMATCH"
	ClassUnknownOrder         = "UNKNOWN_ORDER"
	ClassLocalOnly            = "LOCAL_ONLY"
	ClassPending              = "PENDING" // LOCAL_ONLY once the next day's bill lacks it too, or the grace passed
	ClassRefundMatched        = "REFUND_MATCHED"
	ClassRefundChannelOnly    = "REFUND_CHANNEL_ONLY"
	ClassRefundAmountMismatch = "REFUND_AMOUNT_MISMATCH"
	ClassSummaryMismatch      = "SUMMARY_MISMATCH"
	ClassBadLine              = "BAD_LINE"   // a line the reader could not read: counted, never matched
	ClassUnverified           = "UNVERIFIED" // an account, period, merchant or app the run could not check

	// A fee that disagrees with its line's net, the bill's summary or the channel's rate
	// (fees.go): stored, repairs nothing, leaves the bill trusted.
	ClassFeeMismatch = "FEE_MISMATCH"
)

// RepairUntrusted is the repair of a row whose repair was not made: the bill is untrusted.
const RepairUntrusted = "UNTRUSTED_BILL"

// BillConfig is the bill run's part of the reconcile block, and what the run knows of its bill.
type BillConfig struct {
	LocalOnlyGrace time.Duration  // a payment missing from its day's bill is LOCAL_ONLY after this (default 48h)
	Location       *time.Location // the channel's day

	// Source is where the lines came from: repository.SourceChannel (the default: the channel's
	// own bill) or repository.SourceCSV (paygw's generic format). A day has one result per source.
	Source string
	// Downloaded: the bill came over the channel's authenticated download, so it is the channel's
	// answer to our credentials even where Identity has nothing to check its header against.
	Downloaded bool
	// Identity is whom the channel's bills must name (see trust.go).
	Identity Identity
	// FeeRate is the channel's configured fee rate, which each payment line's fee is checked
	// against (see fees.go).
	FeeRate FeeRate
}

// BillReport is what a bill run found.
type BillReport struct {
	Channel  string         `json:"channel"`
	BillDate string         `json:"bill_date"`
	Source   string         `json:"source"`
	Lines    int            `json:"lines"`
	Counts   map[string]int `json:"counts"`
	// Trusted: the bill holds together (see trust.go). An untrusted run repaired nothing, and
	// Untrusted says why, one reason a line.
	Trusted   bool     `json:"trusted"`
	Untrusted []string `json:"untrusted,omitempty"`
	// SummaryMismatch says how the bill's own summary disagrees with its lines ("" when it agrees).
	SummaryMismatch string `json:"summary_mismatch,omitempty"`
	// RunID names the run whose rows (recon_discrepancy) hold the discrepancies: a run keeps
	// none in memory, whatever the bill's size. Unsettled counts those left for a person.
	RunID     int64    `json:"-"`
	Unsettled int      `json:"-"`
	BadLines  []string `json:"bad_lines,omitempty"`
	// Totals: per class and currency, the count and the amount of the lines.
	Totals []repository.ClassTotal `json:"totals"`
	// New counts the discrepancies no earlier run of the day found; Reopened says the day was
	// signed off and this run reopened it (a reconciliation.reopened event is written).
	New      int  `json:"new_discrepancies"`
	Reopened bool `json:"reopened,omitempty"`
}

// Discrepancy is one report row: a discrepancy of the day as the run lists it (see
// repository.ListDiscrepancies), with its stable ID and its Status; Found is false for one an
// earlier run found (and repaired, or a person resolved) that this run no longer finds.
type Discrepancy struct {
	ID             int64  `json:"id"`
	Status         string `json:"status"`
	Found          bool   `json:"found"`
	Class          string `json:"class"`
	TradeNo        string `json:"trade_no"`
	ChannelTxnID   string `json:"channel_txn_id"`
	BillAmountFen  *int64 `json:"bill_amount_fen"`
	LocalAmountFen *int64 `json:"local_amount_fen"`
	LocalStatus    string `json:"local_status"`
	Repair         string `json:"repair"`
	Currency       string `json:"currency,omitempty"`
}

// Settled reports whether nothing is left for a person: every line matched or was repaired
// (a CHANNEL_ONLY applied, a REFUND_CHANNEL_ONLY refunded). PENDING rows wait for tomorrow's bill.
func (r BillReport) Settled() bool { return r.Unsettled == 0 }

// settled is Settled for one row.
func settled(d Discrepancy) bool {
	switch {
	case d.Class == ClassPending:
	case d.Class == ClassChannelOnly && d.Repair == string(payment.OutcomeApplied):
	case d.Class == ClassRefundChannelOnly && d.Repair == string(payment.OutcomeRefunded):
	default:
		return false
	}
	return true
}

// stageBatch is how many lines one statement stages, and one query matches.
const stageBatch = 1000

// maxBadLinesReported bounds the bad lines a report quotes (all are counted).
const maxBadLinesReported = 100

// MatchBill reconciles one channel's day against the bill r reads, as a run of its own, all or
// nothing:
//   - a bill of another merchant or another day is refused before anything is kept: the error
//     is a *RefusedError naming the line and the field;
//   - any other error (an unreadable bill, the database) leaves the run failed with its error,
//     and nothing it staged; the day's previous complete run stays the day's result;
//   - a complete run is the day's result (per source), and, when its bill holds together, the
//     evidence other days' runs read. An untrusted bill's run is stored and reported but repairs
//     nothing (see trust.go).
//
// Repairs go through Apply, so running a day twice applies nothing twice; they start only once
// the whole bill is read and judged, so no reader error or refusal follows one. Repairs a run
// made before the database failed it stay: a trusted bill proved each. Call it under the bill
// lease (HoldBillLease): one run at a time.
func (j *Job) MatchBill(ctx context.Context, channel string, day time.Time, r bills.Reader, cfg BillConfig, progress func(lines int)) (BillReport, error) {
	loc := cfg.Location
	if loc == nil {
		loc = time.UTC
	}
	source := cfg.Source
	if source == "" {
		source = repository.SourceChannel
	}
	day = time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, loc)
	rep := BillReport{Channel: channel, BillDate: day.Format(time.DateOnly), Source: source, Counts: map[string]int{}, Trusted: true}

	// The header is read with the first line: a bill that names another merchant or another
	// period is refused before the run starts.
	first, firstErr := r.Next()
	t := newTrust(channel, source, day, cfg, r)
	if err := t.header(); err != nil {
		return rep, err
	}
	runID, err := j.db.StartRun(ctx, channel, source, day, j.now().UTC())
	if err != nil {
		return rep, err
	}
	rep.RunID = runID
	b := &billRun{j: j, ctx: ctx, runID: runID, channel: channel, source: source, day: day, rep: &rep, trust: t,
		fees: newFeeTally(cfg.FeeRate)}
	if err := b.run(r, first, firstErr, cfg.LocalOnlyGrace, progress); err != nil {
		// Nothing the run staged stays. The cleanup outlives a cancelled ctx.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		var refused *RefusedError
		var cerr error
		if errors.As(err, &refused) {
			cerr = j.db.DropRun(cleanup, runID)
		} else {
			cerr = j.db.FailRun(cleanup, runID, err.Error(), j.now().UTC())
		}
		if cerr != nil {
			j.log.Warn().Err(cerr).Int64("run", runID).Msg("reconcile bill: could not clear the run that failed; the next run of the day fails it")
		}
		rep.RunID = 0
		return rep, err
	}
	// The complete run is the stored state paygw_reconcile_discrepancies and the bill's last
	// success read at scrape time (repository.StoredState): nothing to count here.
	return rep, nil
}

// run stages the bill whose first Next gave l, err, classifies it and completes the run.
func (b *billRun) run(r bills.Reader, l bills.Line, err error, grace time.Duration, progress func(lines int)) error {
	// 1. Stage the bill, streaming; each line is judged against the run's day and merchant.
	if err := b.stage(r, l, err, progress); err != nil {
		return err
	}
	// 2. Whether the bill holds together: its own summary, and what could not be verified.
	if err := b.checkSummary(r.Summary()); err != nil {
		return err
	}
	if err := b.checkUnverified(); err != nil {
		return err
	}
	// The bill's own totals, and its fees (fees.go).
	if err := b.checkFees(r.Summary()); err != nil {
		return err
	}
	// 3. Payments, 4. refunds, 5. what we hold that the bill lacks.
	if err := b.payments(); err != nil {
		return err
	}
	if err := b.refunds(); err != nil {
		return err
	}
	if err := b.localOnly(grace); err != nil {
		return err
	}
	if err := b.flush(); err != nil {
		return err
	}
	return b.complete()
}

// stage stages the bill's lines, whose first Next gave l, err, a batch at a time: a bad line is
// counted and quoted, any other error ends the run.
func (b *billRun) stage(r bills.Reader, l bills.Line, err error, progress func(lines int)) error {
	rep := b.rep
	batch := make([]repository.BillLine, 0, stageBatch)
	for ; ; l, err = r.Next() {
		if errors.Is(err, io.EOF) {
			break
		}
		var bad *bills.LineError
		if errors.As(err, &bad) {
			rep.Counts[ClassBadLine]++
			if len(rep.BadLines) < maxBadLinesReported {
				rep.BadLines = append(rep.BadLines, bad.Error())
			}
			continue
		}
		if err != nil {
			return err
		}
		if err := b.trust.line(l); err != nil {
			return err
		}
		if err := b.feeLine(l); err != nil {
			return err
		}
		rep.Lines++
		batch = append(batch, repository.BillLine{No: l.No, Kind: string(l.Kind), TradeNo: l.TradeNo, ChannelTxnID: l.ChannelTxnID,
			RefundID: l.RefundID, AmountFen: l.AmountFen, Currency: l.Currency, Time: l.Time.UTC()})
		if len(batch) == stageBatch {
			if err := b.j.db.StageLines(b.ctx, b.runID, batch); err != nil {
				return err
			}
			batch = batch[:0]
			if progress != nil {
				progress(rep.Lines)
			}
		}
	}
	if err := b.j.db.StageLines(b.ctx, b.runID, batch); err != nil {
		return err
	}
	if progress != nil {
		progress(rep.Lines)
	}
	return nil
}

// complete stores the run's totals and makes it the day's result (repository.CompleteRunReport).
func (b *billRun) complete() error {
	rep := b.rep
	if n := rep.Counts[ClassBadLine]; n > 0 {
		b.total(ClassBadLine, "", 0, n)
	}
	rep.Totals = b.totals
	done, err := b.j.db.CompleteRunReport(b.ctx, b.runID, repository.RunTotals{Lines: rep.Lines, BadLines: rep.Counts[ClassBadLine],
		Trusted: rep.Trusted, Counts: rep.Counts, Totals: rep.Totals}, b.j.now().UTC())
	rep.New, rep.Reopened = done.New, done.Reopened
	if err == nil && done.Reopened {
		b.j.log.Warn().Str("channel", b.channel).Str("bill_date", rep.BillDate).Int64("run", b.runID).Int("new", done.New).
			Msg("reconcile bill: the run found something new in a signed-off day; the day is reopened")
	}
	return err
}

// total adds n lines of fen in currency to class's total.
func (b *billRun) total(class, currency string, fen int64, n int) {
	for i := range b.totals {
		if b.totals[i].Class == class && b.totals[i].Currency == currency {
			b.totals[i].Count += n
			b.totals[i].AmountFen += fen
			return
		}
	}
	b.totals = append(b.totals, repository.ClassTotal{Class: class, Currency: currency, Count: n, AmountFen: fen})
}

// billRun is one run's state while it classifies.
type billRun struct {
	j       *Job
	ctx     context.Context
	runID   int64
	channel string
	source  string
	day     time.Time
	rep     *BillReport
	trust   *trust
	fees    feeTally
	rows    []repository.Discrepancy // waiting for one multi-row insert
	totals  []repository.ClassTotal
}

// mayRepair reports whether the bill's lines may move money: only a trusted bill repairs
// (applies a payment, a refund, or records an anomaly).
func (b *billRun) mayRepair() bool { return b.rep.Trusted }

// record counts a line's class and, unless it only counts, stores its row (a batch at a time).
// line is the bill line of a CHANNEL_ONLY or REFUND_CHANNEL_ONLY (nil otherwise), kept with the
// row for accept_channel (BillEvent).
func (b *billRun) record(key string, d Discrepancy, detail string, line *BillLineRef) error {
	b.rep.Counts[d.Class]++
	amount := d.BillAmountFen
	if amount == nil {
		amount = d.LocalAmountFen
	}
	var fen int64
	if amount != nil {
		fen = *amount
	}
	b.total(d.Class, d.Currency, fen, 1)
	if d.Class == ClassMatched || d.Class == ClassRefundMatched {
		return nil
	}
	if !settled(d) {
		b.rep.Unsettled++
	}
	var stored sql.NullString
	if line != nil && (d.Class == ClassChannelOnly || d.Class == ClassRefundChannelOnly) {
		raw, _ := json.Marshal(line) // plain values: cannot fail
		stored = sql.NullString{String: string(raw), Valid: true}
	}
	b.rows = append(b.rows, repository.Discrepancy{
		RunID: b.runID, Channel: b.channel, BillDate: b.day, LineKey: key, Class: d.Class, TradeNo: d.TradeNo,
		ChannelTxnID: d.ChannelTxnID, BillAmountFen: nullInt(d.BillAmountFen), LocalAmountFen: nullInt(d.LocalAmountFen),
		Currency: d.Currency, LocalStatus: d.LocalStatus, Repair: d.Repair, Detail: detail, Line: stored,
	})
	if len(b.rows) < stageBatch {
		return nil
	}
	return b.flush()
}

func (b *billRun) flush() error {
	err := b.j.db.PutDiscrepancies(b.ctx, b.rows)
	b.rows = b.rows[:0]
	return err
}

// Discrepancies calls fn for each of a run's discrepancies, in id order, a page at a time: those
// it found, and those an earlier run of its day found that it no longer finds (repaired,
// resolved or gone), so a re-run's report still shows what the first run repaired.
func (j *Job) Discrepancies(ctx context.Context, runID int64, fn func(Discrepancy) error) error {
	return j.db.EachDiscrepancy(ctx, runID, "", func(r repository.DiscrepancyItem) error {
		return fn(Discrepancy{ID: r.ID, Status: r.Status, Found: r.Found, Class: r.Class, TradeNo: r.TradeNo, ChannelTxnID: r.ChannelTxnID,
			BillAmountFen: r.BillAmountFen, LocalAmountFen: r.LocalAmountFen, LocalStatus: r.LocalStatus, Repair: r.Repair,
			Currency: r.Currency})
	})
}

// checkSummary records the bill's own disagreement with its lines: the reader compares them in
// the format's own terms (which column each total adds up).
func (b *billRun) checkSummary(s bills.Summary) error {
	if !s.Present || s.Mismatch == "" {
		return nil
	}
	b.rep.Trusted = false
	b.rep.SummaryMismatch = s.Mismatch
	b.rep.Untrusted = append(b.rep.Untrusted, "the summary disagrees with the lines: "+s.Mismatch)
	return b.record("summary", Discrepancy{Class: ClassSummaryMismatch}, s.Mismatch, nil)
}

// checkUnverified records what the run could not verify of whose bill it is: one UNVERIFIED row
// per field, and the bill is untrusted.
func (b *billRun) checkUnverified() error {
	for _, u := range b.trust.unverified {
		b.rep.Trusted = false
		b.rep.Untrusted = append(b.rep.Untrusted, u.text())
		if err := b.record("unverified:"+u.field, Discrepancy{Class: ClassUnverified}, u.text(), nil); err != nil {
			return err
		}
	}
	return nil
}

// payments classifies the bill's payment lines, repairing through Apply what the bill proves.
func (b *billRun) payments() error {
	for after := 0; ; {
		rows, err := b.j.db.PayMatches(b.ctx, b.runID, b.channel, after, stageBatch)
		if err != nil || len(rows) == 0 {
			return err
		}
		for _, m := range rows {
			after = m.No
			bill := m.AmountFen
			d := Discrepancy{TradeNo: m.TradeNo, ChannelTxnID: m.ChannelTxnID, BillAmountFen: &bill,
				LocalAmountFen: ptr(m.OrderAmount), LocalStatus: m.OrderStatus.String, Currency: m.Currency}
			key := "pay:" + m.ChannelTxnID
			switch {
			case m.ByTxn && m.OrderAmount.Int64 == bill && m.OrderCur.String == m.Currency:
				d.Class = ClassMatched
			case m.ByTxn:
				d.Class, d.TradeNo = ClassAmountMismatch, m.OrderTradeNo.String
				if d.Repair, err = b.flagAmount(m); err != nil {
					return err
				}
			case !m.OrderStatus.Valid:
				d.Class = ClassUnknownOrder
			default:
				d.Class = ClassStatusMismatch
				if m.OrderStatus.String == payment.OrderWaitPay {
					d.Class = ClassChannelOnly
				}
				if d.Repair, err = b.repairPayment(m.BillLine); err != nil {
					return err
				}
			}
			if err := b.record(key, d, "", &BillLineRef{BillLine: m.BillLine}); err != nil {
				return err
			}
		}
	}
}

// repairPayment applies a payment the bill proves, as its notification would have: Apply
// decides (APPLIED, or PAID_AFTER_CLOSE / DUPLICATE_PAYMENT / AMOUNT_MISMATCH recorded as
// anomalies). Its outcome is the row's repair; a failure is stored as the repair too, and the
// next run tries again.
func (b *billRun) repairPayment(l repository.BillLine) (string, error) {
	if !b.mayRepair() {
		return RepairUntrusted, nil
	}
	outcome, err := b.j.applier.Apply(b.ctx, BillEvent(b.channel, BillLineRef{BillLine: l}))
	if err != nil {
		return "FAILED: " + err.Error(), nil
	}
	return string(outcome), nil
}

// flagAmount records, as an anomaly, a payment whose bill amount differs from what we applied;
// its result is the row's repair ("" when recorded).
func (b *billRun) flagAmount(m repository.PayMatch) (string, error) {
	if !b.mayRepair() {
		return RepairUntrusted, nil
	}
	expected := m.OrderAmount.Int64
	an := payment.Anomaly{Kind: payment.OutcomeAmountMismatch, TradeNo: m.OrderTradeNo.String, Channel: b.channel,
		ChannelTxnID: m.ChannelTxnID, AmountFen: m.AmountFen, Currency: m.Currency, ExpectedAmountFen: &expected,
		Detail: fmt.Sprintf("the %s bill of %s says %d %s for this payment; paygw applied %d %s",
			b.channel, b.day.Format(time.DateOnly), m.AmountFen, m.Currency, expected, m.OrderCur.String),
		CreatedTime: b.j.now().UTC().Truncate(time.Millisecond)}
	return "", b.j.db.InTx(b.ctx, func(tx *repository.Tx) error { return tx.FlagAnomaly(b.ctx, an) })
}

// refunds classifies the bill's refund lines against the refund ledger. A line names its refund
// by the channel's id, or, when the bill gives none, by its place in the day's bill: the n-th
// id-less line of its payment and amount (two equal lines are two refunds), a key that a re-run
// of the day gives again. Such a line stands for the ledger's refund it matched before, else for
// one of the payment's refunds of that amount that no bill line has stated yet. Every line a
// trusted bill matches leaves its key on the ledger's row (bill_key; "bill:id:<id>" for a line
// with an id), so no other line can be taken for the same refund. The lines with ids go first,
// so an id-less line never claims a refund the same bill names.
func (b *billRun) refunds() error {
	if err := b.refundLines(true); err != nil {
		return err
	}
	return b.refundLines(false)
}

// refundLines classifies the refund lines with an id (named) or those without.
func (b *billRun) refundLines(named bool) error {
	seen := map[string]int{} // id-less lines so far, per payment and amount
	for after := 0; ; {
		rows, err := b.j.db.RefundLines(b.ctx, b.runID, after, stageBatch)
		if err != nil || len(rows) == 0 {
			return err
		}
		for _, l := range rows {
			after = l.No
			if (l.RefundID != "") != named {
				continue
			}
			bill := l.AmountFen
			d := Discrepancy{TradeNo: l.TradeNo, ChannelTxnID: l.ChannelTxnID, BillAmountFen: &bill, Currency: l.Currency}
			key, billKey := "refund:"+l.ChannelTxnID+":"+l.RefundID, "bill:id:"+l.RefundID
			if l.RefundID == "" {
				same := fmt.Sprintf("%s:%d", l.ChannelTxnID, l.AmountFen)
				seen[same]++
				billKey = fmt.Sprintf("bill:%s:%s:%d", b.day.Format(time.DateOnly), same, seen[same])
				key = "refund:" + billKey
			}
			f, err := b.ledgerRefund(l, billKey)
			switch {
			case err == nil && f.AmountFen == nil: // known by its id; the bill states its amount
				d.Class, d.LocalStatus = ClassRefundMatched, f.Status
				d.Repair = b.repairRefund(l, billKey)
			case err == nil && *f.AmountFen == l.AmountFen:
				d.Class, d.LocalStatus = ClassRefundMatched, f.Status
				if err := b.markBilled(f, billKey); err != nil {
					return err
				}
			case err == nil:
				d.Class, d.LocalAmountFen, d.LocalStatus = ClassRefundAmountMismatch, f.AmountFen, f.Status
			case errors.Is(err, payment.ErrNotFound):
				d.Class = ClassRefundChannelOnly
				d.Repair = b.repairRefund(l, billKey)
			default:
				return err
			}
			if err := b.record(key, d, "", &BillLineRef{BillLine: l, BillKey: billKey}); err != nil {
				return err
			}
		}
	}
}

// ledgerRefund finds the ledger's refund a bill line stands for: by its id, or for an id-less
// line (billKey) the one it matched before, else one it can claim (a trusted bill only).
// payment.ErrNotFound if none.
func (b *billRun) ledgerRefund(l repository.BillLine, billKey string) (payment.Refund, error) {
	if l.RefundID != "" {
		return b.j.db.RefundByID(b.ctx, b.channel, l.RefundID)
	}
	f, err := b.j.db.RefundByBillKey(b.ctx, b.channel, billKey)
	if !errors.Is(err, payment.ErrNotFound) {
		return f, err
	}
	if !b.mayRepair() { // claiming writes the line's key on the refund: evidence an untrusted bill is not
		return payment.Refund{}, payment.ErrNotFound
	}
	f, ok, err := b.j.db.ClaimRefund(b.ctx, b.channel, l.ChannelTxnID, l.AmountFen, billKey)
	if err == nil && !ok {
		err = payment.ErrNotFound
	}
	return f, err
}

// markBilled leaves a trusted bill's line key on the refund it matched by id.
func (b *billRun) markBilled(f payment.Refund, billKey string) error {
	if f.BillKey != "" || !b.mayRepair() {
		return nil
	}
	return b.j.db.MarkBilled(b.ctx, f.ID, billKey)
}

// repairRefund puts a refund the bill proves into the ledger through the refund path: under its
// id, or under its line's key when the bill names none.
func (b *billRun) repairRefund(l repository.BillLine, billKey string) string {
	if !b.mayRepair() {
		return RepairUntrusted
	}
	outcome, err := b.j.applier.Apply(b.ctx, BillEvent(b.channel, BillLineRef{BillLine: l, BillKey: billKey}))
	if err != nil {
		return "FAILED: " + err.Error()
	}
	return string(outcome)
}

// localOnly finds what this channel paid us inside the bill's day that neither this bill nor
// its neighbour days' evidence (their latest complete, trusted runs) shows: orders paid near
// midnight may sit in the next day's bill. Such a payment is LOCAL_ONLY once the next day's bill
// is in and lacks it too, or once grace has passed since the day ended; PENDING until then.
// The previous day's PENDING rows are settled when this run completes (CompleteRun).
func (b *billRun) localOnly(grace time.Duration) error {
	if grace <= 0 {
		grace = 48 * time.Hour
	}
	from, to := b.day, b.day.AddDate(0, 0, 1)
	runs := []int64{b.runID}
	nextIn := false
	for _, d := range []time.Time{b.day.AddDate(0, 0, -1), to} {
		r, err := b.j.db.EvidenceRun(b.ctx, b.channel, b.source, d)
		if errors.Is(err, payment.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		runs = append(runs, r.ID)
		nextIn = nextIn || d.Equal(to)
	}
	final := nextIn || b.j.now().After(to.Add(grace))
	for after := int64(0); ; {
		rows, err := b.j.db.LocalOnly(b.ctx, b.channel, from.UTC(), to.UTC(), runs, after, stageBatch)
		if err != nil || len(rows) == 0 {
			return err
		}
		for _, p := range rows {
			after = p.ID
			local := p.AmountFen
			d := Discrepancy{Class: ClassPending, TradeNo: p.TradeNo, ChannelTxnID: p.ChannelTxnID, LocalAmountFen: &local, LocalStatus: payment.OrderPaid,
				Currency: p.Currency}
			if final {
				d.Class = ClassLocalOnly
			}
			if err := b.record("local:"+p.ChannelTxnID, d, "paid at "+p.PaidTime.UTC().Format(time.RFC3339), nil); err != nil {
				return err
			}
		}
	}
}

func ptr(v sql.NullInt64) *int64 {
	if !v.Valid {
		return nil
	}
	return &v.Int64
}

func nullInt(p *int64) sql.NullInt64 {
	if p == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: *p, Valid: true}
}
