package bills

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// Whose bill it is and which day it covers, as each format states it: Alipay's # lines, WeChat's
// and UnionPay's columns on every line. The bill run checks them against the configuration.

func TestAlipayHeader(t *testing.T) {
	sample := alipaySample(t)
	period := "#起始日期：[2019年09月16日 00:00:00]   终止日期：[2019年09月17日 00:00:00]"
	if !strings.Contains(sample, period) {
		t.Fatal("the sample's period line changed")
	}
	cases := []struct {
		name, text  string
		account     string
		accountLine int
		from, to    time.Time
		periodLine  int
	}{
		{"the sample", sample, "20880211096256330156", 2, cst("2019-09-16 00:00:00"), cst("2019-09-17 00:00:00"), 3},
		{"ASCII colons", strings.NewReplacer("#账号：", "#账号:", "#起始日期：", "#起始日期: ", "终止日期：", "终止日期:").Replace(sample),
			"20880211096256330156", 2, cst("2019-09-16 00:00:00"), cst("2019-09-17 00:00:00"), 3},
		{"no period line", strings.Replace(sample, period+"\n", "", 1), "20880211096256330156", 2, time.Time{}, time.Time{}, 0},
		{"an unreadable period", strings.Replace(sample, "2019年09月17日 00:00:00", "tomorrow", 1),
			"20880211096256330156", 2, time.Time{}, time.Time{}, 3},
		{"no account line", strings.Replace(sample, "#账号：[20880211096256330156]\n", "", 1), "", 0,
			cst("2019-09-16 00:00:00"), cst("2019-09-17 00:00:00"), 2},
		{"an account without brackets", strings.Replace(sample, "[20880211096256330156]", "20880211096256330156", 1), "", 2,
			cst("2019-09-16 00:00:00"), cst("2019-09-17 00:00:00"), 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewAlipayCSV(bytes.NewReader(gbk(t, c.text)))
			if _, err := r.Next(); err != nil {
				t.Fatalf("first line: %v", err)
			}
			h := r.Header()
			if h.Account != c.account || h.AccountLine != c.accountLine || !h.From.Equal(c.from) || !h.To.Equal(c.to) ||
				h.PeriodLine != c.periodLine || !h.Stated || h.TimeField != "完成时间" || h.MerchantField != "" {
				t.Fatalf("header %+v", h)
			}
		})
	}
}

func TestLineMerchants(t *testing.T) {
	sample, err := os.ReadFile("testdata/wechat_sample.txt")
	if err != nil {
		t.Fatal(err)
	}
	w := NewWeChat(bytes.NewReader(sample))
	res := readAll(t, w, 100)
	if res.err != nil || len(res.lines) == 0 {
		t.Fatalf("wechat sample: %v, %d lines", res.err, len(res.lines))
	}
	for _, l := range res.lines {
		if l.Merchant != "1601959334" || l.AppID != "wx81be3101902f7cb2" {
			t.Fatalf("wechat line %d: merchant %q, appid %q", l.No, l.Merchant, l.AppID)
		}
	}
	if h := w.Header(); h.MerchantField != "商户号" || h.AppIDField != "公众账号ID" || h.TimeField != "交易时间" || h.Stated {
		t.Fatalf("wechat header %+v", h)
	}

	u := NewUnionPayZM(bytes.NewReader(zmFile(t, "\n", zmRow("01", "0101000001", "100", "512501010000010002", "T2", ""))),
		time.Date(2025, 1, 1, 0, 0, 0, 0, ChinaTime))
	res = readAll(t, u, 10)
	if res.err != nil || len(res.lines) != 1 || res.lines[0].Merchant != "777290058110048" || res.lines[0].AppID != "" {
		t.Fatalf("unionpay: %v, %+v", res.err, res.lines)
	}
	if h := u.Header(); h.MerchantField != "商户代码" || h.AppIDField != "" {
		t.Fatalf("unionpay header %+v", h)
	}

	for _, r := range []Headed{NewStripe(strings.NewReader("")), NewCSV(strings.NewReader(""))} {
		if h := r.Header(); h.MerchantField != "" || h.AppIDField != "" || h.Stated || h.TimeField == "" {
			t.Fatalf("%T header %+v: the format names no merchant", r, h)
		}
	}
}
