package unionpay

import "testing"

func TestUnionPayFileURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://gateway.95516.com/gateway/api/queryTrans.do":      "https://filedownload.95516.com/",
		"https://gateway.test.95516.com/gateway/api/queryTrans.do": "https://filedownload.test.95516.com/",
		"http://127.0.0.1:8090/gateway/api/queryTrans.do":          "http://127.0.0.1:8090/",
		"https://gateway.example.com/q":                            "https://gateway.example.com/",
	} {
		if got := unionPayFileURL(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
