package channeltest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/simulate"
)

// Ask asks the sandbox's querier of channel about tradeNo, failing t on an error, and checks
// that the fake was asked exactly once.
func (s *Sandbox) Ask(t *testing.T, channel, tradeNo string) channels.TradeAnswer {
	t.Helper()
	before := s.Fake.Asked(channel, tradeNo)
	a, err := s.Queriers[channel].QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tradeNo})
	if err != nil {
		t.Fatalf("QueryTrade: %v", err)
	}
	if n := s.Fake.Asked(channel, tradeNo); n != before+1 {
		t.Errorf("the fake was asked %d times, want once", n-before)
	}
	return a
}

// WantNotPaid asks about tradeNo (pending at the fake, or unknown to it): the answer must be
// NOT_PAID with the channel's own status and no events.
func (s *Sandbox) WantNotPaid(t *testing.T, channel, tradeNo, status string) {
	t.Helper()
	if a := s.Ask(t, channel, tradeNo); a.State != channels.TradeNotPaid || a.Status != status || len(a.Events) != 0 {
		t.Errorf("answer %+v, want NOT_PAID %s without events", a, status)
	}
}

// WantBadSignature breaks the fake's signatures and asks about a paid trade and an unknown one
// (trade numbers starting with prefix): both must fail with channels.ErrBadSignature, and no
// answer may come with the error. notFound names the unknown trade's answer in messages.
func (s *Sandbox) WantBadSignature(t *testing.T, channel, prefix, notFound string) {
	t.Helper()
	q := s.Queriers[channel]
	tr := s.Add(t, simulate.FakeTrade{Channel: channel, TradeNo: NewTradeNo(prefix), AmountFen: 100, Status: simulate.FakePaid})
	s.Fake.Break(channel, true)
	defer s.Fake.Break(channel, false)
	a, err := q.QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tr.TradeNo})
	WantErr(t, err, channels.ErrBadSignature, "a wrongly signed answer")
	if a.State != "" || a.Events != nil {
		t.Errorf("an answer came with the error: %+v", a)
	}
	_, err = q.QueryTrade(context.Background(), channels.TradeQuery{TradeNo: NewTradeNo(prefix)})
	WantErr(t, err, channels.ErrBadSignature, "a wrongly signed "+notFound)
}

// WantRefused asks other, a querier of channel that signs with a key the fake does not know,
// about tradeNo: the query must fail with channels.ErrQueryFailed, its error must say why
// (contain says), and the fake must not have looked the trade up.
func (s *Sandbox) WantRefused(t *testing.T, other channels.Querier, channel, tradeNo, says string) {
	t.Helper()
	_, err := other.QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tradeNo})
	WantErr(t, err, channels.ErrQueryFailed, "a request the channel refused")
	if !strings.Contains(fmt.Sprint(err), says) {
		t.Errorf("error %v does not say %s", err, says)
	}
	if n := s.Fake.Asked(channel, tradeNo); n != 0 {
		t.Errorf("the fake looked the trade up %d times for a badly signed request", n)
	}
}

// SignedQuery is what a channel that signs its query answers says where every such channel
// behaves alike; RunSignedQuery asks it.
type SignedQuery struct {
	Channel  string // as the fake and Queriers name it
	Prefix   string // one letter starting the trade numbers these subtests make
	Pending  string // the channel's status of a trade not paid yet
	NotFound string // the channel's status of a trade it does not know
	Missing  string // its answer for a trade it does not know, in messages ("404")

	Other   channels.Querier // a querier signing with a key the fake does not know
	Refused string           // what Other's error must say
}

