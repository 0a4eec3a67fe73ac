package simulate

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// Fake stands in for the four channels' servers: it answers trade queries about the trades its
// control API was told of, signed with the sandbox keys exactly as each channel signs, and can
// send each trade's notification as the channel would. `paygw simulate serve` runs one.
type Fake struct {
	dir       string // the sandbox keys (paygw simulate keys)
	manifest  Manifest
	signers   map[string]Signer
	notifyURL string // base URL of the gateway to notify ("" = none)
	client    *http.Client

	mu        sync.Mutex
	trades    map[string]FakeTrade // by channel + "/" + trade_no
	asked     map[string]int       // queries answered, by channel + "/" + trade_no
	stateFile string               // "" = trades live in memory only
	breaks    map[string]bool      // channels whose answers are broken on purpose (Break)
}

// Fake trade statuses.
const (
	FakePaid     = "paid"
	FakePending  = "pending"  // created, not paid yet
	FakeClosed   = "closed"   // closed unpaid
	FakeRefunded = "refunded" // paid, then refunded (RefundFen of it)
)

// FakeTrade is one trade the fake channel knows: POST /_sim/trades.
type FakeTrade struct {
	Channel    string    `json:"channel"`
	TradeNo    string    `json:"trade_no"`
	AmountFen  int64     `json:"amount_fen"`
	Currency   string    `json:"currency"` // "" = CNY
	Status     string    `json:"status"`   // paid, pending, closed, refunded
	TxnID      string    `json:"txn_id"`   // "" = derived as the notification signers derive it
	RefundFen  int64     `json:"refund_fen,omitempty"`
	PaidAt     time.Time `json:"paid_at"`     // zero = when added
	DropNotify bool      `json:"drop_notify"` // do not send the notification (a lost one)
}

// NewFake loads the sandbox keys in dir. notifyURL, when set, is the gateway's base URL that
// trades added through the control API are notified to.
func NewFake(dir, notifyURL string) (*Fake, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	signers, err := LoadSigners(dir)
	if err != nil {
		return nil, err
	}
	return &Fake{dir: dir, manifest: m, signers: signers, notifyURL: notifyURL,
		client: &http.Client{Timeout: 15 * time.Second},
		trades: map[string]FakeTrade{}, asked: map[string]int{}, breaks: map[string]bool{}}, nil
}

// Handler serves the control API and every channel's endpoints.
func (f *Fake) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /_sim/trades", f.addTrade)
	mux.HandleFunc("GET /_sim/asked", f.askedCounts)
	f.channelRoutes(mux)
	return mux
}

// Add records (or replaces) a trade, and notifies the gateway of it unless DropNotify.
func (f *Fake) Add(ctx context.Context, t FakeTrade) (FakeTrade, error) {
	if _, ok := f.signers[t.Channel]; !ok {
		return t, fmt.Errorf("channel %q: want alipay, wechatpay, stripe or unionpay", t.Channel)
	}
	switch t.Status {
	case FakePaid, FakePending, FakeClosed, FakeRefunded:
	default:
		return t, fmt.Errorf("status %q: want paid, pending, closed or refunded", t.Status)
	}
	if t.TradeNo == "" || t.AmountFen <= 0 {
		return t, errors.New("trade_no and a positive amount_fen are required")
	}
	if t.Currency == "" {
		t.Currency = "CNY"
	}
	if t.PaidAt.IsZero() {
		t.PaidAt = time.Now().UTC().Truncate(time.Second)
	}
	if t.TxnID == "" {
		t.TxnID = Payment{TradeNo: t.TradeNo}.normalized(t.Channel).TxnID
	}
	if t.Channel == "unionpay" && !unionPayDigitsOnly(t.TxnID) {
		t.TxnID = unionPayQueryID(t.TradeNo, t.TxnID) // the queryId its messages carry
	}
	f.mu.Lock()
	f.trades[t.Channel+"/"+t.TradeNo] = t
	err := f.save()
	f.mu.Unlock()
	if err != nil {
		return t, fmt.Errorf("state file: %w", err)
	}
	if f.notifyURL == "" || t.DropNotify || t.Status == FakePending {
		return t, nil
	}
	p := Payment{TradeNo: t.TradeNo, AmountFen: t.AmountFen, Currency: t.Currency, TxnID: t.TxnID, Time: t.PaidAt}
	switch t.Status {
	case FakeClosed:
		p.Status = StatusClosed
	case FakeRefunded:
		p.Status, p.RefundFen = StatusRefund, t.RefundFen
	}
	m, err := f.signers[t.Channel].Sign(p)
	if err != nil {
		return t, err
	}
	if r := Send(ctx, f.client, NotifyURL(f.notifyURL, t.Channel), m); r.Err != nil {
		return t, fmt.Errorf("notify: %w", r.Err)
	}
	return t, nil
}

