package handlers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/simulate"
)

// rowCounts is everything a request could leave behind in MySQL: the refund ledger's rows and
// what the orders count of it included.
type rowCounts struct {
	Records, Orders, Paid, Journal, Anomalies, StockRows, StockNum int
	Refunds, RefundedFen                                           int
}

func (h *harness) rowCounts() rowCounts {
	h.t.Helper()
	return rowCounts{
		Records:   h.count(`SELECT COUNT(*) FROM idempotent_record`),
		Orders:    h.count(`SELECT COUNT(*) FROM orders`),
		Paid:      h.count(`SELECT COUNT(*) FROM orders WHERE status <> 'WAIT_PAY'`),
		Journal:   h.count(`SELECT COUNT(*) FROM notify_journal`),
		Anomalies: h.count(`SELECT COUNT(*) FROM anomaly`),
		StockRows: h.count(`SELECT COUNT(*) FROM stock`),
		StockNum:  h.count(`SELECT COALESCE(SUM(num), 0) FROM stock`),
		Refunds:   h.count(`SELECT COUNT(*) FROM refund`),
		// the sum as well as the rows: a refund that changed an order counts here
		RefundedFen: h.count(`SELECT COALESCE(SUM(refunded_fen), 0) FROM orders`),
	}
}

// hostileRequest is one request as an attacker (or a broken client) would send it: headers may
// repeat, the body may have no length.
type hostileRequest struct {
	method, path string
	header       http.Header
	body         io.Reader
}

