package handlers

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/reconcile"
	"github.com/paygw/paygw/repository"
)

type listedDiscrepancy struct {
	ID         int64  `json:"id"`
	Class      string `json:"class"`
	Status     string `json:"status"`
	Found      bool   `json:"found"`
	TradeNo    string `json:"trade_no"`
	Resolution *struct {
		Action, Note, By, Outcome string
	} `json:"resolution"`
	MoneyMoved bool   `json:"money_moved"`
	Effect     string `json:"effect"`
}

// seedUntrustedRun stores a complete, untrusted run of alipay's day with rows of the given
// classes, keyed by line key, as a bill run that repaired nothing would.
func seedUntrustedRun(t *testing.T, h *harness, day time.Time, rows []repository.Discrepancy) int64 {
	t.Helper()
	ctx := context.Background()
	id, err := h.db.StartRun(ctx, "alipay", repository.SourceChannel, day, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		rows[i].RunID, rows[i].Channel, rows[i].BillDate = id, "alipay", day
	}
	if err := h.db.PutDiscrepancies(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := h.db.CompleteRun(ctx, id, repository.RunTotals{Lines: len(rows), Counts: map[string]int{}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return id
}

func fen(n int64) sql.NullInt64 { return sql.NullInt64{Int64: n, Valid: true} }

// The whole workflow over HTTP, as finance works it: an untrusted run's discrepancies, a sign-off
// refused while they are open, each resolved (accept_channel paying its order through the apply
// path, once), the day signed off, and a later bill run that finds something new reopening it.
func TestDiscrepancyWorkflow(t *testing.T) {
	m := metrics.New("test")
	h := newHarness(t, options{tokens: roleTokens(t), metrics: m})
	m.ReadStoredState(h.db)
	m.ExpectReconcile(metrics.JobBill, []string{"alipay"})
	ctx := context.Background()
	day := time.Now().UTC().AddDate(0, 0, -4).Truncate(24 * time.Hour)
	date := day.Format(time.DateOnly)
	at := day.Add(10 * time.Hour)
	tn := h.seedOrder(100)
	line, _ := json.Marshal(reconcile.BillLineRef{BillLine: repository.BillLine{No: 1, Kind: "PAY", TradeNo: tn, ChannelTxnID: "C1",
		AmountFen: 100, Currency: "CNY", Time: at}})
	runID := seedUntrustedRun(t, h, day, []repository.Discrepancy{
		{LineKey: "pay:C1", Class: reconcile.ClassChannelOnly, TradeNo: tn, ChannelTxnID: "C1", BillAmountFen: fen(100), Currency: "CNY",
			LocalStatus: payment.OrderWaitPay, Repair: reconcile.RepairUntrusted, Line: sql.NullString{String: string(line), Valid: true}},
		{LineKey: "pay:-2+3", Class: reconcile.ClassUnknownOrder, TradeNo: `=HYPERLINK("http://evil")`, ChannelTxnID: "-2+3",
			BillAmountFen: fen(5), Currency: "CNY"},
		{LineKey: "local:L1", Class: reconcile.ClassLocalOnly, TradeNo: "T-L1", ChannelTxnID: "L1", LocalAmountFen: fen(7)},
		{LineKey: "refund:R1", Class: reconcile.ClassRefundAmountMismatch, TradeNo: "T-R1", ChannelTxnID: "R1", BillAmountFen: fen(3)},
	})

	list := func(token string) []listedDiscrepancy {
		t.Helper()
		r := h.do("GET", fmt.Sprintf("/v1/reconciliations/%d/discrepancies", runID), token, nil, "")
		var out struct{ Discrepancies []listedDiscrepancy }
		if r.code != 200 || json.Unmarshal([]byte(r.body), &out) != nil {
			t.Fatalf("listing: %d %s", r.code, r.body)
		}
		return out.Discrepancies
	}
	byClass := map[string]int64{}
	for _, d := range list(viewerToken) {
		if d.Status != repository.StatusOpen || !d.Found {
			t.Fatalf("%+v: want open, found by the run", d)
		}
		byClass[d.Class] = d.ID
	}
	if len(byClass) != 4 {
		t.Fatalf("listed %v, want the 4 seeded classes", byClass)
	}

	signOff := func(token, body string) response {
		t.Helper()
		return h.do("POST", "/v1/reconciliations/alipay/"+date+"/signoff", token, nil, body)
	}
	r := signOff(financeToken, `{"note":"day checked"}`)
	var refused problem
	if r.code != 409 || json.Unmarshal([]byte(r.body), &refused) != nil || refused.Type != typeOpenItems || refused.OpenCount != 4 || len(refused.Open) != 4 {
		t.Fatalf("sign-off with 4 open: %d %s", r.code, r.body)
	}
	for _, o := range refused.Open {
		if byClass[o.Class] != o.ID {
			t.Fatalf("open lists %+v; the listing has %v", refused.Open, byClass)
		}
	}

	resolve := func(token string, id int64, body string) response {
		t.Helper()
		return h.do("POST", fmt.Sprintf("/v1/discrepancies/%d/resolve", id), token, nil, body)
	}
	for name, c := range map[string]struct {
		token string
		id    int64
		body  string
		code  int
	}{
		"viewer may not":               {viewerToken, byClass[reconcile.ClassChannelOnly], `{"action":"write_off","note":"x"}`, 403},
		"operator may not":             {operatorToken, byClass[reconcile.ClassChannelOnly], `{"action":"write_off","note":"x"}`, 403},
		"accept_channel, wrong class":  {financeToken, byClass[reconcile.ClassUnknownOrder], `{"action":"accept_channel","note":"x"}`, 400},
		"accept_channel, local only":   {financeToken, byClass[reconcile.ClassLocalOnly], `{"action":"accept_channel","note":"x"}`, 400},
		"unknown action":               {financeToken, byClass[reconcile.ClassLocalOnly], `{"action":"shrug","note":"x"}`, 400},
		"no note":                      {financeToken, byClass[reconcile.ClassLocalOnly], `{"action":"write_off"}`, 400},
		"unknown field":                {financeToken, byClass[reconcile.ClassLocalOnly], `{"action":"write_off","note":"x","by":"me"}`, 400},
		"unknown discrepancy":          {financeToken, 999999, `{"action":"write_off","note":"x"}`, 404},
		"note over 512 bytes":          {financeToken, byClass[reconcile.ClassLocalOnly], `{"action":"write_off","note":"` + strings.Repeat("n", 513) + `"}`, 400},
		"accept_channel, refund class": {financeToken, byClass[reconcile.ClassRefundAmountMismatch], `{"action":"accept_channel","note":"x"}`, 400},
	} {
		if r := resolve(c.token, c.id, c.body); r.code != c.code {
			t.Errorf("%s: %d %s, want %d", name, r.code, r.body, c.code)
		}
	}
	if h.order(tn).Status != payment.OrderWaitPay {
		t.Fatal("a refused resolve moved money")
	}

	// accept_channel pays the order through the apply path, once.
	r = resolve(financeToken, byClass[reconcile.ClassChannelOnly], `{"action":"accept_channel","note":"the channel has it, ticket 7"}`)
	var got listedDiscrepancy
	if r.code != 200 || json.Unmarshal([]byte(r.body), &got) != nil || got.Status != repository.StatusResolved || !got.MoneyMoved ||
		got.Resolution == nil || got.Resolution.Outcome != string(payment.OutcomeApplied) || got.Resolution.By != "finance" {
		t.Fatalf("accept_channel: %d %s", r.code, r.body)
	}
	if h.order(tn).Status != payment.OrderPaid {
		t.Fatal("accept_channel did not pay the order")
	}
	if r := resolve(financeToken, got.ID, `{"action":"accept_channel","note":"again"}`); r.code != 409 || problemType(t, r) != typeAlreadyResolved {
		t.Fatalf("resolve twice: %d %s", r.code, r.body)
	}
	for class, action := range map[string]string{reconcile.ClassUnknownOrder: reconcile.ActionAcceptLocal,
		reconcile.ClassLocalOnly: reconcile.ActionWriteOff, reconcile.ClassRefundAmountMismatch: reconcile.ActionRefundedOffline} {
		r := resolve(adminToken, byClass[class], `{"action":"`+action+`","note":"decided"}`)
		if r.code != 200 || json.Unmarshal([]byte(r.body), &got) != nil || got.MoneyMoved || !strings.Contains(got.Effect, "changes no money") ||
			got.Resolution == nil || got.Resolution.Action != action || got.Resolution.By != "root" {
			t.Fatalf("%s on %s: %d %s", action, class, r.code, r.body)
		}
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'discrepancy.resolve' AND target LIKE 'discrepancy:%'
		AND JSON_VALUE(before_state, '$.status') = 'open' AND JSON_VALUE(after_state, '$.status') = 'resolved'`); n != 4 {
		t.Fatalf("audit rows of the resolves: %d, want 4 with before and after", n)
	}

	r = signOff(financeToken, `{"note":"day checked"}`)
	var so struct {
		Status string `json:"status"`
		By     string `json:"signed_off_by"`
	}
	if r.code != 200 || json.Unmarshal([]byte(r.body), &so) != nil || so.Status != repository.DaySignedOff || so.By != "finance" {
		t.Fatalf("sign-off after resolving: %d %s", r.code, r.body)
	}
	if r := signOff(financeToken, `{}`); r.code != 409 || problemType(t, r) != typeSignedOff {
		t.Fatalf("signing off twice: %d %s", r.code, r.body)
	}
	if n := h.count(`SELECT COUNT(*) FROM audit_log WHERE action = 'reconciliation.signoff' AND target = ? AND after_state IS NOT NULL`,
		"reconciliation:alipay/"+date); n != 1 {
		t.Fatalf("audit rows of the sign-off: %d, want 1", n)
	}
	if r := h.do("GET", "/v1/reconciliations?channel=alipay&date="+date, viewerToken, nil, ""); r.code != 200 ||
		!strings.Contains(r.body, `"status":"signed_off"`) || !strings.Contains(r.body, `"result":true`) {
		t.Fatalf("the day's runs: %d %s", r.code, r.body)
	}

	// A trusted bill of the day: C1 is now matched (no second apply), N1 is new and reopens.
	job := reconcile.New(h.db, h.applier, nil, reconcile.Config{}, testenv.Logger(t))
	bill := "trade_no,channel_txn_id,kind,amount_fen,currency,time,refund_id\n" +
		fmt.Sprintf("%s,C1,PAY,100,CNY,%s,\nNOTOURS,N1,PAY,9,CNY,%s,\n", tn, at.Format(time.RFC3339), at.Format(time.RFC3339))
	rep, err := job.MatchBill(ctx, "alipay", day, bills.NewCSV(strings.NewReader(bill)), reconcile.BillConfig{Location: time.UTC}, nil)
	if err != nil || !rep.Reopened || rep.New != 1 || rep.Counts[reconcile.ClassMatched] != 1 {
		t.Fatalf("the bill run: %+v %v", rep, err)
	}
	if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE channel_txn_id = 'C1'`); n != 1 {
		t.Fatalf("C1 journalled %d times, want once", n)
	}
	if n := h.count(`SELECT COUNT(*) FROM idempotent_record WHERE idem_key = 'C1'`); n != 1 {
		t.Fatalf("records of C1: %d, want 1", n)
	}
	if v := gathered(t, m, "paygw_reconcile_reopened_total", "alipay"); v != 1 {
		t.Fatalf("paygw_reconcile_reopened_total{channel=alipay} = %v, want 1", v)
	}
	if _, err := h.db.SequenceEvents(ctx, 100); err != nil {
		t.Fatal(err)
	}
	r = h.do("GET", "/v1/events?type="+payment.EventReconciliationReopened, adminToken, nil, "")
	if r.code != 200 || strings.Count(r.body, `"type": "reconciliation.reopened"`) != 1 || !strings.Contains(r.body, `"bill_date": "`+date+`"`) {
		t.Fatalf("the reopened event in the feed: %d %s", r.code, r.body)
	}
	// The first run still lists its four, resolved; the new run lists them too, under the same ids.
	for _, d := range list(viewerToken) {
		if d.Status != repository.StatusResolved {
			t.Fatalf("the first run's %+v, want resolved", d)
		}
	}
	r = h.do("GET", fmt.Sprintf("/v1/reconciliations/%d/discrepancies", rep.RunID), viewerToken, nil, "")
	for class, id := range byClass {
		if !strings.Contains(r.body, fmt.Sprintf(`"id":%d,"class":"%s"`, id, class)) {
			t.Fatalf("the new run's listing lacks %s %d: %s", class, id, r.body)
		}
	}
	if r := signOff(financeToken, `{"note":"again"}`); r.code != 409 || problemType(t, r) != typeOpenItems {
		t.Fatalf("signing off the reopened day with N1 open: %d %s", r.code, r.body)
	}
	h.wantStatuses(t, "POST", financeToken, `{"note":"x"}`, map[string]pathCode{
		"no run that day": {"/v1/reconciliations/alipay/2020-01-01/signoff", 404},
		"bad date":        {"/v1/reconciliations/alipay/2020-13-01/signoff", 400},
		"bad channel":     {"/v1/reconciliations/ALI%20PAY/" + date + "/signoff", 400},
	})
	if r := signOff(viewerToken, `{}`); r.code != 403 {
		t.Fatalf("viewer signs off: %d", r.code)
	}
}

// gathered is the collector of one series of family name, labelled channel.
func gathered(t *testing.T, m *metrics.Metrics, name, channel string) float64 {
	t.Helper()
	found := false
	var value float64
	testenv.Series(t, m, name, func(l map[string]string, v float64) {
		if !found && l["channel"] == channel {
			found, value = true, v
		}
	})
	if !found {
		t.Fatalf("%s{channel=%q} not exported", name, channel)
	}
	return value
}

// The CSV exports: streamed CSV, text cells that a spreadsheet would run prefixed with ', and
// only for the roles that hold exports.
func TestCSVExports(t *testing.T) {
	h := newHarness(t, options{tokens: roleTokens(t)})
	day := time.Now().UTC().AddDate(0, 0, -2).Truncate(24 * time.Hour)
	var rows []repository.Discrepancy
	for i := range 1203 { // more than a page of the reader, and of the flush
		rows = append(rows, repository.Discrepancy{LineKey: fmt.Sprint("pay:", i), Class: reconcile.ClassUnknownOrder,
			TradeNo: fmt.Sprint("T", i), ChannelTxnID: fmt.Sprint("X", i), BillAmountFen: fen(int64(i)), Currency: "CNY"})
	}
	rows[0].TradeNo, rows[0].ChannelTxnID, rows[0].Detail = `=cmd|'/c calc'!A1`, "+SUM(A1)", "@evil"
	rows[1].TradeNo, rows[1].ChannelTxnID = "-2+3", "\tTAB"
	runID := seedUntrustedRun(t, h, day, rows)
	h.exec(`INSERT INTO anomaly (kind, trade_no, channel, channel_txn_id, amount_fen, currency, detail, created_time)
		VALUES ('AMOUNT_MISMATCH', '=1+1', 'alipay', '@X', 1, 'CNY', '-detail, "quoted"', NOW(3)), ('DUPLICATE_PAYMENT', 'T2', 'alipay', 'X2', 2, 'CNY', 'plain', NOW(3))`)

	path := fmt.Sprintf("/v1/reconciliations/%d/discrepancies.csv", runID)
	for _, tok := range []string{viewerToken, operatorToken, shopToken} {
		for _, p := range []string{path, "/v1/anomalies.csv"} {
			if r := h.do("GET", p, tok, nil, ""); r.code != 403 {
				t.Errorf("%s as %s: %d, want 403", p, tok, r.code)
			}
		}
	}
	r := h.do("GET", path, financeToken, nil, "")
	if r.code != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("export: %d %s", r.code, r.header.Get("Content-Type"))
	}
	recs, err := csv.NewReader(strings.NewReader(r.body)).ReadAll()
	if err != nil || len(recs) != 1+len(rows) || strings.Join(recs[0], ",") != strings.Join(discrepancyHeader, ",") {
		t.Fatalf("export: %d records (%v), header %v", len(recs), err, recs[0])
	}
	col := func(rec []string, name string) string {
		for i, h := range discrepancyHeader {
			if h == name {
				return rec[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	for i, want := range []map[string]string{
		{"trade_no": `'=cmd|'/c calc'!A1`, "channel_txn_id": "'+SUM(A1)", "detail": "'@evil", "status": "open", "bill_amount_fen": "0"},
		{"trade_no": "'-2+3", "channel_txn_id": "'\tTAB", "bill_amount_fen": "1"},
		{"trade_no": "T2", "channel_txn_id": "X2", "class": reconcile.ClassUnknownOrder, "currency": "CNY"},
	} {
		for name, v := range want {
			if got := col(recs[1+i], name); got != v {
				t.Errorf("row %d %s = %q, want %q", i, name, got, v)
			}
		}
	}
	r = h.do("GET", "/v1/anomalies.csv?resolved=false", adminToken, nil, "")
	recs, err = csv.NewReader(strings.NewReader(r.body)).ReadAll()
	if r.code != 200 || err != nil || len(recs) != 3 || strings.Join(recs[0], ",") != strings.Join(anomalyHeader, ",") {
		t.Fatalf("anomalies export: %d %v %q", r.code, err, r.body)
	}
	if recs[1][2] != "'=1+1" || recs[1][4] != "'@X" || recs[1][8] != `'-detail, "quoted"` || recs[2][2] != "T2" {
		t.Fatalf("anomaly rows %q", recs[1:])
	}
	if r := h.do("GET", "/v1/anomalies.csv?kind=DUPLICATE_PAYMENT", financeToken, nil, ""); strings.Count(r.body, "\n") != 2 {
		t.Fatalf("kind filter: %q", r.body)
	}
	h.wantStatuses(t, "GET", financeToken, "", map[string]pathCode{
		"unknown run":  {"/v1/reconciliations/999999/discrepancies.csv", 404},
		"bad run":      {"/v1/reconciliations/x/discrepancies.csv", 404},
		"bad resolved": {"/v1/anomalies.csv?resolved=maybe", 400},
	})
}
