package all

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/simulate"
)

// testQuerySandbox is every channel's verifier and the queriers of Alipay and WeChat Pay (the
// two the fake answers over the sandbox's URLs), built as serve builds them.
var testQuerySandbox = channeltest.Shared(func(s *channeltest.Sandbox) error {
	chs, err := FromConfig(s.Cfg.Channels)
	if err != nil {
		return err
	}
	for _, ch := range chs {
		s.Channels[ch.Name()] = ch
	}
	qs, _, err := QueriersFromConfig(s.Cfg.Channels, chs, nil)
	for _, q := range qs {
		s.Queriers[q.Name()] = q
	}
	return err
})

// TestQueryConcurrent: one querier per channel asked about many trades at once; each answer is
// its own trade's (the response a query reads is kept per request, never shared).
func TestQueryConcurrent(t *testing.T) {
	s := testQuerySandbox(t)
	for _, channel := range []string{"alipay", "wechatpay"} {
		t.Run(channel, func(t *testing.T) {
			trades := make([]simulate.FakeTrade, 16)
			for i := range trades {
				trades[i] = s.Add(t, simulate.FakeTrade{Channel: channel, TradeNo: channeltest.NewTradeNo("CC"), AmountFen: int64(100 + i), Status: simulate.FakePaid})
			}
			var wg sync.WaitGroup
			for _, tr := range trades {
				wg.Go(func() {
					a, err := s.Queriers[channel].QueryTrade(context.Background(), channels.TradeQuery{TradeNo: tr.TradeNo})
					switch {
					case err != nil:
						t.Errorf("%s: %v", tr.TradeNo, err)
					case len(a.Events) != 1 || a.Events[0].TradeNo != tr.TradeNo || a.Events[0].AmountFen != tr.AmountFen ||
						a.Events[0].ChannelTxnID != tr.TxnID || !strings.Contains(string(a.Events[0].Raw), tr.TradeNo):
						t.Errorf("%s: answer %s with %d events", tr.TradeNo, a.State, len(a.Events))
					}
				})
			}
			wg.Wait()
		})
	}
}
