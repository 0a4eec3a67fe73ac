package wechatpay

import (
	"testing"

	"github.com/paygw/paygw/channels/internal/channeltest"
)

// The tradebill answer: any body is a tradebill the download may follow, or channels.ErrMalformed.
func FuzzParseWeChatTradeBill(f *testing.F) {
	f.Add([]byte(`{"hash_type":"SHA1","hash_value":"79bb0f45fc4c42234a918000b2668d689e2bde04","download_url":"https://api.mch.weixin.qq.com/v3/billdownload/file?token=xx"}`))
	f.Add([]byte(`{"hash_type":"SHA1","hash_type":"MD5"}`))
	f.Add([]byte(`{"download_url":"ftp://x/y"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tb, err := parseWeChatTradeBill(body)
		if channeltest.Refused(t, err, "parseWeChatTradeBill") {
			return
		}
		if tb.HashType != "SHA1" || len(tb.HashValue) != 40 || tb.DownloadURL == "" {
			t.Fatalf("accepted %+v", tb)
		}
	})
}
