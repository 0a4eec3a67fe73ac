package channels

import (
	"errors"
	"testing"
)

// The tradebill answer: any body is a tradebill the download may follow, or ErrMalformed.
func FuzzParseWeChatTradeBill(f *testing.F) {
	f.Add([]byte(`{"hash_type":"SHA1","hash_value":"79bb0f45fc4c42234a918000b2668d689e2bde04","download_url":"https://api.mch.weixin.qq.com/v3/billdownload/file?token=xx"}`))
	f.Add([]byte(`{"hash_type":"SHA1","hash_type":"MD5"}`))
	f.Add([]byte(`{"download_url":"ftp://x/y"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		tb, err := parseWeChatTradeBill(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		if tb.HashType != "SHA1" || len(tb.HashValue) != 40 || tb.DownloadURL == "" {
			t.Fatalf("accepted %+v", tb)
		}
	})
}

// The file download answer, as the parser and the field checks after verification read it.
func FuzzUnionPayFileContent(f *testing.F) {
	f.Add([]byte("version=5.1.0&signMethod=01&encoding=UTF-8&respCode=00&merId=777290058110048&txnType=76&fileContent=eJwrSS0u"))
	f.Add([]byte("{version=5.1.0&signMethod=01&respCode=98&merId=777290058110048}"))
	f.Add([]byte("version=5.1.0&signMethod=01&respCode=00&merId=1&fileContent={a&b}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		params, err := parseUnionPayResponse(body)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("parse error not ErrMalformed: %v", err)
			}
			return
		}
		content, err := unionPayFileContent("777290058110048", params)
		switch {
		case err == nil && (content == "" || params["respCode"] != "00" || params["merId"] != "777290058110048"):
			t.Fatalf("accepted %q", body)
		case err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrQueryFailed):
			t.Fatalf("error of no class: %v", err)
		}
	})
}