// KeepState loads the trades kept in path (if it exists) and keeps every later change there.
func (f *Fake) KeepState(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stateFile = path
	raw, err := os.ReadFile(path) // #nosec G304 -- the state file the operator names
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var trades []FakeTrade
	if err := json.Unmarshal(raw, &trades); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range trades {
		f.trades[t.Channel+"/"+t.TradeNo] = t
	}
	return nil
}

// save writes the trades to the state file, if any; f.mu is held.
func (f *Fake) save() error {
	if f.stateFile == "" {
		return nil
	}
	trades := make([]FakeTrade, 0, len(f.trades))
	for _, t := range f.trades {
		trades = append(trades, t)
	}
	b, _ := json.MarshalIndent(trades, "", "  ") // plain values: cannot fail
	tmp := f.stateFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f.stateFile)
}

// Trade returns what the fake knows of a trade, and counts the question.
func (f *Fake) Trade(channel, tradeNo string) (FakeTrade, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked[channel+"/"+tradeNo]++
	t, ok := f.trades[channel+"/"+tradeNo]
	return t, ok
}

// Break makes a channel's answers fail on purpose (on), or answer normally again (off), for tests
// of the gateway's refusal: Alipay, WeChat Pay and UnionPay sign wrongly (or alter a signed
// answer, as a tampering middleman would); Stripe's API answers 500.
func (f *Fake) Break(channel string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.breaks[channel] = on
}

func (f *Fake) broken(channel string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.breaks[channel]
}

// Asked is how many queries the fake answered about a trade.
func (f *Fake) Asked(channel, tradeNo string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[channel+"/"+tradeNo]
}

func (f *Fake) addTrade(w http.ResponseWriter, r *http.Request) {
	var t FakeTrade
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		http.Error(w, "bad trade: "+err.Error(), http.StatusBadRequest)
		return
	}
	t, err := f.Add(r.Context(), t)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(t)
}

func (f *Fake) askedCounts(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	counts := make(map[string]int, len(f.asked))
	for k, v := range f.asked {
		counts[k] = v
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(counts)
}

// channelRoutes mounts each channel's API as the fake serves it.
func (f *Fake) channelRoutes(mux *http.ServeMux) {
	// Alipay's gateway serves every method at one address: the bill URL query is told apart
	// from the trade query by its method, in front of the trade query's own mux.
	alipayGateway := http.NewServeMux()
	f.alipayRoutes(alipayGateway)
	f.alipayBillRoutes(mux, alipayGateway)
	f.wechatPayRoutes(mux)
	f.wechatPayBillRoutes(mux)
	f.stripeRoutes(mux)
	f.stripeBillRoutes(mux)
	f.unionPayRoutes(mux)
	f.unionPayBillRoutes(mux)
}

// alipayKeys is what the Alipay fake holds: the app's public key, to check requests, and the
// Alipay signer, to sign answers. err names what the sandbox lacks.
func (f *Fake) alipayKeys() (*rsa.PublicKey, AlipaySigner, error) {
	appKey, err := loadFakePublicKey(f.dir, f.manifest.Alipay.AppPublicKeyFile)
	signer, _ := f.signers["alipay"].(AlipaySigner)
	if err == nil && signer.Key == nil {
		err = errors.New("no Alipay private key")
	}
	return appKey, signer, err
}

// wechatKeys is what the WeChat Pay fake holds: the merchant's public key, to check requests'
// Authorization, and the platform signer, to sign answers. err names what the sandbox lacks.
func (f *Fake) wechatKeys() (*rsa.PublicKey, WeChatPaySigner, error) {
	merchantKey, err := loadFakePublicKey(f.dir, f.manifest.WeChatPay.MerchantPublicKeyFile)
	signer, _ := f.signers["wechatpay"].(WeChatPaySigner)
	if err == nil && signer.Key == nil {
		err = errors.New("no WeChat Pay platform private key")
	}
	return merchantKey, signer, err
}

// sandboxKeysFailed answers 500 and reports true when err says the sandbox keys are unusable.
func sandboxKeysFailed(w http.ResponseWriter, err error) bool {
	if err == nil {
		return false
	}
	http.Error(w, "sandbox keys: "+err.Error(), http.StatusInternalServerError)
	return true
}
