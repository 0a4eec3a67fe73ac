package history

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/money"
)

// regressions are scripted histories, each run alone on the real gateway like any generated one:
// the settling and the oracle's checks follow its steps, and the case passes when nothing
// differs. Add one per defect: TestLedgerHistories prints a failure's shrunk script in this
// form. Rounds are 8 hours from 8 hours before the base (R = (At + 8h) / 8h); the messages of a
// history are numbered as History.Messages lists them (payments, checkout sessions and closes
// per attempt, then each refund: its notification, and for Stripe its refund.created).
var regressions = []Script{
	// Issue 20 #1: Alipay refunds 3.00 then 2.00; the first refund's notification is still being
	// retried when the second (refund_fee 5.00, a running total) and the day's bill arrive. The
	// bill matches refunds by id, else by payment and amount, else adds its line: 5.00 counted,
	// then +3.00 from the bill.
	{Name: "alipay running total then bill", History: History{Seed: 1, AmountFen: 500, Attempts: []Attempt{
		{Channel: Alipay, Outcome: Paid, At: 10 * time.Hour}},
		Refunds: []Refund{{Attempt: 0, Fen: 300, At: 20 * time.Hour}, {Attempt: 0, Fen: 200, At: 30 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 4, Op: OpDeliver, N: 2}, {R: 5, Op: OpBill, Channel: Alipay, Day: 1}}},
	// Issue 20 #2: two refunds of 0.30 whose Alipay bill lines carry no 退款批次号: the bill's
	// repair key bill:<txn>:<amount> counts them once.
	{Name: "two equal refunds without ids", History: History{Seed: 2, AmountFen: 100, Attempts: []Attempt{
		{Channel: Alipay, Outcome: Paid, At: 10 * time.Hour}},
		Refunds: []Refund{{Attempt: 0, Fen: 30, At: 20 * time.Hour, NoBillID: true}, {Attempt: 0, Fen: 30, At: 21 * time.Hour, NoBillID: true}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 5, Op: OpBill, Channel: Alipay, Day: 1}}},
	// Issue 20 #3: an Alipay attempt closed at Alipay, a WeChat attempt paid whose notification is
	// lost. Alipay's CLOSED answer closes the order, and WeChat is never asked again.
	{Name: "close on another channel's answer", History: History{Seed: 3, AmountFen: 1999, Attempts: []Attempt{
		{Channel: Alipay, Outcome: Closed, At: 2 * time.Hour}, {Channel: WeChat, Outcome: Paid, At: 3 * time.Hour}}},
		Steps: []Step{{R: 1, Op: OpQuery, N: 0}}},
	// Issue 20 #4: a Checkout payment refunded; charge.refunded (no trade metadata) arrives
	// before checkout.session.completed and is acknowledged without a record.
	{Name: "stripe refund before its payment", History: History{Seed: 4, AmountFen: 1000, Attempts: []Attempt{
		{Channel: Stripe, Outcome: Paid, At: 10 * time.Hour, Checkout: true}},
		Refunds: []Refund{{Attempt: 0, Fen: 1000, At: 11 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 2}, {R: 2, Op: OpDeliver, N: 0}}},
	// Issue 20 #5: a WeChat bill whose summary counts fewer rows than it has, one of them a
	// payment WeChat never took: the untrusted bill marks the order PAID.
	{Name: "untrusted bill repairs", History: History{Seed: 5, AmountFen: 700, Attempts: []Attempt{
		{Channel: WeChat, Outcome: Open, At: 10 * time.Hour}}},
		Steps: []Step{{R: 5, Op: OpBill, Channel: WeChat, Day: 1, Variant: BillInvented, Seed: 5, N: 0}}},
	// Issue 20 #6: the Alipay bill of day 0 run as the bill of day 3: its lines repair an order.
	{Name: "another day's bill", History: History{Seed: 6, AmountFen: 800, Attempts: []Attempt{
		{Channel: Alipay, Outcome: Paid, At: 10 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpBill, Channel: Alipay, Day: 0, Variant: BillWrongDay}}},
	// Issue 20 #7: a good run of a day, then a run of a cut-short file of the same day: the
	// failed run deleted the complete run's staged lines, which the neighbour days' LOCAL_ONLY
	// logic reads.
	{Name: "failed run corrupts the day's run", History: History{Seed: 7, AmountFen: 900, Attempts: []Attempt{
		{Channel: Alipay, Outcome: Paid, At: 10 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 2, Op: OpBill, Channel: Alipay, Day: 0}, {R: 3, Op: OpBill, Channel: Alipay, Day: 0, Variant: BillTruncated}}},
	// Issue 20 #10: a purge empties idempotent_record; the next process start takes it for a
	// restore ("the database went back in time", at error) and starts a new epoch.
	{Name: "purge taken for a restore", History: History{Seed: 10, AmountFen: 1000, Attempts: []Attempt{
		{Channel: WeChat, Outcome: Paid, At: 10 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 3, Op: OpPurge}, {R: 3, Op: OpRestart}}},
	// Found by the check: a bill line that names its refund (UnionPay's queryId) is matched by
	// payment and amount to another refund of the same amount, when its own is not recorded
	// yet: two refunds of 38.10, the bill shows both, one is counted.
	{Name: "bill line matched to another refund of its amount", History: History{Seed: 11, AmountFen: 10000, Attempts: []Attempt{
		{Channel: UnionPay, Outcome: Paid, At: 10 * time.Hour}},
		Refunds: []Refund{{Attempt: 0, Fen: 3810, At: 20 * time.Hour}, {Attempt: 0, Fen: 3810, At: 30 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 4, Op: OpDeliver, N: 2}, {R: 5, Op: OpBill, Channel: UnionPay, Day: 1}}},
	// Found by the check: a refund recorded from the bill, then the retention purge and a Redis
	// flush; its notification then fails on the refund row's unique key, finds no record ("record
	// vanished after duplicate key") and is answered "retry" at every delivery, for good.
	{Name: "refund notification after a purge retried forever", History: History{Seed: 12, AmountFen: 5000, Attempts: []Attempt{
		{Channel: UnionPay, Outcome: Paid, At: 10 * time.Hour}},
		Refunds: []Refund{{Attempt: 0, Fen: 1000, At: 20 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 5, Op: OpBill, Channel: UnionPay, Day: 1}, {R: 5, Op: OpPurge}, {R: 5, Op: OpRestart, Flush: true}}},
	// Found by the check on the ledger itself: an Alipay bill lists two refunds of 3.81, one with
	// its 退款批次号 and one without. The id-less line was repaired as an anonymous item, then the
	// line with the id adopted that item as its own: two bill lines counted as one refund.
	// A bill's lines are distinct refunds now, and the lines with ids are matched first.
	{Name: "bill lines with and without ids merged", History: History{Seed: 102754585974, AmountFen: 1096, Attempts: []Attempt{
		{Channel: WeChat, Outcome: Paid, At: 63*time.Hour + 58*time.Minute + 25*time.Second},
		{Channel: Alipay, Outcome: Paid, At: 14*time.Hour + 34*time.Minute + 39*time.Second, GBK: true, CloseNotify: true}},
		Refunds: []Refund{{Attempt: 1, Fen: 381, At: 20*time.Hour + 44*time.Minute + 35*time.Second, NoBillID: true},
			{Attempt: 1, Fen: 381, At: 37*time.Hour + 8*time.Minute + 50*time.Second},
			{Attempt: 0, Fen: 1096, At: 69*time.Hour + 16*time.Minute + 25*time.Second}}},
		Steps: []Step{{R: 5, Op: OpBill, Channel: Alipay, Day: 0}, {R: 5, Op: OpBill, Channel: Alipay, Day: 1}}},
	// Issue 22, orders in other currencies: each passes only if Stripe's units, ISO 4217's and
	// the attempts' currency rule are all applied where they belong (TestMoneyFaultIsCaught
	// shows the first two cases fail when Stripe's units are not).
	//
	// ISK, which Stripe counts in hundredths: the payment, two refunds (charge.refunded listing
	// them, then refund.created each), the bill of the day; the order made without stock.
	{Name: "isk paid and refunded on stripe", History: History{Seed: 20, AmountFen: 1500, Currency: "ISK", Origin: OriginStockless,
		Attempts: []Attempt{{Channel: Stripe, Outcome: Paid, At: 10 * time.Hour, RefundList: true}},
		Refunds:  []Refund{{Attempt: 0, Fen: 500, At: 20 * time.Hour}, {Attempt: 0, Fen: 1000, At: 30 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 3, Op: OpDeliver, N: 1}, {R: 3, Op: OpDeliver, N: 2}, {R: 4, Op: OpDeliver, N: 3},
			{R: 5, Op: OpBill, Channel: Stripe, Day: 1}}},
	// MGA, which Stripe counts in whole ariary: the payment's notification lost, found by the
	// trade query; a refund found by the query too, then notified; the order has a
	// merchant_order_id.
	{Name: "mga paid and refunded, found by queries", History: History{Seed: 21, AmountFen: 250000, Currency: "MGA", Origin: OriginMerchantID,
		Attempts: []Attempt{{Channel: Stripe, Outcome: Paid, At: 10 * time.Hour}},
		Refunds:  []Refund{{Attempt: 0, Fen: 100000, At: 20 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpQuery, N: 0}, {R: 4, Op: OpQuery, N: 0}, {R: 4, Op: OpDeliver, N: 1}, {R: 6, Op: OpBill, Channel: Stripe, Day: 0}}},
	// JPY from a stock in JPY: the Alipay attempt is refused, the Stripe Checkout payment and
	// its refund are applied, and Alipay is asked all the same.
	{Name: "jpy from stock, alipay refused", History: History{Seed: 22, AmountFen: 4900, Currency: "JPY", Origin: OriginStock,
		Attempts: []Attempt{{Channel: Alipay, Outcome: Open, At: 5 * time.Hour, Absent: true, Refused: true},
			{Channel: Stripe, Outcome: Paid, At: 10 * time.Hour, Checkout: true}},
		Refunds: []Refund{{Attempt: 1, Fen: 4900, At: 20 * time.Hour}}},
		Steps: []Step{{R: 1, Op: OpQuery, N: 0}, {R: 2, Op: OpDeliver, N: 0}, {R: 2, Op: OpDeliver, N: 1}, {R: 3, Op: OpDeliver, N: 2},
			{R: 3, Op: OpDeliver, N: 3}, {R: 3, Op: OpBill, Channel: Stripe, Day: 0}}},
	// KWD without stock: WeChat refused, the Stripe PaymentIntent canceled; Stripe's answer
	// closes the order, which the refused attempt does not hold open.
	{Name: "kwd, wechat refused, stripe closed", History: History{Seed: 23, AmountFen: 12345, Currency: "KWD", Origin: OriginStockless,
		Attempts: []Attempt{{Channel: WeChat, Outcome: Open, At: 5 * time.Hour, Absent: true, Refused: true},
			{Channel: Stripe, Outcome: Closed, At: 10 * time.Hour}}},
		Steps: []Step{{R: 2, Op: OpDeliver, N: 0}, {R: 3, Op: OpQuery, N: 1}, {R: 3, Op: OpQuery, N: 0}}},
	// USD whose only attempt, on UnionPay, is refused: nothing happens, the order waits.
	{Name: "usd, every attempt refused", History: History{Seed: 24, AmountFen: 1999, Currency: "USD", Origin: OriginMerchantID,
		Attempts: []Attempt{{Channel: UnionPay, Outcome: Open, At: 5 * time.Hour, Absent: true, Refused: true}}},
		Steps: []Step{{R: 2, Op: OpQuery, N: 0}, {R: 3, Op: OpPurge}, {R: 3, Op: OpRestart, Flush: true}}},
	// accept_channel after an untrusted bill: WeChat's payment notification is lost, the day's
	// bill does not add up and repairs nothing, finance accepts the channel's side of its
	// CHANNEL_ONLY line (the order is paid once), and the day's good bill then finds it paid.
	{Name: acceptChannelScript, History: History{Seed: 26, AmountFen: 600, Attempts: []Attempt{
		{Channel: WeChat, Outcome: Paid, At: 10 * time.Hour}}},
		Steps: []Step{{R: 5, Op: OpBill, Channel: WeChat, Day: 0, Variant: BillUntrusted}, {R: 6, Op: OpBill, Channel: WeChat, Day: 0}}},
}

const acceptChannelScript = "accept_channel after an untrusted bill"

// TestLedgerRegressions runs every scripted history alone.
func TestLedgerRegressions(t *testing.T) {
	w := newWorld(t)
	for _, sc := range regressions {
		t.Run(sc.Name, func(t *testing.T) {
			for _, f := range w.replay(sc, nil) {
				t.Errorf("%s: %s", f.category, f.detail)
			}
		})
	}
}

// TestMoneyFaultIsCaught shows the check sees a Stripe amount off by the factor between Stripe's
// units and ISO 4217's: Stripe here states ISK and MGA amounts in their ISO 4217 minor units, as
// if paygw's reading of them (channels/stripe fromStripe) had lost its rule. The payment then
// differs from the order by a factor of 100: an AMOUNT_MISMATCH anomaly, and the order, which
// the history says is paid, stays WAIT_PAY. The same scripts pass in TestLedgerRegressions.
func TestMoneyFaultIsCaught(t *testing.T) {
	w := newWorld(t)
	w.signers.StripeUnits = func(amount int64, code string) (int64, bool) { return amount, money.Valid(code) }
	for _, name := range []string{"isk paid and refunded on stripe", "mga paid and refunded, found by queries"} {
		t.Run(name, func(t *testing.T) {
			i := slices.IndexFunc(regressions, func(sc Script) bool { return sc.Name == name })
			if i < 0 {
				t.Fatalf("no regression %q", name)
			}
			caught := false
			for _, f := range w.replay(regressions[i], nil) {
				t.Logf("%s: %s", f.category, f.detail)
				caught = caught || f.category == "final: status WAIT_PAY, want PAID" && strings.Contains(f.detail, "AMOUNT_MISMATCH stripe")
			}
			if !caught {
				t.Errorf("the check saw no AMOUNT_MISMATCH keeping the order unpaid")
			}
		})
	}
}

// TestRefusedAttemptCheck shows the check sees an attempt recorded on a channel that should have
// refused the order's currency: the history claims Stripe refuses USD, the real Stripe takes it.
func TestRefusedAttemptCheck(t *testing.T) {
	w := newWorld(t)
	sc := Script{Name: "stripe claimed to refuse usd", History: History{Seed: 25, AmountFen: 1000, Currency: "USD", Origin: OriginStockless,
		Attempts: []Attempt{{Channel: Stripe, Outcome: Open, At: 5 * time.Hour, Absent: true, Refused: true}}}}
	var got []string
	for _, f := range w.replay(sc, nil) {
		got = append(got, f.category)
	}
	for _, want := range []string{"attempt: a channel took a currency it refuses", "final: the attempts recorded"} {
		if !slices.Contains(got, want) {
			t.Errorf("failures %q, want %q among them", got, want)
		}
	}
}

// TestAcceptChannelRuns shows the driver's accept_channel step runs and is checked: the scripted
// history accepts its one line, and nothing differs from the oracle.
func TestAcceptChannelRuns(t *testing.T) {
	w := newWorld(t)
	i := slices.IndexFunc(regressions, func(sc Script) bool { return sc.Name == acceptChannelScript })
	if i < 0 {
		t.Fatalf("no regression %q", acceptChannelScript)
	}
	e, fs := w.execute(regressions[i], func(s string) { t.Log(s) })
	for _, f := range fs {
		t.Errorf("%s: %s", f.category, f.detail)
	}
	if e.accepted != 1 {
		t.Errorf("accepted %d discrepancies, want 1", e.accepted)
	}
}
