package simulate_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/simulate"
	"github.com/paygw/paygw/webhook"
)

func readRecords(t *testing.T, path string) []simulate.SinkRecord {
	t.Helper()
	b, err := os.ReadFile(path) // #nosec G304 -- the test's own temporary file
	if err != nil {
		t.Fatal(err)
	}
	recs, err := simulate.ReadSinkRecords(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// The record holds each delivery answered 2xx, in the order received, duplicates included, and
// nothing the sink refused or failed on purpose.
func TestSinkRecord(t *testing.T) {
	secret := testenv.WebhookSecret(t)
	key := webhook.MustParseSecret(secret)
	path := filepath.Join(t.TempDir(), "record.jsonl")
	f, err := simulate.OpenSinkRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	draws := []float64{0.9, 0.9, 0.1, 0.9, 0.9} // the third verified delivery fails on purpose
	n := 0
	sink, err := simulate.NewSink(simulate.SinkOptions{Secrets: []string{secret}, FailRate: 0.3, Record: f,
		Rand: func() float64 { n++; return draws[(n-1)%len(draws)] }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sink.Handler())
	defer srv.Close()
	t0 := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	paid := delivery{"evt_1", "order.paid", "T1", t0}
	refund := delivery{"evt_2", "order.refunded", "T1", t0.Add(time.Second)}
	other := delivery{"evt_3", "order.paid", "T2", t0}
	for i, c := range []struct {
		d    delivery
		key  webhook.Secret
		want int
	}{
		{paid, key, 204},
		{paid, key, 204}, // a duplicate: recorded again, as the sink saw it
		{refund, key, 500},
		{other, webhook.MustParseSecret(testenv.WebhookSecret(t)), 401},
		{refund, key, 204},
		{other, key, 204},
	} {
		b := c.d.body()
		if got := post(t, srv.Client(), srv.URL, b, webhook.Headers(c.d.id, time.Now(), b, c.key)); got != c.want {
			t.Fatalf("delivery %d (%s): %d, want %d", i, c.d.id, got, c.want)
		}
	}
	recs := readRecords(t, path)
	var got []string
	for _, r := range recs {
		got = append(got, r.WebhookID+" "+r.Type+" "+r.TradeNo)
		if r.At.IsZero() {
			t.Errorf("%s: no receipt time", r.WebhookID)
		}
	}
	want := "evt_1 order.paid T1,evt_1 order.paid T1,evt_2 order.refunded T1,evt_3 order.paid T2"
	if strings.Join(got, ",") != want {
		t.Fatalf("record\n got %s\nwant %s", strings.Join(got, ","), want)
	}
	if !recs[2].Timestamp.Equal(refund.at) {
		t.Fatalf("evt_2's timestamp %s, want the event's %s", recs[2].Timestamp, refund.at)
	}
}

// A record line that cannot be written turns the 204 into a 500: the sender tries again.
func TestSinkRecordWriteFails(t *testing.T) {
	secret := testenv.WebhookSecret(t)
	f, err := simulate.OpenSinkRecord(filepath.Join(t.TempDir(), "record.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close() // every write now fails
	sink, err := simulate.NewSink(simulate.SinkOptions{Secrets: []string{secret}, Record: f})
	if err != nil {
		t.Fatal(err)
	}
	d := delivery{"evt_w", "order.paid", "T1", time.Now()}
	b := d.body()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(b))
	req.Header = webhook.Headers(d.id, time.Now(), b, webhook.MustParseSecret(secret))
	sink.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("answered %d with an unwritable record, want 500", rec.Code)
	}
	if st := sink.Stats(false); st.Accepted != 0 || st.Failed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A line cut by a SIGKILL was never answered: the reader leaves it out, and reopening the file
// cuts it off so that the next line starts on its own.
func TestSinkRecordPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record.jsonl")
	whole := `{"webhook_id":"evt_1","type":"order.paid","trade_no":"T1","timestamp":"2026-12-05T07:00:00Z","at":"2026-12-05T07:00:01Z"}` + "\n"
	if err := os.WriteFile(path, []byte(whole+`{"webhook_id":"evt_2","ty`), 0o600); err != nil {
		t.Fatal(err)
	}
	if recs := readRecords(t, path); len(recs) != 1 || recs[0].WebhookID != "evt_1" {
		t.Fatalf("records %+v, want evt_1 alone", recs)
	}
	f, err := simulate.OpenSinkRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Replace(whole, "evt_1", "evt_3", 1)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if recs := readRecords(t, path); len(recs) != 2 || recs[1].WebhookID != "evt_3" {
		t.Fatalf("records %+v, want evt_1 then evt_3", recs)
	}
	// Reopening a file that ends with its newline changes nothing.
	f, err = simulate.OpenSinkRecord(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if recs := readRecords(t, path); len(recs) != 2 {
		t.Fatalf("records %+v after a reopen", recs)
	}

	// A bad line in the middle is not a cut: it is an error that names it.
	for name, body := range map[string]string{
		"not json":      whole + "garbage\n" + whole,
		"no webhook_id": whole + `{"type":"order.paid"}` + "\n",
	} {
		if _, err := simulate.ReadSinkRecords(strings.NewReader(body)); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %v, want an error naming line 2", name, err)
		}
	}
}
