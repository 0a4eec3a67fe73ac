// Package channeltest holds what the channel packages' tests share: a sandbox of generated keys
// and the fake channel serving them, test files, keys, and the checks every query answer and
// verified event must pass. Tests only.
package channeltest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// Sandbox is one set of sandbox keys, the fake channel serving them over HTTP, and the
// verifiers and queriers a gateway configured with the generated channels.yaml builds.
type Sandbox struct {
	Man      simulate.Manifest
	Cfg      *config.Config
	Fake     *simulate.Fake
	URL      string // the fake's base URL: its Alipay gateway and WeChat Pay API
	Signers  map[string]simulate.Signer
	Channels map[string]channels.Channel
	Queriers map[string]channels.Querier
	AppKey   *rsa.PrivateKey // the merchant's Alipay app key, to build queriers with
	MchKey   *rsa.PrivateKey // the merchant's WeChat Pay API key
}

// Shared returns a function that builds the sandbox once for a test binary (key generation is
// slow) and hands it to every test; build adds the verifiers and queriers of the channels under
// test to Channels and Queriers. Everything is read into memory, so the key directory is gone
// when the sandbox is built.
func Shared(build func(s *Sandbox) error) func(tb testing.TB) *Sandbox {
	var once sync.Once
	var s *Sandbox
	var err error
	return func(tb testing.TB) *Sandbox {
		tb.Helper()
		once.Do(func() { s, err = newSandbox(build) })
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
}

// SharedChannel is Shared for the one channel name under test: its verifier made by fromConfig
// and its querier by newQuerier, from the configuration that cfg picks out, as serve makes them.
func SharedChannel[C any, V channels.Channel](name string, cfg func(*config.Config) C,
	fromConfig func(C) (V, error), newQuerier func(C, V, *http.Client) (channels.Querier, error)) func(tb testing.TB) *Sandbox {
	return Shared(func(s *Sandbox) error {
		ch, err := fromConfig(cfg(s.Cfg))
		if err != nil {
			return err
		}
		s.Channels[name] = ch
		s.Queriers[name], err = newQuerier(cfg(s.Cfg), ch, nil)
		return err
	})
}

func newSandbox(build func(s *Sandbox) error) (*Sandbox, error) {
	dir, err := os.MkdirTemp("", "paygw-query-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	s := &Sandbox{Channels: map[string]channels.Channel{}, Queriers: map[string]channels.Querier{}}
	if s.Man, s.Signers, s.Fake, err = NewKeys(dir, time.Now()); err != nil {
		return nil, err
	}
	srv := httptest.NewServer(s.Fake.Handler()) // lives as long as the test binary
	s.URL = srv.URL
	s.Cfg, err = config.Load(s.Man.ConfigPath, []string{
		"PAYGW_CHANNELS__ALIPAY__GATEWAY_URL=" + srv.URL + "/gateway.do",
		"PAYGW_CHANNELS__WECHATPAY__API_BASE_URL=" + srv.URL,
	})
	if err != nil {
		return nil, err
	}
	for _, k := range []struct {
		dst  **rsa.PrivateKey
		file string
	}{{&s.AppKey, s.Man.Alipay.AppPrivateKeyFile}, {&s.MchKey, s.Man.WeChatPay.MerchantPrivateKeyFile}} {
		b, err := os.ReadFile(filepath.Join(dir, k.file)) // #nosec G304 -- the sandbox's own key directory
		if err != nil {
			return nil, err
		}
		if *k.dst, err = channels.ParseRSAPrivateKey(b); err != nil {
			return nil, err
		}
	}
	return s, build(s)
}

// NewKeys writes a new set of sandbox keys, valid from now, into dir, and loads the simulator's
// signers for them and the fake channel holding them.
func NewKeys(dir string, now time.Time) (simulate.Manifest, map[string]simulate.Signer, *simulate.Fake, error) {
	man, err := simulate.WriteKeys(dir, now)
	if err != nil {
		return simulate.Manifest{}, nil, nil, err
	}
	signers, err := simulate.LoadSigners(dir)
	if err != nil {
		return simulate.Manifest{}, nil, nil, err
	}
	fake, err := simulate.NewFake(dir, "")
	if err != nil {
		return simulate.Manifest{}, nil, nil, err
	}
	return man, signers, fake, nil
}

// LoadConfig is the gateway configuration man's channels.yaml loads to, with env set.
func LoadConfig(tb testing.TB, man simulate.Manifest, env ...string) *config.Config {
	tb.Helper()
	cfg, err := config.Load(man.ConfigPath, env)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// LoadSigners is the simulator's signers for the sandbox keys in dir.
func LoadSigners(tb testing.TB, dir string) map[string]simulate.Signer {
	tb.Helper()
	signers, err := simulate.LoadSigners(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return signers
}

// tradeSeq makes every test's trade_no its own: the fake's store is shared.
var tradeSeq atomic.Int64

// NewTradeNo is a trade_no of prefix no other test uses: the fake's store is shared.
func NewTradeNo(prefix string) string {
	return fmt.Sprintf("%s%d-%d", prefix, time.Now().UnixNano()%1e9, tradeSeq.Add(1))
}

// Add records a trade at the fake, paid a minute ago (whole seconds, as the channels write time).
func (s *Sandbox) Add(tb testing.TB, t simulate.FakeTrade) simulate.FakeTrade {
	tb.Helper()
	if t.PaidAt.IsZero() {
		t.PaidAt = time.Now().Add(-time.Minute).Truncate(time.Second)
	}
	t, err := s.Fake.Add(context.Background(), t)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// Notified is the event the channel's notification of t maps to: signed by the simulator, read
// by the verifier. status is the simulator's (paid, refund).
func (s *Sandbox) Notified(tb testing.TB, t simulate.FakeTrade, status string) payment.Event {
	tb.Helper()
	return SignVerified(tb, s.Signers[t.Channel], s.Channels[t.Channel], simulate.Payment{TradeNo: t.TradeNo, AmountFen: t.AmountFen,
		Currency: t.Currency, TxnID: t.TxnID, Time: t.PaidAt, Status: status, RefundFen: t.RefundFen}, time.Now())
}

// SignVerified is the event ch reads at now from p's notification as signer signs it.
func SignVerified(tb testing.TB, signer simulate.Signer, ch channels.Channel, p simulate.Payment, now time.Time) payment.Event {
	tb.Helper()
	m, err := signer.Sign(p)
	if err != nil {
		tb.Fatal(err)
	}
	ev, err := ch.Verify(m.Body, m.Header, now)
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

// SameMoney fails unless the query's event and the notification's name one payment: trade,
// transaction id, kind, amount, currency and time.
func SameMoney(t *testing.T, what string, got, want payment.Event) {
	t.Helper()
	if got.TradeNo != want.TradeNo || got.ChannelTxnID != want.ChannelTxnID || got.Kind != want.Kind ||
		got.AmountFen != want.AmountFen || got.Currency != want.Currency || !got.PaidAt.Equal(want.PaidAt) ||
		got.RefundFen != want.RefundFen || got.RefundIsTotal != want.RefundIsTotal || got.Channel != want.Channel {
		t.Errorf("%s:\n query        %+v\n notification %+v", what, Brief(got), Brief(want))
	}
}

// Brief is ev in one line, for messages.
func Brief(ev payment.Event) string {
	return fmt.Sprintf("{%s %s trade=%s txn=%s amount=%d %s at=%s refund=%d total=%v notify=%s}", ev.Channel, ev.Kind,
		ev.TradeNo, ev.ChannelTxnID, ev.AmountFen, ev.Currency, ev.PaidAt.UTC().Format(time.RFC3339), ev.RefundFen, ev.RefundIsTotal, ev.NotifyID)
}

// WantErr fails unless err wraps sentinel.
func WantErr(t *testing.T, err, sentinel error, what string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: error %v, want %v", what, err, sentinel)
	}
}

// OutsiderKey is a 2048-bit key that none of the sandbox's parties holds, the same one for
// every test of the binary.
func OutsiderKey(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	return testenv.RSAKey(tb, "channeltest: held by no party")
}

// WriteKeyFile writes key as PEM into a file of the test's own, and returns its path.
func WriteKeyFile(tb testing.TB, key *rsa.PrivateKey) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "key.pem")
	if err := os.WriteFile(path, simulate.PEMPrivateKey(key), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// ReadKeyFile reads the PEM RSA private key at path, as the gateway reads its key files.
func ReadKeyFile(tb testing.TB, path string) *rsa.PrivateKey {
	tb.Helper()
	return readFile(tb, path, channels.ParseRSAPrivateKey)
}

// ReadCertFile reads the one PEM certificate at path.
func ReadCertFile(tb testing.TB, path string) *x509.Certificate {
	tb.Helper()
	certs := readFile(tb, path, channels.ParseCertificates)
	if len(certs) != 1 {
		tb.Fatalf("%s: %d certificates, want one", path, len(certs))
	}
	return certs[0]
}

// readFile is the file at path as parse reads it, failing tb on an error of either.
func readFile[T any](tb testing.TB, path string, parse func([]byte) (T, error)) T {
	tb.Helper()
	b, err := os.ReadFile(path) // #nosec G304 -- a test's own file
	if err != nil {
		tb.Fatal(err)
	}
	v, err := parse(b)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return v
}

// FixedResponse answers every request with status and body, without a network.
type FixedResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// RoundTrip answers req.
func (f *FixedResponse) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: f.Status, Header: f.Header.Clone(), Body: io.NopCloser(bytes.NewReader(f.Body)),
		Request: req, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// FuzzTradeNo is the trade the fuzzed queriers are asked about.
const FuzzTradeNo = "T20260501-0001"

// CheckAnswer is what holds for every answer of any querier to a question about asked.
func CheckAnswer(t *testing.T, channel, asked string, body []byte, a channels.TradeAnswer, err error) {
	t.Helper()
	if err != nil {
		n := 0
		for _, s := range []error{channels.ErrQueryFailed, channels.ErrBadSignature, channels.ErrMalformed} {
			if errors.Is(err, s) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("error %v wraps %d of ErrQueryFailed, ErrBadSignature, ErrMalformed, want 1", err, n)
		}
		if a.State != "" || a.Events != nil {
			t.Fatalf("an answer %+v with error %v", a, err)
		}
		return
	}
	var kinds []payment.Kind
	for _, ev := range a.Events {
		kinds = append(kinds, ev.Kind)
		if _, cerr := channels.CheckEvent(ev); cerr != nil {
			t.Fatalf("event fails the width checks: %v", cerr)
		}
		switch {
		case ev.Channel != channel || ev.TradeNo != asked || !bytes.Equal(ev.Raw, body):
			t.Fatalf("event %s for %s: wrong channel, trade or raw body", Brief(ev), asked)
		case ev.Kind == payment.KindPaid && ev.NotifyID != channels.QueryNotifyID(ev.ChannelTxnID):
			t.Fatalf("payment notify id %q", ev.NotifyID)
		case ev.Kind == payment.KindClosed && ev.NotifyID != "query:close:"+asked:
			t.Fatalf("close notify id %q", ev.NotifyID)
		case ev.Kind == payment.KindRefund && (ev.NotifyID != "query:refund:"+ev.ChannelTxnID || ev.RefundFen != ev.AmountFen || !ev.RefundIsTotal):
			t.Fatalf("refund %s", Brief(ev))
		}
	}
	// Alipay states a full refund's amount; WeChat's order query states none.
	want := map[channels.TradeState]string{channels.TradeNotPaid: "[]", channels.TradePaid: "[PAID]", channels.TradeClosed: "[CLOSED]",
		channels.TradeRefunded: map[string]string{"alipay": "[PAID REFUND]", "wechatpay": "[PAID]"}[channel]}
	if got := fmt.Sprint(kinds); got != want[a.State] {
		t.Fatalf("state %q with events %s", a.State, got)
	}
	if a.Status == "" {
		t.Fatal("an answer without the channel's status")
	}
}

// ReadTestFile is the text of testdata/name.
func ReadTestFile(tb testing.TB, name string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name)) // #nosec G304 -- a test's own testdata file
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

// ReadVectors is the lines of testdata/name that are neither blank nor # comments, each split
// at tabs into fields; a line of another number of fields fails tb.
func ReadVectors(tb testing.TB, name string, fields int) [][]string {
	tb.Helper()
	var vectors [][]string
	for line := range strings.Lines(ReadTestFile(tb, name)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != fields {
			tb.Fatalf("%s: want %d tab-separated fields, got %d", name, fields, len(f))
		}
		vectors = append(vectors, f)
	}
	return vectors
}

// FormVector is one line of a form-signing channel's testdata vectors file, made with openssl by
// its make_*_vectors.sh, not by the code under test: what was signed (Alipay's signed string,
// UnionPay's hex SHA-256 of it) and the signed form body.
type FormVector struct{ Signed, Body string }

// ReadFormVectors is the vectors of testdata/name (name<TAB>signed<TAB>body) by name.
func ReadFormVectors(tb testing.TB, name string) map[string]FormVector {
	tb.Helper()
	vectors := make(map[string]FormVector)
	for _, f := range ReadVectors(tb, name, 3) {
		vectors[f[0]] = FormVector{Signed: f[1], Body: f[2]}
	}
	return vectors
}

// SeedForms adds the vectors' bodies, then extra, to f's corpus, and returns the vectors'
// bodies: the seeds a Verify fuzz target expects to verify (VerifiedSeeds).
func SeedForms(f *testing.F, vectors map[string]FormVector, extra ...string) [][]byte {
	f.Helper()
	var signed [][]byte
	for _, v := range vectors {
		f.Add([]byte(v.Body))
		signed = append(signed, []byte(v.Body))
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
	return signed
}

// IssueCert makes a certificate from tmpl for pub, signed by parentKey as parent (self-signed
// when parent is nil), with a serial from the clock when tmpl has none.
func IssueCert(tb testing.TB, tmpl, parent *x509.Certificate, pub any, parentKey crypto.Signer) *x509.Certificate {
	tb.Helper()
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	}
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// ReadPrivateKey reads the PKCS#8 RSA key testdata/name.
func ReadPrivateKey(tb testing.TB, name string) *rsa.PrivateKey {
	tb.Helper()
	block, _ := pem.Decode([]byte(ReadTestFile(tb, name)))
	if block == nil {
		tb.Fatalf("%s: no PEM block", name)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return key.(*rsa.PrivateKey)
}

// AssertEvent fails unless got is want, PaidAt compared as instants.
func AssertEvent(t *testing.T, got, want payment.Event) {
	t.Helper()
	if !got.PaidAt.Equal(want.PaidAt) || got.PaidAt.IsZero() != want.PaidAt.IsZero() {
		t.Errorf("PaidAt = %v, want %v", got.PaidAt, want.PaidAt)
	}
	if !bytes.Equal(got.Raw, want.Raw) {
		t.Errorf("Raw = %q, want the body", got.Raw)
	}
	got.PaidAt, want.PaidAt, got.Raw, want.Raw = time.Time{}, time.Time{}, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("event\n got %+v\nwant %+v", got, want)
	}
}

// WantVerify fails t unless Verify's ev and err for body are what a table wants: with want nil,
// an event carrying body, a trade_no and a notify id; otherwise an error wrapping want and the
// zero event. It reports whether an error was wanted, so that the caller goes on to its text.
func WantVerify(t *testing.T, body string, ev payment.Event, err, want error) bool {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if ev.TradeNo == "" || ev.NotifyID == "" || !bytes.Equal(ev.Raw, []byte(body)) {
			t.Errorf("incomplete event %+v", ev)
		}
		return false
	}
	if !errors.Is(err, want) {
		t.Fatalf("Verify error = %v, want %v", err, want)
	}
	if !reflect.DeepEqual(ev, payment.Event{}) {
		t.Errorf("event %+v returned with an error", ev)
	}
	return true
}

// Refused reports whether a parser refused its input (err is not nil), and fails t unless such a
// refusal wraps channels.ErrMalformed, as a refusal of outside input must; what names the parser.
func Refused(t *testing.T, err error, what string) bool {
	t.Helper()
	if err != nil && !errors.Is(err, channels.ErrMalformed) {
		t.Fatalf("%s error %v does not wrap channels.ErrMalformed", what, err)
	}
	return err != nil
}

// IsSentinel reports whether err is one of the package's refusals, as every error from outside
// input must be: the HTTP layer maps only those.
func IsSentinel(err error) bool {
	for _, s := range []error{channels.ErrMalformed, channels.ErrBadSignature, channels.ErrNotOurs, channels.ErrUnsupported} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// SameAsNotified compares what makes two events the same payment (or refund) to apply. A refund's
// PaidAt is not read by apply; a query cannot know when the refund happened.
func SameAsNotified(t *testing.T, got, want payment.Event) {
	t.Helper()
	if got.Channel != want.Channel || got.TradeNo != want.TradeNo || got.ChannelTxnID != want.ChannelTxnID ||
		got.Kind != want.Kind || got.AmountFen != want.AmountFen || got.Currency != want.Currency ||
		got.Kind == payment.KindPaid && !got.PaidAt.Equal(want.PaidAt) || got.RefundFen != want.RefundFen || got.RefundIsTotal != want.RefundIsTotal {
		t.Errorf("query event\n %+v\nnotification event\n %+v", EventNoRaw(got), EventNoRaw(want))
	}
}

// EventNoRaw is ev without its raw body, for messages.
func EventNoRaw(ev payment.Event) payment.Event { ev.Raw = nil; return ev }

// CheckAnswerInvariants holds what every answer must: events for its state only, each about the trade
// asked, a refund right after the payment it undoes.
func CheckAnswerInvariants(t *testing.T, a channels.TradeAnswer, tradeNo string) {
	t.Helper()
	for i, ev := range a.Events {
		if _, err := channels.CheckEvent(ev); err != nil || ev.TradeNo != tradeNo {
			t.Fatalf("event %d %+v: %v (trade %q)", i, EventNoRaw(ev), err, tradeNo)
		}
		if ev.AmountFen < 0 || ev.AmountFen > channels.MaxFen || ev.RefundFen < 0 || ev.RefundFen > channels.MaxFen {
			t.Fatalf("event %d: amount out of range %+v", i, EventNoRaw(ev))
		}
	}
	kinds := func() (paid, refunds, closes int) {
		for i, ev := range a.Events {
			switch ev.Kind {
			case payment.KindPaid:
				paid++
				if ev.NotifyID != channels.QueryNotifyID(ev.ChannelTxnID) {
					t.Fatalf("payment NotifyID %q", ev.NotifyID)
				}
			case payment.KindRefund:
				refunds++
				if i == 0 || a.Events[i-1].Kind != payment.KindPaid || a.Events[i-1].ChannelTxnID != ev.ChannelTxnID || !ev.RefundIsTotal {
					t.Fatalf("refund %d does not follow its payment: %+v", i, a.Events)
				}
			case payment.KindClosed:
				closes++
				// Stripe closes one PaymentIntent (retrieved by id), the others the trade.
				if ev.NotifyID != "query:close:"+tradeNo && !(ev.Channel == "stripe" && ev.NotifyID == "query:close:"+ev.ChannelTxnID) {
					t.Fatalf("close NotifyID %q", ev.NotifyID)
				}
			default:
				t.Fatalf("event %d of kind %s", i, ev.Kind)
			}
		}
		return
	}
	paid, refunds, closes := kinds()
	ok := false
	switch a.State {
	case channels.TradeNotPaid:
		ok = len(a.Events) == 0
	case channels.TradePaid:
		ok = paid > 0 && refunds == 0 && closes == 0
	case channels.TradeRefunded:
		ok = paid > 0 && refunds > 0 && closes == 0
	case channels.TradeClosed:
		ok = len(a.Events) == 1 && closes == 1
	}
	if !ok {
		t.Fatalf("state %s with %d payments, %d refunds, %d closes", a.State, paid, refunds, closes)
	}
}

// BillLines reads every line of b, failing on any bad one.
func BillLines(t *testing.T, b *channels.BillFile) []bills.Line {
	t.Helper()
	r, err := b.Open()
	if err != nil {
		t.Fatal(err)
	}
	var lines []bills.Line
	for {
		l, err := r.Next()
		if err == io.EOF {
			return lines
		}
		if err != nil {
			t.Fatalf("%s bill: %v", b.Channel, err)
		}
		lines = append(lines, l)
	}
}

// SameAsASeed fails unless ev, accepted from a fuzzed input, is the event one of the seeds
// verified to, but for its raw body: a signature covers every field an event is made of, so a
// mutation that still verifies may change how the fields are written, never what they say.
func SameAsASeed(t *testing.T, ev payment.Event, seeds []payment.Event) {
	t.Helper()
	got := sansRaw(ev)
	for _, s := range seeds {
		if reflect.DeepEqual(got, sansRaw(s)) {
			return
		}
	}
	t.Fatalf("a mutated input verified to an event no seed carries: %+v", got)
}

// VerifiedSeeds is the events of the seeds that verify; a Verify fuzz target without any would
// check SameAsASeed of nothing, so it fails.
func VerifiedSeeds(f *testing.F, verify func(i int) (payment.Event, error), n int) []payment.Event {
	f.Helper()
	var evs []payment.Event
	for i := range n {
		if ev, err := verify(i); err == nil {
			evs = append(evs, ev)
		}
	}
	if len(evs) == 0 {
		f.Fatal("no seed verifies")
	}
	return evs
}

// sansRaw is ev without its raw body and with its time in UTC, for comparing what it says.
func sansRaw(ev payment.Event) payment.Event {
	ev.Raw = nil
	if !ev.PaidAt.IsZero() {
		ev.PaidAt = ev.PaidAt.UTC()
	}
	return ev
}