func (h *harness) sendRaw(r hostileRequest) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), r.method, h.url+r.path, r.body)
	if err != nil {
		h.t.Fatal(err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	return roundTrip(h.t, h.rawClient, req)
}

// hostileSigner builds validly signed notifications whose fields a test edits first, so that a
// refusal comes from our parsing, not from the signature.
type hostileSigner struct {
	t       *testing.T
	tradeNo string
	fen     int64
}

func (s hostileSigner) message(channel string) simulate.Message {
	s.t.Helper()
	m, err := sandbox.signers[channel].Sign(simulate.Payment{TradeNo: s.tradeNo, AmountFen: s.fen})
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

// form signs the channel's form notification after edit has changed its fields (alipay, unionpay).
func (s hostileSigner) form(channel string, edit func(url.Values)) []byte {
	s.t.Helper()
	form, err := url.ParseQuery(string(s.message(channel).Body))
	if err != nil {
		s.t.Fatal(err)
	}
	edit(form)
	switch channel {
	case "alipay":
		form.Del("sign")
		form.Del("sign_type")
		err = simulate.SignAlipay(form, "RSA2", alipayKey)
	case "unionpay":
		form.Del("signature")
		err = simulate.SignUnionPay(form, sandbox.signers["unionpay"].(simulate.UnionPaySigner).Key)
	default:
		s.t.Fatalf("no form channel %s", channel)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return []byte(form.Encode())
}

// stripe re-signs the signed event body with each old -> new replacement made (each must occur).
func (s hostileSigner) stripe(replace ...string) simulate.Message {
	s.t.Helper()
	m := s.message("stripe")
	body := string(m.Body)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(body, replace[i]) {
			s.t.Fatalf("stripe body has no %q:\n%s", replace[i], body)
		}
		body = strings.Replace(body, replace[i], replace[i+1], 1)
	}
	m.Body = []byte(body)
	m.Header.Set("Stripe-Signature", simulate.SignStripe(m.Body, sandbox.signers["stripe"].(simulate.StripeSigner).Secret, time.Now()))
	return m
}

// wechat encrypts the transaction resource (with total as its amount.total literal and extra
// members appended), wraps it in an envelope (extra members appended to it too) and signs it.
func (s hostileSigner) wechat(tradeNo, total, resourceExtra, envelopeExtra string) simulate.Message {
	s.t.Helper()
	signer := sandbox.signers["wechatpay"].(simulate.WeChatPaySigner)
	plain := fmt.Sprintf(`{"appid":%q,"mchid":%q,"out_trade_no":%s,"transaction_id":"4200%d","trade_state":"SUCCESS",`+
		`"success_time":"2026-01-02T03:04:05+08:00","amount":{"total":%s,"currency":"CNY"}%s}`,
		signer.AppID, signer.MchID, jsonQuote(tradeNo), time.Now().UnixNano(), total, resourceExtra)
	ciphertext, nonce, err := signer.EncryptResource([]byte(plain), "transaction")
	if err != nil {
		s.t.Fatal(err)
	}
	body := []byte(fmt.Sprintf(`{"id":"hostile-%d","create_time":"2026-01-02T03:04:05+08:00","resource_type":"encrypt-resource",`+
		`"event_type":"TRANSACTION.SUCCESS","summary":"ok","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM",`+
		`"ciphertext":%q,"associated_data":"transaction","nonce":%q}%s}`, time.Now().UnixNano(), ciphertext, nonce, envelopeExtra))
	header, err := signer.SignBody(body, time.Now())
	if err != nil {
		s.t.Fatal(err)
	}
	return simulate.Message{Body: body, Header: header}
}

func notifyRequest(channel string, m simulate.Message) hostileRequest {
	return hostileRequest{method: http.MethodPost, path: "/notify/" + channel, header: m.Header.Clone(), body: bytes.NewReader(m.Body)}
}

func formRequest(channel string, body []byte) hostileRequest {
	return hostileRequest{method: http.MethodPost, path: "/notify/" + channel,
		header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, body: bytes.NewReader(body)}
}

func apiRequest(method, path string, header http.Header, body string) hostileRequest {
	h := http.Header{"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/json"},
		"Idempotency-Key": {"hostile-" + strconv.FormatInt(time.Now().UnixNano(), 10)}}
	for k, vs := range header {
		if vs == nil {
			delete(h, k)
		} else {
			h[k] = vs
		}
	}
	return hostileRequest{method: method, path: path, header: h, body: strings.NewReader(body)}
}

// jsonQuote is s as a JSON string (NUL as \u0000, which Go's %q would not write).
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// chunked hides a reader's length, so the request goes out without Content-Length.
type chunked struct{ io.Reader }

const hostileBodyLimit = 16 << 10

// sqlTradeNos are trade_nos that would hurt if anyone formatted them into SQL.
var sqlTradeNos = map[string]string{
	"quote":     `T1' OR 1=1 --`,
	"drop":      `T1;DROP TABLE orders`,
	"backslash": `T1\\'\"`,
	"nul":       "T1\x00",
}

// TestHostileInput sends what a hostile or broken sender sends. Each is refused (4xx, or the
// channel's refusal reply) and leaves MySQL exactly as it was.
func TestHostileInput(t *testing.T) {
	h := newHarness(t, options{bodyLimit: hostileBodyLimit})
	h.putStock("HOSTILE-1", 100, 1999)
	tn := h.seedOrder(1999)
	sig := hostileSigner{t: t, tradeNo: tn, fen: 1999}
	pad := strings.Repeat("a", hostileBodyLimit)
	refuse := func(ch string) int { return sandbox.replies[ch][payment.ReplyRefuse].Status }

	type hostileCase struct {
		req  func() hostileRequest
		want int    // status
		body string // when set, the exact reply body (a channel's refusal)
	}
	cases := map[string]hostileCase{}
	channelCase := func(name, ch string, req func() hostileRequest) {
		cases[ch+"/"+name] = hostileCase{req: req, want: refuse(ch), body: string(sandbox.replies[ch][payment.ReplyRefuse].Body)}
	}

	// Oversize bodies: a valid signed notification padded past the limit, with and without a
	// Content-Length.
	for _, ch := range channelNames {
		cases[ch+"/oversize"] = hostileCase{want: http.StatusRequestEntityTooLarge, body: string(sandbox.replies[ch][payment.ReplyRefuse].Body),
			req: func() hostileRequest {
				m := sig.message(ch)
				filler := " " + pad // JSON allows trailing space
				if ch == "alipay" || ch == "unionpay" {
					filler = "&pad=" + pad
				}
				m.Body = append(m.Body, filler...)
				return notifyRequest(ch, m)
			}}
		cases[ch+"/oversize chunked"] = hostileCase{want: http.StatusRequestEntityTooLarge,
			req: func() hostileRequest {
				r := notifyRequest(ch, sig.message(ch))
				r.body = chunked{io.MultiReader(r.body, strings.NewReader(pad+pad))}
				return r
			}}
	}
	cases["v1/oversize order"] = hostileCase{want: http.StatusRequestEntityTooLarge, req: func() hostileRequest {
		return apiRequest("POST", "/v1/orders", nil, `{"user_id":1,"sku":"HOSTILE-1","num":1,"note":"`+pad+`"}`)
	}}
	cases["v1/oversize stock"] = hostileCase{want: http.StatusRequestEntityTooLarge, req: func() hostileRequest {
		r := apiRequest("PUT", "/v1/stock/HOSTILE-1", nil, "")
		r.body = chunked{strings.NewReader(`{"num":1,"price_fen":1` + strings.Repeat("0", hostileBodyLimit) + `}`)}
		return r
	}}

	// Invalid UTF-8, signed validly.
	channelCase("invalid UTF-8", "alipay", func() hostileRequest {
		return formRequest("alipay", sig.form("alipay", func(v url.Values) { v.Set("subject", "caf\xe9") }))
	})
	channelCase("invalid UTF-8", "unionpay", func() hostileRequest {
		return formRequest("unionpay", sig.form("unionpay", func(v url.Values) { v.Set("respMsg", "\xff\xfe") }))
	})
	channelCase("invalid UTF-8 in body", "stripe", func() hostileRequest {
		return notifyRequest("stripe", sig.stripe(`"object": "event"`, "\"object\": \"ev\xffent\""))
	})
	channelCase("invalid UTF-8 in envelope", "wechatpay", func() hostileRequest {
		return notifyRequest("wechatpay", sig.wechat(tn, "1999", "", `,"note":"`+"\xc3\x28"+`"`))
	})
	channelCase("invalid UTF-8 in resource", "wechatpay", func() hostileRequest {
		return notifyRequest("wechatpay", sig.wechat(tn, "1999", `,"attach":"`+"\xed\xa0\x80"+`"`, ""))
	})
	cases["v1/invalid UTF-8"] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
		return apiRequest("POST", "/v1/orders", nil, "{\"user_id\":1,\"sku\":\"HOSTILE-1\",\"num\":1,\"x\":\"\xff\"}")
	}}
	cases["v1/invalid UTF-8 stock"] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
		return apiRequest("PUT", "/v1/stock/HOSTILE-1", nil, "{\"num\":1,\"price_fen\":1,\"\xff\":1}")
	}}

	// Duplicate form keys and JSON keys: two readers could each take another one.
	channelCase("duplicate form key", "alipay", func() hostileRequest {
		return formRequest("alipay", append(sig.form("alipay", func(url.Values) {}), "&out_trade_no=T2"...))
	})
	channelCase("duplicate total_amount", "alipay", func() hostileRequest {
		return formRequest("alipay", append(sig.form("alipay", func(url.Values) {}), "&total_amount=0.01"...))
	})
	channelCase("duplicate form key", "unionpay", func() hostileRequest {
		return formRequest("unionpay", append(sig.form("unionpay", func(url.Values) {}), "&txnAmt=1"...))
	})
	channelCase("duplicate JSON key", "stripe", func() hostileRequest {
		return notifyRequest("stripe", sig.stripe(`"amount_received": 1999`, `"amount_received": 1999, "amount_received": 1`))
	})
	channelCase("duplicate JSON key in metadata", "stripe", func() hostileRequest {
		return notifyRequest("stripe", sig.stripe(`"trade_no": "`+tn+`"`, `"trade_no": "`+tn+`", "trade_no": "T2"`))
	})
	channelCase("duplicate JSON key in envelope", "wechatpay", func() hostileRequest {
		return notifyRequest("wechatpay", sig.wechat(tn, "1999", "", `,"event_type":"TRANSACTION.CLOSED"`))
	})
	channelCase("duplicate JSON key in resource", "wechatpay", func() hostileRequest {
		return notifyRequest("wechatpay", sig.wechat(tn, "1999", `,"out_trade_no":"T2"`, ""))
	})
	cases["v1/duplicate JSON key"] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
		return apiRequest("POST", "/v1/orders", nil, `{"user_id":1,"sku":"HOSTILE-1","num":1,"num":2}`)
	}}
	cases["v1/duplicate JSON key stock"] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
		return apiRequest("PUT", "/v1/stock/HOSTILE-1", nil, `{"num":1,"price_fen":1,"num":5}`)
	}}

	// Huge and negative numbers, signed validly: the refusal is our parser's.
	for name, amount := range map[string]string{"huge": "99999999999999999999.99", "1e400": "1e400", "negative": "-0.01", "over max": "1000000000.01"} {
		channelCase("amount "+name, "alipay", func() hostileRequest {
			return formRequest("alipay", sig.form("alipay", func(v url.Values) { v.Set("total_amount", amount) }))
		})
	}
	for name, amount := range map[string]string{"huge": "99999999999999999999.99", "1e400": "1e400", "negative": "-0.01"} {
		channelCase("refund_fee "+name, "alipay", func() hostileRequest {
			return formRequest("alipay", sig.form("alipay", func(v url.Values) {
				v.Set("refund_fee", amount)
				v.Set("out_biz_no", "R-hostile")
			}))
		})
	}
	for name, amount := range map[string]string{"huge": "99999999999999999999", "1e400": "1e400", "negative": "-1", "over max": "100000000001"} {
		channelCase("txnAmt "+name, "unionpay", func() hostileRequest {
			return formRequest("unionpay", sig.form("unionpay", func(v url.Values) { v.Set("txnAmt", amount) }))
		})
	}
	for name, amount := range map[string]string{"huge": "99999999999999999999", "1e400": "1e400", "negative": "-1", "fraction": "1999.0", "over max": "100000000001"} {
		channelCase("amount_received "+name, "stripe", func() hostileRequest {
			return notifyRequest("stripe", sig.stripe(`"amount_received": 1999`, `"amount_received": `+amount))
		})
		channelCase("total "+name, "wechatpay", func() hostileRequest {
			return notifyRequest("wechatpay", sig.wechat(tn, amount, "", ""))
		})
	}
	for name, body := range map[string]string{
		"user_id huge":  `{"user_id":99999999999999999999,"sku":"HOSTILE-1","num":1}`,
		"user_id 1e400": `{"user_id":1e400,"sku":"HOSTILE-1","num":1}`,
		"num huge":      `{"user_id":1,"sku":"HOSTILE-1","num":99999999999999999999}`,
		"num 1e400":     `{"user_id":1,"sku":"HOSTILE-1","num":1e400}`,
		"num negative":  `{"user_id":1,"sku":"HOSTILE-1","num":-1}`,
		"user_id neg":   `{"user_id":-1,"sku":"HOSTILE-1","num":1}`,
		"num fraction":  `{"user_id":1,"sku":"HOSTILE-1","num":1.5}`,
	} {
		cases["v1/order "+name] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
			return apiRequest("POST", "/v1/orders", nil, body)
		}}
	}
	for name, body := range map[string]string{
		"num huge":       `{"num":99999999999999999999,"price_fen":1}`,
		"num 1e400":      `{"num":1e400,"price_fen":1}`,
		"num negative":   `{"num":-1,"price_fen":1}`,
		"price huge":     `{"num":1,"price_fen":99999999999999999999}`,
		"price negative": `{"num":1,"price_fen":-1}`,
	} {
		cases["v1/stock "+name] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
			return apiRequest("PUT", "/v1/stock/HOSTILE-1", nil, body)
		}}
	}

	// trade_no with SQL metacharacters, signed validly.
	for name, bad := range sqlTradeNos {
		channelCase("trade_no "+name, "alipay", func() hostileRequest {
			return formRequest("alipay", sig.form("alipay", func(v url.Values) { v.Set("out_trade_no", bad) }))
		})
		channelCase("orderId "+name, "unionpay", func() hostileRequest {
			return formRequest("unionpay", sig.form("unionpay", func(v url.Values) { v.Set("orderId", bad) }))
		})
		channelCase("out_trade_no "+name, "wechatpay", func() hostileRequest {
			return notifyRequest("wechatpay", sig.wechat(bad, "1999", "", ""))
		})
		cases["v1/order sku "+name] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
			return apiRequest("POST", "/v1/orders", nil, `{"user_id":1,"sku":`+jsonQuote(bad)+`,"num":1}`)
		}}
		cases["v1/stock sku "+name] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
			return apiRequest("PUT", "/v1/stock/"+url.PathEscape(bad), nil, `{"num":1,"price_fen":1}`)
		}}
		cases["v1/get order "+name] = hostileCase{want: http.StatusNotFound, req: func() hostileRequest {
			return apiRequest("GET", "/v1/orders/"+url.PathEscape(bad), nil, "")
		}}
		cases["v1/get payment "+name] = hostileCase{want: http.StatusNotFound, req: func() hostileRequest {
			return apiRequest("GET", "/v1/payments/"+url.PathEscape(bad), nil, "")
		}}
	}

	// Identifiers wider than the columns they go into, signed validly: refused at parse time,
	// never an insert that fails on every redelivery.
	for field, n := range map[string]int{"notify_id": 129, "trade_no": 129, "out_trade_no": 33} {
		channelCase(field+" too wide", "alipay", func() hostileRequest {
			return formRequest("alipay", sig.form("alipay", func(v url.Values) { v.Set(field, strings.Repeat("7", n)) }))
		})
	}
	channelCase("orderId too wide", "unionpay", func() hostileRequest {
		return formRequest("unionpay", sig.form("unionpay", func(v url.Values) { v.Set("orderId", strings.Repeat("7", 33)) }))
	})

	// Headers missing or doubled.
	channelCase("Stripe-Signature missing", "stripe", func() hostileRequest {
		r := notifyRequest("stripe", sig.message("stripe"))
		r.header.Del("Stripe-Signature")
		return r
	})
	channelCase("Stripe-Signature twice", "stripe", func() hostileRequest {
		r := notifyRequest("stripe", sig.message("stripe"))
		r.header.Add("Stripe-Signature", r.header.Get("Stripe-Signature")) // both valid
		return r
	})
	for _, hdr := range []string{"Wechatpay-Signature", "Wechatpay-Timestamp", "Wechatpay-Nonce", "Wechatpay-Serial"} {
		channelCase(hdr+" missing", "wechatpay", func() hostileRequest {
			r := notifyRequest("wechatpay", sig.message("wechatpay"))
			r.header.Del(hdr)
			return r
		})
		channelCase(hdr+" twice", "wechatpay", func() hostileRequest {
			r := notifyRequest("wechatpay", sig.message("wechatpay"))
			r.header.Add(hdr, r.header.Get(hdr))
			return r
		})
	}
	cases["v1/Idempotency-Key twice"] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
		return apiRequest("POST", "/v1/orders", http.Header{"Idempotency-Key": {"k-1", "k-2"}}, `{"user_id":1,"sku":"HOSTILE-1","num":1}`)
	}}
	cases["v1/Idempotency-Key missing"] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
		return apiRequest("POST", "/v1/orders", http.Header{"Idempotency-Key": nil}, `{"user_id":1,"sku":"HOSTILE-1","num":1}`)
	}}
	cases["v1/Idempotency-Key too long"] = hostileCase{want: http.StatusBadRequest, req: func() hostileRequest {
		return apiRequest("POST", "/v1/orders", http.Header{"Idempotency-Key": {strings.Repeat("k", 129)}}, `{"user_id":1,"sku":"HOSTILE-1","num":1}`)
	}}
	for name, values := range map[string][]string{
		"twice, both valid":    {"Bearer " + testToken, "Bearer " + testToken},
		"twice, valid first":   {"Bearer " + testToken, "Bearer wrong"},
		"twice, valid second":  {"Bearer wrong", "Bearer " + testToken},
		"twice, two clients":   {"Bearer " + testToken, "Bearer " + otherToken},
		"missing":              nil,
		"empty":                {""},
		"not bearer":           {"Basic " + testToken},
		"token with SQL chars": {"Bearer ' OR 1=1 --"},
	} {
		cases["v1/Authorization "+name+" order"] = hostileCase{want: http.StatusUnauthorized, req: func() hostileRequest {
			return apiRequest("POST", "/v1/orders", http.Header{"Authorization": values}, `{"user_id":1,"sku":"HOSTILE-1","num":1}`)
		}}
		cases["v1/Authorization "+name+" stock"] = hostileCase{want: http.StatusUnauthorized, req: func() hostileRequest {
			return apiRequest("PUT", "/v1/stock/HOSTILE-1", http.Header{"Authorization": values}, `{"num":1,"price_fen":1}`)
		}}
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := h.rowCounts()
			r := h.sendRaw(tc.req())
			if r.code != tc.want || r.code < 400 || r.code >= 500 {
				t.Errorf("status = %d %q, want %d", r.code, r.body, tc.want)
			}
			if tc.body != "" && r.body != tc.body {
				t.Errorf("body = %q, want the channel's refusal %q", r.body, tc.body)
			}
			if after := h.rowCounts(); after != before {
				t.Errorf("rows changed: %+v -> %+v", before, after)
			}
		})
	}

	// The order is still unpaid, and a clean notification still applies: the refusals left no
	// claim or lock behind.
	if o := h.order(tn); o.Status != "WAIT_PAY" {
		t.Fatalf("order = %s after hostile input", o.Status)
	}
	wantChannelReply(t, "stripe", h.send("stripe", simulate.Payment{TradeNo: tn, AmountFen: 1999}), payment.ReplySuccess)
	if o := h.order(tn); o.Status != "PAID" {
		t.Fatalf("order = %s after a clean notification", o.Status)
	}
}