// RunSignedQuery runs the subtests of q's channel that read alike across signed channels: a
// pending and an unknown trade (NOT_PAID with the channel's status, WantNotPaid), answers signed
// with the wrong key (WantBadSignature), and a request signed with the wrong key (WantRefused).
func (s *Sandbox) RunSignedQuery(t *testing.T, q SignedQuery) {
	t.Run("pending", func(t *testing.T) {
		tr := s.Add(t, simulate.FakeTrade{Channel: q.Channel, TradeNo: NewTradeNo(q.Prefix + "W"), AmountFen: 500, Status: simulate.FakePending})
		s.WantNotPaid(t, q.Channel, tr.TradeNo, q.Pending)
	})
	t.Run("not found", func(t *testing.T) {
		s.WantNotPaid(t, q.Channel, NewTradeNo(q.Prefix+"N"), q.NotFound)
	})
	t.Run("bad signature", func(t *testing.T) {
		s.WantBadSignature(t, q.Channel, q.Prefix+"B", q.Missing)
	})
	t.Run("request signed with another key", func(t *testing.T) {
		s.WantRefused(t, q.Other, q.Channel, NewTradeNo(q.Prefix+"K"), q.Refused)
	})
}

// WantCanceled asks q about tq with a cancelled context: the query must fail with
// channels.ErrQueryFailed wrapping context.Canceled.
func WantCanceled(t *testing.T, q channels.Querier, tq channels.TradeQuery) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := q.QueryTrade(ctx, tq)
	WantErr(t, err, channels.ErrQueryFailed, "a cancelled context")
	WantErr(t, err, context.Canceled, "a cancelled context")
}

// ServeFake writes a new set of sandbox keys, valid from now, into dir and serves the fake
// channel holding them until the test ends; for tests that need keys of their own rather than
// the Shared sandbox.
func ServeFake(t *testing.T, dir string, now time.Time) (simulate.Manifest, *simulate.Fake, *httptest.Server) {
	t.Helper()
	man, err := simulate.WriteKeys(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	fake, err := simulate.NewFake(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fake.Handler())
	t.Cleanup(srv.Close)
	return man, fake, srv
}

// FakeEnv is the fake channel over HTTP with fresh sandbox keys made at Now, for the tests of
// one channel that need keys of their own rather than the Shared sandbox.
type FakeEnv struct {
	Channel string // as the fake names it
	Dir     string // the keys and the manifest
	Man     simulate.Manifest
	Fake    *simulate.Fake
	Srv     *httptest.Server
	Now     time.Time // UTC, to the second
}

// NewFakeEnv writes the keys and serves the fake until the test ends (ServeFake).
func NewFakeEnv(t *testing.T, channel string) *FakeEnv {
	t.Helper()
	e := &FakeEnv{Channel: channel, Dir: t.TempDir(), Now: time.Now().UTC().Truncate(time.Second)}
	e.Man, e.Fake, e.Srv = ServeFake(t, e.Dir, e.Now)
	return e
}

// Add records tr at the fake for the env's channel, paid at Now unless tr says when.
func (e *FakeEnv) Add(t *testing.T, tr simulate.FakeTrade) simulate.FakeTrade {
	t.Helper()
	tr.Channel = e.Channel
	if tr.PaidAt.IsZero() {
		tr.PaidAt = e.Now
	}
	tr, err := e.Fake.Add(context.Background(), tr)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Ask asks q about tq, failing t on an error, and returns the answer and how many times the fake
// was asked about tq's trade meanwhile.
func (e *FakeEnv) Ask(t *testing.T, q channels.Querier, tq channels.TradeQuery) (channels.TradeAnswer, int) {
	t.Helper()
	before := e.Fake.Asked(e.Channel, tq.TradeNo)
	a, err := q.QueryTrade(context.Background(), tq)
	if err != nil {
		t.Fatalf("QueryTrade: %v", err)
	}
	return a, e.Fake.Asked(e.Channel, tq.TradeNo) - before
}

// AskNew records tr at the fake and asks the querier of its channel about it. It fails t unless
// the answer is state with n events and, where status is not empty, the channel's status.
func (s *Sandbox) AskNew(t *testing.T, tr simulate.FakeTrade, state channels.TradeState, status string, n int) (simulate.FakeTrade, channels.TradeAnswer) {
	t.Helper()
	tr = s.Add(t, tr)
	a := s.Ask(t, tr.Channel, tr.TradeNo)
	if a.State != state || (status != "" && a.Status != status) || len(a.Events) != n {
		t.Fatalf("answer %s %s with %d events, want %s %s with %d", a.State, a.Status, len(a.Events), state, status, n)
	}
	return tr, a
}

// WantConfigRefused fails t unless err refuses a querier's configuration as a constructor must:
// channels.ErrNoCredentials exactly when noCreds, naming the configuration key, and showing
// neither secret nor any PEM armour.
func WantConfigRefused(t *testing.T, err error, noCreds bool, key, secret string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatal("accepted")
	case errors.Is(err, channels.ErrNoCredentials) != noCreds:
		t.Errorf("error %v: ErrNoCredentials = %v, want %v", err, !noCreds, noCreds)
	case !strings.Contains(err.Error(), key):
		t.Errorf("error %v does not name %s", err, key)
	case strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "BEGIN"):
		t.Errorf("error %v shows key material", err)
	}
}

