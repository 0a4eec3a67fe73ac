package bills

import "time"

// ChinaTime is Beijing time, the day and clock of the Chinese channels (Alipay, WeChat Pay,
// UnionPay). A fixed zone on purpose: China keeps no daylight saving, and a fixed zone does not
// depend on the host's tzdata.
var ChinaTime = time.FixedZone("CST", 8*3600)

// DayZone is the zone channel's business day is counted in, the day its bills cover: ChinaTime
// for Alipay, WeChat Pay and UnionPay; other (reconcile.stripe_timezone) for Stripe and any
// other channel.
func DayZone(channel string, other *time.Location) *time.Location {
	switch channel {
	case "alipay", "wechatpay", "unionpay":
		return ChinaTime
	}
	return other
}