// TestHostileSlowBody trickles a body slower than the server's read timeout: the server built
// as cmd/paygw builds it cuts it off with 408 (the channel's refusal) and nothing is written.
func TestHostileSlowBody(t *testing.T) {
	h := newHarness(t, options{})
	h.putStock("HOSTILE-1", 100, 1999)
	tn := h.seedOrder(1999)
	sig := hostileSigner{t: t, tradeNo: tn, fen: 1999}

	const readTimeout = 300 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewHTTPServer("", h.handler, Timeouts{ReadHeader: readTimeout, Read: readTimeout, Write: 5 * time.Second, Idle: time.Second})
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })

	type slowCase struct {
		path   string
		header http.Header
		body   []byte
		reply  string // the channel's refusal body, if a channel
	}
	cases := map[string]slowCase{}
	for _, ch := range channelNames {
		m := sig.message(ch)
		cases[ch] = slowCase{path: "/notify/" + ch, header: m.Header, body: m.Body, reply: string(sandbox.replies[ch][payment.ReplyRefuse].Body)}
	}
	cases["v1/orders"] = slowCase{path: "/v1/orders", body: []byte(`{"user_id":1,"sku":"HOSTILE-1","num":1}`),
		header: http.Header{"Authorization": {"Bearer " + testToken}, "Idempotency-Key": {"slow-1"}, "Content-Type": {"application/json"}}}
	cases["v1/stock"] = slowCase{path: "/v1/stock/HOSTILE-1", body: []byte(`{"num":1,"price_fen":1}`),
		header: http.Header{"Authorization": {"Bearer " + testToken}, "Content-Type": {"application/json"}}}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := h.rowCounts()
			method := http.MethodPost
			if strings.HasPrefix(tc.path, "/v1/stock") {
				method = http.MethodPut
			}
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var head bytes.Buffer
			fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: paygw\r\nContent-Length: %d\r\n", method, tc.path, len(tc.body))
			_ = tc.header.Write(&head)
			head.WriteString("\r\n")
			if _, err := conn.Write(head.Bytes()); err != nil {
				t.Fatal(err)
			}
			// One byte every 50 ms: the whole body would take far longer than the read timeout.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for i := range tc.body {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					if _, err := conn.Write(tc.body[i : i+1]); err != nil {
						return
					}
				}
			}()
			start := time.Now()
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no response after %s: %v", time.Since(start), err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusRequestTimeout {
				t.Errorf("status = %d %q, want 408", res.StatusCode, b)
			}
			if tc.reply != "" && string(b) != tc.reply {
				t.Errorf("body = %q, want the channel's refusal %q", b, tc.reply)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("answered after %s, want about the read timeout %s", d, readTimeout)
			}
			if after := h.rowCounts(); after != before {
				t.Errorf("rows changed: %+v -> %+v", before, after)
			}
		})
	}
	if o := h.order(tn); o.Status != "WAIT_PAY" {
		t.Fatalf("order = %s after slow bodies", o.Status)
	}
}

