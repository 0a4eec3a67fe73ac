package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/repository"
)

// A bill moves money only on evidence that holds together. A `--file` bill carries no signature:
// its lines are evidence, and the run judges them before any repair.
//
// Refused (MatchBill returns a *RefusedError; nothing of the run is kept): the bill is not the
// run's, because it names another merchant or another day:
//   - its header names another account: Alipay's #账号 against channels.alipay.seller_id;
//   - its header names another period: Alipay's #起始日期/终止日期 against the channel day;
//   - a line names another merchant or app: WeChat's 商户号 and 公众账号ID against mch_id and
//     app_id/app_ids, UnionPay's 商户代码 against mer_id;
//   - a line is dated outside the channel day by more than its channel's tolerance (lineWindow).
//
// Untrusted (the run completes, is stored and reported with every discrepancy, and repairs
// nothing: no apply, no refund, no anomaly; its lines are not evidence for any other day): the
// bill may be the run's but does not hold together, or cannot be tied to the merchant:
//   - its own summary disagrees with its lines (SUMMARY_MISMATCH);
//   - it names an account, merchant or app the configuration gives nothing to check against
//     (Alipay without channels.alipay.seller_id), and it did not come over the channel's own
//     authenticated download (a downloaded bill is the channel's answer to our credentials);
//   - its format states an account, period, merchant or app and this bill leaves it out or
//     states it unreadably (UNVERIFIED).
//
// Neither: a bill whose fees disagree (with its lines' nets, its summary's fee total, or the
// channel's rate) is FEE_MISMATCH (fees.go) and stays trusted. Fees move no money in paygw; the
// payments and refunds a bill repairs are proved by their amounts, which the summary check covers.
//
// Formats that name no merchant and no period (Stripe's report, paygw's generic CSV) are checked
// by their lines' dates alone.

// RefusedError is a bill that is not the run's: another merchant's or another day's. Nothing of
// the run is kept. Line and Field say where the bill shows it (Line 0: the bill as a whole).
type RefusedError struct {
	Line   int
	Field  string
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("line %d: %s: %s; the bill is refused and nothing was written", e.Line, e.Field, e.Reason)
}

// Identity is whom a channel's bills must name, as the configuration says. An empty field gives
// nothing to check against.
type Identity struct {
	Account  string   // Alipay: the partner id (channels.alipay.seller_id); #账号 is it and a 4-digit suffix
	Merchant string   // WeChat Pay's 商户号 (mch_id), UnionPay's 商户代码 (mer_id)
	AppIDs   []string // WeChat Pay's 公众账号ID (app_id and app_ids)
}

// slack is how far outside its channel day a line of any channel may be dated. The channels cut
// their bills at midnight of their own clock and stamp the lines by that clock, so a line outside
// the day is a boundary stamp (a line at 终止日期 00:00:00 itself) or a clock's slack: 15 minutes
// takes those, and is far below the day that tells another day's bill.
const slack = 15 * time.Minute

// lineWindow is how far before and after its channel day [day, day+1) a bill line may be dated:
//   - every channel and paygw's generic CSV: slack either side;
//   - WeChat Pay's own bill, refunds: up to 366 days before, as a REFUND row of its trade bill
//     may be dated by the payment it undoes, which WeChat refunds up to a year later;
//   - UnionPay's own bill: an hour more before the day, as the ZM file is a settlement day that
//     UnionPay cuts at 23:00 Beijing time the evening before.
func lineWindow(channel, source string, kind bills.Kind) (before, after time.Duration) {
	if source != repository.SourceChannel {
		return slack, slack
	}
	switch {
	case channel == "wechatpay" && kind == bills.KindRefund:
		return 366 * 24 * time.Hour, slack
	case channel == "unionpay":
		return time.Hour + slack, slack
	}
	return slack, slack
}

// trust judges one bill against the run: refusals as it reads, and what it could not verify.
type trust struct {
	channel, source string
	day             time.Time // the channel day's start
	cfg             BillConfig
	head            bills.Header
	unverified      []unverified // in the order first seen, one per field
}

// unverified is a field of the bill the run could not check: the first line that showed it and
// how many did.
type unverified struct {
	field, reason string
	line, n       int
}

func newTrust(channel, source string, day time.Time, cfg BillConfig, r bills.Reader) *trust {
	t := &trust{channel: channel, source: source, day: day, cfg: cfg, head: bills.Header{TimeField: "time"}}
	if h, ok := r.(bills.Headed); ok {
		t.head = h.Header()
	}
	return t
}

