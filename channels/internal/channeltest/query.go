package channeltest

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