// Stripe sends account-wide events; a metadata.trade_no that cannot be ours (SQL metacharacters
// included) makes the event someone else's. It is acknowledged, so Stripe does not retry it for
// three days, and journalled as OTHER with no trade_no: the hostile value reaches no order column.
func TestHostileStripeTradeNoIsNotOurs(t *testing.T) {
	h := newHarness(t, options{})
	tn := h.seedOrder(1999)
	sig := hostileSigner{t: t, tradeNo: tn, fen: 1999}
	for name, bad := range sqlTradeNos {
		t.Run(name, func(t *testing.T) {
			m := sig.stripe(`"trade_no": "`+tn+`"`, `"trade_no": `+jsonQuote(bad))
			var ev struct{ ID string }
			if err := json.Unmarshal(m.Body, &ev); err != nil {
				t.Fatal(err)
			}
			wantReply(t, h.sendRaw(notifyRequest("stripe", m)), 200, string(sandbox.replies["stripe"][payment.ReplySuccess].Body))
			if n := h.count(`SELECT COUNT(*) FROM notify_journal WHERE notify_id = ? AND event = 'OTHER' AND trade_no = ''`, ev.ID); n != 1 {
				t.Fatalf("event %s journalled as other %d times, want once", ev.ID, n)
			}
			if o := h.order(tn); o.Status != "WAIT_PAY" {
				t.Fatalf("order %s is %s", tn, o.Status)
			}
			if n := h.count(`SELECT COUNT(*) FROM idempotent_record`); n != 0 {
				t.Fatalf("records = %d, want 0", n)
			}
		})
	}
}
