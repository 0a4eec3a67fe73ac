package repository_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

var at = time.Date(2026, 12, 4, 10, 0, 0, 123_000_000, time.UTC)

// newOrders inserts WAIT_PAY orders of 1000 CNY fen for user 7.
func newOrders(t *testing.T, db *repository.DB, tradeNos ...string) {
	t.Helper()
	err := db.InTx(context.Background(), func(tx *repository.Tx) error {
		for _, tn := range tradeNos {
			o := payment.Order{TradeNo: tn, UserID: 7, SKU: "S", Num: 1, AmountFen: 1000, Currency: "CNY", CreateTime: at}
			if err := tx.InsertOrder(context.Background(), o, "", "", ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func markPaid(ctx context.Context, tx *repository.Tx, tn string) error {
	ok, err := tx.MarkPaid(ctx, tn, "alipay", "X"+tn, 1000, "CNY", at, at)
	if err == nil && !ok {
		err = fmt.Errorf("%s not paid", tn)
	}
	return err
}

// body is an event's JSON as a consumer reads it.
type body struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

func decode(t *testing.T, e payment.OutboxEvent) body {
	t.Helper()
	var b body
	if err := json.Unmarshal(e.Body, &b); err != nil {
		t.Fatalf("event body %s: %v", e.Body, err)
	}
	if b.ID != e.ID || b.Type != e.Type {
		t.Fatalf("body %s names id %s type %s; the row %s %s", e.Body, b.ID, b.Type, e.ID, e.Type)
	}
	if ts, err := time.Parse(time.RFC3339, b.Timestamp); err != nil || !ts.Equal(at) {
		t.Fatalf("timestamp %q (%v), want %s", b.Timestamp, err, at.Format(time.RFC3339Nano))
	}
	return b
}

// Every state change writes its event with the order's fields as the change left them; a change
// that is not made (the conditional update matched nothing) writes none.
func TestStateChangesWriteTheirEvents(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	newOrders(t, db, "P1", "C1", "G1", "G2", "N1")
	expected := int64(1000)
	err := db.InTx(ctx, func(tx *repository.Tx) error {
		if err := markPaid(ctx, tx, "P1"); err != nil {
			return err
		}
		if ok, err := tx.MarkPaid(ctx, "P1", "alipay", "Y", 1000, "CNY", at, at); err != nil || ok {
			return fmt.Errorf("second MarkPaid: %v %v", ok, err)
		}
		if ok, err := tx.SetRefunded(ctx, "P1", 300, "R1", 300, at); err != nil || !ok {
			return fmt.Errorf("SetRefunded: %v %v", ok, err)
		}
		if ok, err := tx.SetRefunded(ctx, "P1", 300, "R1", 0, at); err != nil || !ok { // no change: no event
			return fmt.Errorf("SetRefunded again: %v %v", ok, err)
		}
		if ok, err := tx.MarkClosed(ctx, "C1", at); err != nil || !ok {
			return fmt.Errorf("MarkClosed: %v %v", ok, err)
		}
		if ok, err := tx.MarkClosed(ctx, "P1", at); err != nil || ok {
			return fmt.Errorf("MarkClosed of a PAID order: %v %v", ok, err)
		}
		items := []repository.PaidItem{{TradeNo: "G1", Channel: "wechatpay", ChannelTxnID: "W1", AmountFen: 1000, Currency: "CNY", PaidAt: at},
			{TradeNo: "G2", Channel: "wechatpay", ChannelTxnID: "W2", AmountFen: 1000, Currency: "CNY", PaidAt: at}}
		if n, err := tx.MarkPaidGroup(ctx, items, at); err != nil || n != 2 {
			return fmt.Errorf("MarkPaidGroup: %v %v", n, err)
		}
		an := payment.Anomaly{Kind: payment.OutcomeAmountMismatch, TradeNo: "N1", Channel: "stripe", ChannelTxnID: "pi_1",
			AmountFen: 999, Currency: "CNY", ExpectedAmountFen: &expected, Detail: `asks "1000"`, CreatedTime: at}
		for range 2 { // flagged once: one event
			if err := tx.FlagAnomaly(ctx, an); err != nil {
				return err
			}
		}
		an.TradeNo, an.ChannelTxnID = "NO-ORDER", "pi_2" // a bill's anomaly may name no order of ours
		return tx.FlagAnomaly(ctx, an)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]map[string]any{
		"P1": {
			{"type": "order.paid", "status": "PAID", "amount_fen": 1000.0, "refunded_fen": 0.0, "channel": "alipay", "channel_txn_id": "XP1", "user_id": 7.0, "currency": "CNY"},
			// the row as the transaction left it when the event was written
			{"type": "order.refunded", "status": "PAID", "refunded_fen": 300.0, "refund_id": "R1", "refund_fen": 300.0},
		},
		"C1": {{"type": "order.closed", "status": "CLOSED", "channel": "", "channel_txn_id": "", "refunded_fen": 0.0}},
		"G1": {{"type": "order.paid", "status": "PAID", "channel": "wechatpay", "channel_txn_id": "W1"}},
		"G2": {{"type": "order.paid", "status": "PAID", "channel": "wechatpay", "channel_txn_id": "W2"}},
		"N1": {{"type": "payment.anomaly", "status": "WAIT_PAY", "kind": "AMOUNT_MISMATCH", "amount_fen": 999.0,
			"expected_amount_fen": 1000.0, "channel": "stripe", "channel_txn_id": "pi_1", "detail": `asks "1000"`, "user_id": 7.0}},
		"NO-ORDER": {{"type": "payment.anomaly", "kind": "AMOUNT_MISMATCH", "amount_fen": 999.0, "user_id": nil, "status": nil}},
	}
	ids := map[string]bool{}
	idShape := regexp.MustCompile(`^evt_[a-z2-7]{26}$`)
	for tn, list := range want {
		evs, err := db.EventsOf(ctx, tn)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != len(list) {
			t.Fatalf("%s: %d events, want %d", tn, len(evs), len(list))
		}
		for i, w := range list {
			b := decode(t, evs[i])
			if !idShape.MatchString(b.ID) || ids[b.ID] {
				t.Fatalf("%s: id %q malformed or seen before", tn, b.ID)
			}
			ids[b.ID] = true
			if b.Type != w["type"] || b.Data["trade_no"] != tn || evs[i].Seq != 0 {
				t.Fatalf("%s event %d: %s (seq %d), want type %s", tn, i, evs[i].Body, evs[i].Seq, w["type"])
			}
			for k, v := range w {
				if got, ok := b.Data[k]; k != "type" && (!ok || got != v) {
					t.Fatalf("%s event %d: data.%s = %v, want %v (%s)", tn, i, k, got, v, evs[i].Body)
				}
			}
		}
	}
}

// An event exists if and only if its change committed: a transaction that fails after writing
// the change and its event leaves neither.
func TestRolledBackChangeLeavesNoEvent(t *testing.T) {
	dsn, db := newDatabase(t)
	ctx := context.Background()
	newOrders(t, db, "A", "B")
	boom := errors.New("boom")
	err := db.InTx(ctx, func(tx *repository.Tx) error {
		if err := markPaid(ctx, tx, "A"); err != nil {
			return err
		}
		if _, err := tx.MarkPaidGroup(ctx, []repository.PaidItem{{TradeNo: "B", Channel: "c", ChannelTxnID: "t", AmountFen: 1000, Currency: "CNY", PaidAt: at}}, at); err != nil {
			return err
		}
		if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM event`); n != 0 {
			t.Errorf("%d events visible outside the open transaction", n)
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx: %v", err)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM event`); n != 0 {
		t.Fatalf("%d events after the rollback, want 0", n)
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM orders WHERE status = 'WAIT_PAY'`); n != 2 {
		t.Fatalf("%d orders WAIT_PAY after the rollback, want 2", n)
	}
}

// The sequencer numbers events in commit order: an event whose transaction commits after a later
// one's is numbered after it, so a reader that pages by seq sees it on its next page.
func TestFeedNeverSkipsALateCommit(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	newOrders(t, db, "EARLY", "LATE")
	inserted, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() { // EARLY's transaction writes its event first and commits last
		done <- db.InTx(ctx, func(tx *repository.Tx) error {
			if err := markPaid(ctx, tx, "EARLY"); err != nil {
				return err
			}
			close(inserted)
			<-release
			return nil
		})
	}()
	<-inserted
	if err := db.InTx(ctx, func(tx *repository.Tx) error { return markPaid(ctx, tx, "LATE") }); err != nil {
		t.Fatal(err)
	}
	read := func(after int64, want ...string) int64 {
		t.Helper()
		if _, err := db.SequenceEvents(ctx, 100); err != nil {
			t.Fatal(err)
		}
		page, err := db.Events(ctx, after, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		evs, through := page.Events, page.Through
		var got []string
		for _, e := range evs {
			got = append(got, e.TradeNo)
			if e.Seq > through {
				t.Fatalf("event %d served past through %d", e.Seq, through)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("feed after %d: %v, want %v", after, got, want)
		}
		return through
	}
	cursor := read(0, "LATE")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cursor = read(cursor, "EARLY")
	read(cursor)
	// A filter matching nothing still says how far it read: the next read starts there.
	if p, err := db.Events(ctx, 0, []string{payment.EventOrderClosed}, 10); err != nil || len(p.Events) != 0 || p.Through != cursor || p.More {
		t.Fatalf("type filter: %+v (%v), want no order.closed events through %d and no more", p, err, cursor)
	}
	// A full page goes through its last event only, and says more follow.
	if p, err := db.Events(ctx, 0, nil, 1); err != nil || len(p.Events) != 1 || p.Through != p.Events[0].Seq || !p.More {
		t.Fatalf("limit 1: %+v (%v)", p, err)
	}
}

// Two sequencers at once (a lease lost and taken over) never give one seq twice nor one event
// two seqs.
func TestConcurrentSequencersNumberOnce(t *testing.T) {
	dsn, db := newDatabase(t)
	ctx := context.Background()
	var tns []string
	for i := range 200 {
		tns = append(tns, fmt.Sprintf("S%03d", i))
	}
	newOrders(t, db, tns...)
	errs := make(chan error, 4)
	go func() {
		for _, tn := range tns {
			if err := db.InTx(ctx, func(tx *repository.Tx) error { return markPaid(ctx, tx, tn) }); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 3 {
		go func() {
			for range 100 {
				// A seq given twice is refused by uk_seq and rolled back; the next pass numbers it.
				_, _ = db.SequenceEvents(ctx, 7)
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for {
		n, err := db.SequenceEvents(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM event WHERE seq IS NOT NULL`); n != 200 {
		t.Fatalf("%d sequenced events, want 200", n)
	}
	if n := testenv.Count(t, dsn, `SELECT MAX(seq) - MIN(seq) + 1 FROM event`); n != 200 {
		t.Fatalf("seqs span %d, want 200: a gap or a repeat", n)
	}
}

// Numbered events past retention go in batches of at most 1,000; events not numbered yet stay
// whatever their age, and so do younger ones.
func TestPurgeEvents(t *testing.T) {
	dsn, db := newDatabase(t)
	const month = 720 * time.Hour
	testenv.OldEvents(t, dsn, "old", 1500, 1, 31*24*time.Hour)
	testenv.OldEvents(t, dsn, "unnumbered", 3, 0, 40*24*time.Hour)
	testenv.OldEvents(t, dsn, "young", 20, 2000, 29*24*time.Hour)
	got, err := db.PurgeEvents(context.Background(), month, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rows != 1500 || got.MaxBatch > repository.PurgeBatch || got.Batches < 2 {
		t.Fatalf("purged %+v, want 1500 rows in batches of at most %d", got, repository.PurgeBatch)
	}
	for q, want := range map[string]int{
		`SELECT COUNT(*) FROM event WHERE event_id LIKE 'evt_old-%'`:        0,
		`SELECT COUNT(*) FROM event WHERE event_id LIKE 'evt_unnumbered-%'`: 3,
		`SELECT COUNT(*) FROM event WHERE event_id LIKE 'evt_young-%'`:      20,
	} {
		if n := testenv.Count(t, dsn, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
}

// A purge of every event but the unnumbered ones keeps the one with the highest seq, whatever
// its age: the next event is numbered after it, not from 1 again, so no feed or webhook cursor
// is left pointing past the numbering.
func TestPurgeKeepsTheHighestSeq(t *testing.T) {
	dsn, db := newDatabase(t)
	ctx := context.Background()
	testenv.OldEvents(t, dsn, "old", 5, 0, 40*24*time.Hour)
	if n, err := db.SequenceEvents(ctx, 100); err != nil || n != 5 {
		t.Fatalf("numbered %d, %v; want 5", n, err)
	}
	got, err := db.PurgeEvents(ctx, time.Nanosecond, nil)
	if err != nil || got.Rows != 4 {
		t.Fatalf("purged %+v, %v; want all but the highest seq", got, err)
	}
	testenv.OldEvents(t, dsn, "new", 1, 0, 0)
	if _, err := db.SequenceEvents(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if seq := testenv.Count(t, dsn, `SELECT seq FROM event WHERE event_id = 'evt_new-0'`); seq != 6 {
		t.Fatalf("the next event after the purge got seq %d, want 6", seq)
	}
}

// The pay path gains one statement: a payment's change writes its event in one INSERT, and a
// group's changes write all their events in one multi-row INSERT.
func TestOneInsertPerChange(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	newOrders(t, db, "A", "G1", "G2", "G3")
	err := db.InTx(ctx, func(tx *repository.Tx) error {
		count := func() int64 {
			n, err := tx.Statements(ctx, "Com_insert_select")
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := count()
		if err := markPaid(ctx, tx, "A"); err != nil {
			return err
		}
		single := count()
		var items []repository.PaidItem
		for _, tn := range []string{"G1", "G2", "G3"} {
			items = append(items, repository.PaidItem{TradeNo: tn, Channel: "c", ChannelTxnID: "t" + tn, AmountFen: 1000, Currency: "CNY", PaidAt: at})
		}
		if n, err := tx.MarkPaidGroup(ctx, items, at); err != nil || n != 3 {
			return fmt.Errorf("MarkPaidGroup: %d %v", n, err)
		}
		if single-before != 1 || count()-single != 1 {
			t.Errorf("event inserts: %d for one payment, %d for a group of 3; want 1 and 1", single-before, count()-single)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{"A", "G1", "G2", "G3"} {
		if evs, err := db.EventsOf(ctx, tn); err != nil || len(evs) != 1 {
			t.Fatalf("%s: %d events (%v), want 1", tn, len(evs), err)
		}
	}
}

// The event table keeps a NULL seq's 8 bytes in its records (ROW_FORMAT=REDUNDANT, migration
// 00019), so the sequencer's UPDATE of seq is made in place: in DYNAMIC, which the server would
// pick by default, every numbered row was written anew, about 3 KB of redo a row instead of 230.
func TestEventRowsKeepRoomForSeq(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	raw := rawDB(t, dsn)
	var format string
	if err := raw.QueryRow(`SELECT ROW_FORMAT FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'event'`).Scan(&format); err != nil {
		t.Fatal(err)
	}
	if format != "Redundant" {
		t.Fatalf("event's row format is %s, want Redundant", format)
	}
}
