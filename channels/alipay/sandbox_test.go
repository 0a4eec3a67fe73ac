package alipay

import (
	"github.com/paygw/paygw/channels/internal/channeltest"
	"github.com/paygw/paygw/config"
)

// testQuerySandbox is the package's sandbox: the channel's verifier and querier, configured as
// serve configures them, over the fake channel.
var testQuerySandbox = channeltest.SharedChannel("alipay",
	func(c *config.Config) config.Alipay { return c.Channels.Alipay }, FromConfig, NewQuerier)
