package simulate

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The control API adds trades, notifies the gateway of them unless told not to, refuses what
// is not a trade, and --state keeps them across restarts.
func TestFakeControlAPI(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteKeys(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	var notified atomic.Int32
	gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/notify/alipay" {
			t.Errorf("notified at %s", r.URL.Path)
		}
		notified.Add(1)
		_, _ = io.WriteString(w, "success")
	}))
	defer gateway.Close()
	state := filepath.Join(t.TempDir(), "trades.json")
	fake, err := NewFake(dir, gateway.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.KeepState(state); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	post := func(body string) int {
		res, err := http.Post(srv.URL+"/_sim/trades", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post(`{"channel":"alipay","trade_no":"T1","amount_fen":1999,"status":"paid"}`); code != 200 || notified.Load() != 1 {
		t.Fatalf("paid trade: %d, %d notifications; want 200 and one", code, notified.Load())
	}
	if code := post(`{"channel":"alipay","trade_no":"T2","amount_fen":500,"status":"paid","drop_notify":true}`); code != 200 || notified.Load() != 1 {
		t.Fatalf("dropped notification: %d, %d notifications; want 200 and still one", code, notified.Load())
	}
	for _, bad := range []string{
		`{"channel":"paypal","trade_no":"T3","amount_fen":1,"status":"paid"}`,
		`{"channel":"alipay","trade_no":"T3","amount_fen":1,"status":"lost"}`,
		`{"channel":"alipay","trade_no":"","amount_fen":1,"status":"paid"}`,
		`{"channel":"alipay","trade_no":"T3","amount_fen":0,"status":"paid"}`,
		`{"channel":"alipay","trade_no":"T3","amount_fen":1,"status":"paid","extra":1}`,
	} {
		if code := post(bad); code != 400 {
			t.Errorf("%s: %d, want 400", bad, code)
		}
	}
	again, err := NewFake(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := again.KeepState(state); err != nil {
		t.Fatal(err)
	}
	if tr, ok := again.Trade("alipay", "T2"); !ok || tr.AmountFen != 500 || tr.TxnID == "" {
		t.Fatalf("after a restart: %+v, %v; want T2 of 500 with its transaction id", tr, ok)
	}
	if _, ok := again.Trade("alipay", "T3"); ok {
		t.Fatal("a refused trade was kept")
	}
	if n := again.Asked("alipay", "T2"); n != 1 {
		t.Fatalf("asked = %d, want 1", n)
	}
}
