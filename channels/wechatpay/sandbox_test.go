package wechatpay

import (
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
)

// testQuerySandbox is the package's sandbox: the channel's verifier and querier, configured as
// serve configures them, over the fake channel.
var testQuerySandbox = channeltest.SharedChannel("wechatpay",
	func(c *config.Config) config.WeChatPay { return c.Channels.WeChatPay }, FromConfig, NewQuerier)
