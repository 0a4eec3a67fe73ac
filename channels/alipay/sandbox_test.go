package alipay

import "github.com/paygw/paygw/channels/internal/channeltest"

// testQuerySandbox is the package's sandbox: the channel's verifier and querier, configured as
// serve configures them, over the fake channel.
var testQuerySandbox = channeltest.Shared(func(s *channeltest.Sandbox) error {
	ch, err := FromConfig(s.Cfg.Channels.Alipay)
	if err != nil {
		return err
	}
	s.Channels["alipay"] = ch
	s.Queriers["alipay"], err = NewQuerier(s.Cfg.Channels.Alipay, ch, nil)
	return err
})