// WantOnlyErr fails t unless err wraps sentinel and no other of the query sentinels
// (channels.ErrQueryFailed, ErrBadSignature, ErrMalformed), which callers tell apart.
func WantOnlyErr(t *testing.T, err, sentinel error, what string) {
	t.Helper()
	WantErr(t, err, sentinel, what)
	for _, other := range []error{channels.ErrQueryFailed, channels.ErrBadSignature, channels.ErrMalformed} {
		if other != sentinel && errors.Is(err, other) {
			t.Errorf("error %v is also %v", err, other)
		}
	}
}

// ClosedURL is the base URL of a server that has shut down: nothing answers there.
func ClosedURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

// NotAKeyFile writes a file that looks like a PEM private key but holds secret, not a key: a
// constructor refusing it must not show secret.
func NotAKeyFile(t *testing.T, secret string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(path, []byte("-----BEGIN PRIVATE KEY-----\n"+secret+"\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// WantUnreachable asks q, a querier sending to a port where nothing answers (ClosedURL), about
// tq: the query must fail with channels.ErrQueryFailed. The error is returned for the caller's
// own checks.
func WantUnreachable(t *testing.T, q channels.Querier, tq channels.TradeQuery) error {
	t.Helper()
	_, err := q.QueryTrade(context.Background(), tq)
	WantErr(t, err, channels.ErrQueryFailed, "a closed port")
	return err
}

// WantTransportFailures runs what the sandbox's signed channels share about transport:
// unreachable, a querier of channel sending to a closed port, fails (WantUnreachable, whose
// error it returns); the sandbox's querier fails on a cancelled context (WantCanceled) and
// refuses badTradeNo, which cannot be one of ours, with channels.ErrMalformed.
func (s *Sandbox) WantTransportFailures(t *testing.T, channel string, unreachable channels.Querier, badTradeNo string) error {
	t.Helper()
	err := WantUnreachable(t, unreachable, channels.TradeQuery{TradeNo: "T1"})
	WantCanceled(t, s.Queriers[channel], channels.TradeQuery{TradeNo: "T1"})
	_, bad := s.Queriers[channel].QueryTrade(context.Background(), channels.TradeQuery{TradeNo: badTradeNo})
	WantErr(t, bad, channels.ErrMalformed, "a trade_no that cannot be ours")
	return err
}

// ConfigCase is a querier configuration of type C edited one way, and how the constructor must
// refuse it (WantConfigRefused).
type ConfigCase[C any] struct {
	Edit    func(c *C)
	NoCreds bool   // refused as channels.ErrNoCredentials
	Key     string // the configuration key the error names
}

// RunConfigRefusals runs a subtest a case: good edited as the case says must be refused by
// build, a querier's constructor, as WantConfigRefused says, never showing secret.
func RunConfigRefusals[C any](t *testing.T, good C, secret string, build func(C) error, cases map[string]ConfigCase[C]) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := good
			tc.Edit(&c)
			WantConfigRefused(t, build(c), tc.NoCreds, tc.Key, secret)
		})
	}
}