func (t *trust) refuse(line int, field, format string, args ...any) error {
	return &RefusedError{Line: line, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// unverify notes that field could not be checked at line (counted once per field).
func (t *trust) unverify(line int, field, format string, args ...any) {
	for i := range t.unverified {
		if t.unverified[i].field == field {
			t.unverified[i].n++
			return
		}
	}
	t.unverified = append(t.unverified, unverified{field: field, reason: fmt.Sprintf(format, args...), line: line, n: 1})
}

// dayText names the channel day in messages.
func (t *trust) dayText() string {
	return fmt.Sprintf("the %s day %s (%s)", t.channel, t.day.Format(time.DateOnly), t.day.Location())
}

// header judges what the bill states before its lines (valid once Next has been called).
func (t *trust) header() error {
	h := t.head
	if !h.Stated {
		return nil
	}
	switch want := t.cfg.Identity.Account; {
	case h.AccountLine == 0:
		t.unverify(0, "#账号", "the bill states no #账号 line")
	case h.Account == "":
		t.unverify(h.AccountLine, "#账号", "line %d: #账号 unreadable", h.AccountLine)
	case want == "" && !t.cfg.Downloaded:
		t.unverify(h.AccountLine, "#账号", "line %d: #账号 [%s] not checked: channels.alipay.seller_id is not set", h.AccountLine, h.Account)
	case want != "" && !alipayAccountOf(h.Account, want):
		return t.refuse(h.AccountLine, "#账号", "[%s] is not the configured account (channels.alipay.seller_id %s and its 4-digit suffix)", h.Account, want)
	}
	from, to := t.day, t.day.AddDate(0, 0, 1)
	switch {
	case h.PeriodLine == 0:
		t.unverify(0, "#起始日期", "the bill states no #起始日期/终止日期 line")
	case h.From.IsZero():
		t.unverify(h.PeriodLine, "#起始日期", "line %d: #起始日期/终止日期 unreadable", h.PeriodLine)
	case !h.From.Equal(from) || !h.To.Equal(to):
		const layout = "2006-01-02 15:04"
		return t.refuse(h.PeriodLine, "#起始日期", "the bill covers %s to %s, not %s", h.From.In(t.day.Location()).Format(layout),
			h.To.In(t.day.Location()).Format(layout), t.dayText())
	}
	return nil
}

// alipayAccountOf reports whether Alipay's #账号 is the partner id's: the id itself, or the id
// and its 4-digit account suffix (0156 for the merchant's Alipay balance).
func alipayAccountOf(account, pid string) bool {
	suffix, ok := strings.CutPrefix(account, pid)
	if !ok || (suffix != "" && len(suffix) != 4) {
		return false
	}
	for _, c := range suffix {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// line judges one line: its date against the channel day, and whose it says it is.
func (t *trust) line(l bills.Line) error {
	before, after := lineWindow(t.channel, t.source, l.Kind)
	from, to := t.day.Add(-before), t.day.AddDate(0, 0, 1).Add(after)
	if l.Time.Before(from) || !l.Time.Before(to) {
		return t.refuse(l.No, t.head.TimeField, "%s is outside %s, even allowing %s before and %s after it",
			l.Time.In(t.day.Location()).Format(time.DateTime), t.dayText(), span(before), span(after))
	}
	h, id := t.head, t.cfg.Identity
	if h.MerchantField != "" {
		if err := t.identity(l.No, h.MerchantField, l.Merchant, id.Merchant != "", id.Merchant == l.Merchant, id.Merchant); err != nil {
			return err
		}
	}
	if h.AppIDField != "" {
		ok := slices.Contains(id.AppIDs, l.AppID)
		if err := t.identity(l.No, h.AppIDField, l.AppID, len(id.AppIDs) > 0, ok, strings.Join(id.AppIDs, ", ")); err != nil {
			return err
		}
	}
	return nil
}

// identity judges one identity field of a line: got is what the line states, known whether the
// configuration has something to check it against, ok whether it matches want.
func (t *trust) identity(no int, field, got string, known, ok bool, want string) error {
	switch {
	case got == "":
		t.unverify(no, field, "line %d: %s empty", no, field)
	case !known && !t.cfg.Downloaded:
		t.unverify(no, field, "line %d: %s %s not checked: the configuration names no %s", no, field, got, field)
	case known && !ok:
		return t.refuse(no, field, "%s is not the configured %s", got, want)
	}
	return nil
}

// span writes a tolerance for people: "15 min", "366 days".
func span(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return fmt.Sprintf("%d min", d/time.Minute)
}

// text says what could not be verified, in one sentence.
func (u unverified) text() string {
	if u.n > 1 {
		return fmt.Sprintf("%s (and %d more lines)", u.reason, u.n-1)
	}
	return u.reason
}
