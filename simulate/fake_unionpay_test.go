package simulate

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

func TestFakeUnionPayQuery(t *testing.T) {
	f, srv, man := newFakeOverHTTP(t)
	dir := f.dir
	pfx, err := os.ReadFile(filepath.Join(dir, man.UnionPay.MerchantSignCertFile))
	if err != nil {
		t.Fatal(err)
	}
	merchantKey, merchantCert, err := pkcs12.Decode(pfx, man.UnionPay.MerchantSignCertPassword)
	if err != nil {
		t.Fatal(err)
	}
	signer := f.signers["unionpay"].(UnionPaySigner)
	at := time.Date(2026, 5, 1, 4, 0, 5, 0, time.UTC) // 12:00:05 in Beijing
	for _, tr := range []FakeTrade{
		{Channel: "unionpay", TradeNo: "T-paid", AmountFen: 1250, Status: FakePaid, PaidAt: at},
		{Channel: "unionpay", TradeNo: "T-pending", AmountFen: 500, Status: FakePending, PaidAt: at},
		{Channel: "unionpay", TradeNo: "T-closed", AmountFen: 700, Status: FakeClosed, PaidAt: at},
	} {
		if _, err := f.Add(context.Background(), tr); err != nil {
			t.Fatal(err)
		}
	}

	request := func(change func(url.Values)) url.Values {
		v := url.Values{"version": {"5.1.0"}, "encoding": {"UTF-8"}, "signMethod": {"01"}, "txnType": {"00"}, "txnSubType": {"00"},
			"bizType": {"000201"}, "accessType": {"0"}, "merId": {man.UnionPay.MerID}, "orderId": {"T-paid"},
			"txnTime": {"20260501120005"}, "certId": {merchantCert.SerialNumber.String()}}
		if err := SignUnionPay(v, merchantKey.(*rsa.PrivateKey)); err != nil {
			t.Fatal(err)
		}
		if change != nil {
			change(v)
		}
		return v
	}
	post := func(t *testing.T, form url.Values) (url.Values, string) {
		t.Helper()
		resp, err := srv.Client().PostForm(srv.URL+"/gateway/api/queryTrans.do", form)
		body := readAll(t, resp, err)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP %d %s", resp.StatusCode, body)
		}
		answer := url.Values{}
		for _, pair := range strings.Split(string(body), "&") { // no value here holds '&'
			k, v, _ := strings.Cut(pair, "=")
			answer.Set(k, v)
		}
		return answer, string(body)
	}

	t.Run("answers", func(t *testing.T) {
		wantQueryID := unionPayQueryID("T-paid", Payment{TradeNo: "T-paid"}.normalized("unionpay").TxnID)
		tests := map[string]struct {
			orderID             string
			respCode, origResp  string
			queryID, txnAmt, at string
		}{
			"paid":    {"T-paid", "00", "00", wantQueryID, "1250", "20260501120005"},
			"pending": {"T-pending", "00", "05", "", "500", "20260501120005"},
			"failed":  {"T-closed", "00", "01", "", "700", "20260501120005"},
			"unknown": {"T-none", "34", "", "", "", "20260501120005"},
		}
		for name, tt := range tests {
			answer, body := post(t, request(func(v url.Values) {
				v.Set("orderId", tt.orderID)
				if err := SignUnionPay(v, merchantKey.(*rsa.PrivateKey)); err != nil {
					t.Fatal(err)
				}
			}))
			if answer.Get("respCode") != tt.respCode || answer.Get("origRespCode") != tt.origResp || answer.Get("txnAmt") != tt.txnAmt ||
				answer.Get("orderId") != tt.orderID || answer.Get("merId") != man.UnionPay.MerID || answer.Get("txnTime") != tt.at ||
				tt.queryID != "" && answer.Get("queryId") != tt.queryID {
				t.Errorf("%s: %s", name, body)
			}
			if err := verifyUnionPayForm(answer, signingCert(t, signer)); err != nil {
				t.Errorf("%s: answer signature: %v", name, err)
			}
			if !strings.Contains(body, "signPubKeyCert=-----BEGIN CERTIFICATE-----\n") {
				t.Errorf("%s: the answer is encoded; UnionPay writes values as they are", name)
			}
		}
	})
	t.Run("refusals", func(t *testing.T) {
		before := f.Asked("unionpay", "T-paid")
		tests := map[string]struct {
			change func(url.Values)
			code   string
		}{
			"altered after signing": {func(v url.Values) { v.Set("orderId", "T-pending") }, "11"},
			"another certId":        {func(v url.Values) { v.Set("certId", "1") }, "11"},
			"no signature":          {func(v url.Values) { v.Del("signature") }, "11"},
			"another merId":         {func(v url.Values) { v.Set("merId", "777290058110097") }, "10"},
			"version":               {func(v url.Values) { v.Set("version", "5.0.0") }, "10"},
			"no orderId":            {func(v url.Values) { v.Del("orderId") }, "10"},
			"txnTime":               {func(v url.Values) { v.Set("txnTime", "2026") }, "10"},
		}
		for name, tt := range tests {
			answer, body := post(t, request(tt.change))
			if answer.Get("respCode") != tt.code || answer.Has("origRespCode") {
				t.Errorf("%s: %s, want respCode %s", name, body, tt.code)
			}
		}
		if n := f.Asked("unionpay", "T-paid") - before; n != 0 {
			t.Errorf("refused requests were counted as questions: %d", n)
		}
	})
	t.Run("broken", func(t *testing.T) {
		f.Break("unionpay", true)
		answer, body := post(t, request(nil))
		if err := verifyUnionPayForm(answer, signingCert(t, signer)); err == nil {
			t.Errorf("broken answer verifies: %s", body)
		}
		if answer.Get("txnAmt") != "1251" {
			t.Errorf("broken answer txnAmt %q, want the amount raised by one", answer.Get("txnAmt"))
		}
		f.Break("unionpay", false)
		answer, _ = post(t, request(nil))
		if err := verifyUnionPayForm(answer, signingCert(t, signer)); err != nil {
			t.Errorf("mended answer: %v", err)
		}
	})
}

func signingCert(t *testing.T, s UnionPaySigner) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(s.CertPEM)
	if block == nil {
		t.Fatal("signing certificate: no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
