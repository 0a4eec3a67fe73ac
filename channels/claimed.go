package channels

import (
	"encoding/json"
	"net/url"

	"github.com/paygw/paygw/payment"
)

// ClaimedTradeNo reads the trade_no a message claims to be about WITHOUT verifying it: only for
// telling an operator "notifications for this order were refused", never for acting on one.
// It returns "" when the message names none in our shape (WeChat's is encrypted: "").
func ClaimedTradeNo(channel string, body []byte) string {
	var claimed string
	switch channel {
	case "alipay", "unionpay":
		values, err := url.ParseQuery(string(body))
		if err != nil {
			return ""
		}
		claimed = values.Get("out_trade_no")
		if channel == "unionpay" {
			claimed = values.Get("orderId")
		}
	case "stripe":
		var ev struct {
			Data struct {
				Object struct {
					Metadata          map[string]any `json:"metadata"`
					ClientReferenceID string         `json:"client_reference_id"`
				} `json:"object"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &ev) != nil {
			return ""
		}
		claimed, _ = ev.Data.Object.Metadata["trade_no"].(string)
		if claimed == "" {
			claimed = ev.Data.Object.ClientReferenceID
		}
	}
	if !payment.ValidTradeNo(claimed) {
		return ""
	}
	return claimed
}
