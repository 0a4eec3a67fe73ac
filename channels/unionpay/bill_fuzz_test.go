package unionpay

import (
	"errors"
	"testing"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/channeltest"
)

// The file download answer, as the parser and the field checks after verification read it.
func FuzzUnionPayFileContent(f *testing.F) {
	f.Add([]byte("version=5.1.0&signMethod=01&encoding=UTF-8&respCode=00&merId=777290058110048&txnType=76&fileContent=eJwrSS0u"))
	f.Add([]byte("{version=5.1.0&signMethod=01&respCode=98&merId=777290058110048}"))
	f.Add([]byte("version=5.1.0&signMethod=01&respCode=00&merId=1&fileContent={a&b}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		params, err := parseUnionPayResponse(body)
		if channeltest.Refused(t, err, "parseUnionPayResponse") {
			return
		}
		content, err := unionPayFileContent("777290058110048", params)
		switch {
		case err == nil && (content == "" || params["respCode"] != "00" || params["merId"] != "777290058110048"):
			t.Fatalf("accepted %q", body)
		case err != nil && !errors.Is(err, channels.ErrMalformed) && !errors.Is(err, channels.ErrQueryFailed):
			t.Fatalf("error of no class: %v", err)
		}
	})
}
