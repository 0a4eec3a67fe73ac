package alipay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/smartwalle/alipay/v3"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/outbound"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"

	"github.com/paygw/paygw/bills"
)

// Querier asks Alipay about trades with alipay.trade.query, through the smartwalle/alipay
// SDK: it builds and signs the request, and verifies the response's sign over the raw bytes of
// alipay_trade_query_response (decoded as map[string]json.RawMessage, so the order of sign and the
// node does not matter). What the SDK does not do is done around it: the response is read whole
// and kept for the journal, a non-200 status is told apart from an unverified body, and the body
// must be JSON that every reader reads alike (channels.StrictJSON) before any of it is believed.
type Querier struct {
	client *alipay.Client
}

var _ channels.Querier = (*Querier)(nil)

// Key sizes this channel accepts (paygw doctor checks the files with them): the Alipay public
// key may still be a legacy 1024-bit key of sign_type RSA; the app private key signs RSA2
// requests (channels.ParseRSAPrivateKey).
const (
	MinPublicKeyBits  = channels.MinRSABits
	MinPrivateKeyBits = channels.MinRSABits2048
)

// NewQuerier builds the trade query for the channel v verifies, with the merchant app
// private key and gateway of c. hc carries the timeout; nil is a client with a 15 s timeout.
//
// The SDK is built with production=false whatever the gateway: in this SDK the flag only picks
// default hosts, which WithSandboxGateway replaces with the configured gateway_url, and, when
// true, lets a response that names an unknown alipay_cert_sn make the SDK download that
// certificate from the gateway during the request and trust it unverified. With false, and the
// Alipay public key always loaded, every response is checked against the configured key alone.
//
// Errors: channels.ErrNoCredentials naming channels.alipay.app_private_key_file when it is not set; an
// error naming the key when a file cannot be read or a key does not parse (never its contents).
func NewQuerier(c config.Alipay, v *Channel, hc *http.Client) (channels.Querier, error) {
	const p = "channels: alipay: "
	switch {
	case v == nil:
		return nil, errors.New(p + "NewAlipayQuerier: nil verifier")
	case c.AppPrivateKeyFile == "":
		return nil, fmt.Errorf("%w: channels.alipay.app_private_key_file is not set", channels.ErrNoCredentials)
	case c.AppID == "":
		return nil, errors.New(p + "channels.alipay.app_id: empty")
	}
	if err := outbound.CheckBaseURL(c.GatewayURL, true); err != nil {
		return nil, fmt.Errorf(p+"channels.alipay.gateway_url: %w", err)
	}
	keyPEM, err := channels.ReadPrivateKeyFile(c.AppPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf(p+"channels.alipay.app_private_key_file: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(v.key)
	if err != nil {
		return nil, fmt.Errorf(p+"the Alipay public key: %w", err)
	}

	client, err := alipay.New(c.AppID, string(keyPEM), false,
		alipay.WithSandboxGateway(c.GatewayURL),
		alipay.WithHTTPClient(outbound.Client(hc, nil)),
		// Alipay reads timestamp in Beijing time; China keeps no DST, so a fixed +8 is exact
		// and needs no tzdata.
		alipay.WithTimeLocation(bills.ChinaTime))
	if err != nil {
		// Parsed above already; the SDK's own reason is not repeated in case it quotes input.
		return nil, errors.New(p + "channels.alipay.app_private_key_file: the SDK refused the key")
	}
	if err := client.LoadAliPayPublicKey(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))); err != nil {
		return nil, fmt.Errorf(p+"loading the Alipay public key into the SDK: %w", err)
	}
	return &Querier{client: client}, nil
}

// Name is the channel asked.
func (q *Querier) Name() string { return "alipay" }

// QueryTrade asks Alipay about tq.TradeNo by out_trade_no.
//
// Answers: code 10000 with TRADE_SUCCESS or TRADE_FINISHED is paid; TRADE_CLOSED with
// send_pay_date is paid then refunded in full, without it closed unpaid; WAIT_BUYER_PAY, code
// 10003 and 40004 ACQ.TRADE_NOT_EXIST (a page, wap or app trade exists at Alipay only once the
// buyer logged in or scanned) are not paid yet.
//
// Errors: channels.ErrQueryFailed for transport failures, a status other than 200, and Alipay's other
// codes (signed, but they say nothing about the trade); channels.ErrBadSignature for an unsigned response
// (error_response, or no sign) or one whose sign does not verify with the configured key;
// channels.ErrMalformed for a body that does not parse, or an answer about another out_trade_no.
func (q *Querier) QueryTrade(ctx context.Context, tq channels.TradeQuery) (channels.TradeAnswer, error) {
	if !payment.ValidTradeNo(tq.TradeNo) {
		return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: the trade_no to ask about is not 1-%d of [A-Za-z0-9_-]", channels.ErrMalformed, payment.MaxTradeNo)
	}
	var got outbound.Capture
	rsp, err := q.client.TradeQuery(outbound.With(ctx, &got), alipay.TradeQuery{OutTradeNo: tq.TradeNo})
	switch {
	case got.Status == 0:
		return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: %w", channels.ErrQueryFailed, err)
	case got.Status != http.StatusOK:
		return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: HTTP %d", channels.ErrQueryFailed, got.Status)
	case err != nil:
		return channels.TradeAnswer{}, alipaySDKError(err)
	}
	return alipayAnswer(tq.TradeNo, rsp, got.Body)
}

// alipaySDKError maps what the SDK returns for a 200 response it did not accept. Its errors are
// not one type; none of their text is kept, as it may quote the response.
func alipaySDKError(err error) error {
	var unsigned *alipay.Error // the SDK's rendering of an unsigned error_response or node
	var notBase64 base64.CorruptInputError
	switch {
	case errors.As(err, &unsigned):
		return fmt.Errorf("%w: alipay: response not signed (error_response, or no sign)", channels.ErrBadSignature)
	case errors.Is(err, rsa.ErrVerification):
		return fmt.Errorf("%w: alipay: response sign does not match", channels.ErrBadSignature)
	case errors.As(err, &notBase64): // sign, or a node in the encrypted form we never ask for
		return fmt.Errorf("%w: alipay: response sign (or encrypted node) is not base64", channels.ErrBadSignature)
	case errors.Is(err, alipay.ErrAliPublicKeyNotFound):
		return fmt.Errorf("%w: alipay: response names an alipay_cert_sn we hold no key for", channels.ErrBadSignature)
	default:
		return fmt.Errorf("%w: alipay: response is not the alipay.trade.query JSON", channels.ErrMalformed)
	}
}

// alipayAnswer maps a response whose signature the SDK verified. body is the whole response, as
// received: it is checked to read alike everywhere, and kept as each event's Raw.
func alipayAnswer(asked string, rsp *alipay.TradeQueryRsp, body []byte) (channels.TradeAnswer, error) {
	if err := channels.StrictJSON("alipay", "query response", body); err != nil {
		return channels.TradeAnswer{}, err
	}
	if rsp == nil {
		return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: alipay_trade_query_response is null", channels.ErrMalformed)
	}
	if rsp.OutTradeNo != "" && rsp.OutTradeNo != asked {
		return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: the answer is about another out_trade_no", channels.ErrMalformed)
	}
	if a, done, err := alipayCodeAnswer(rsp); done {
		return a, err
	}

	status := string(rsp.TradeStatus)
	switch status {
	case "WAIT_BUYER_PAY":
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: status}, nil
	case "TRADE_SUCCESS", "TRADE_FINISHED", "TRADE_CLOSED":
	default:
		return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: trade_status %s", channels.ErrMalformed, channels.Quote(status))
	}
	ev, paid, err := alipayQueryEvent(asked, rsp, body)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	answer, err := alipayStateAnswer(asked, ev, paid)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	for i, ev := range answer.Events {
		if answer.Events[i], err = channels.CheckEvent(ev); err != nil {
			return channels.TradeAnswer{}, err
		}
	}
	return answer, nil
}

// alipayCodeAnswer is the answer of a response whose code says all (done): a payment in
// process, a trade Alipay does not know, or an error; a success is read on by trade_status.
func alipayCodeAnswer(rsp *alipay.TradeQueryRsp) (a channels.TradeAnswer, done bool, err error) {
	switch {
	case rsp.Code == alipay.CodeOrderSuccessPayInProcess:
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: "10003"}, true, nil
	case rsp.Code == alipay.CodeBusinessFailed && rsp.SubCode == "ACQ.TRADE_NOT_EXIST":
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: rsp.SubCode}, true, nil
	case rsp.Code != alipay.CodeSuccess:
		return a, true, fmt.Errorf("%w: alipay: code %s, sub_code %s", channels.ErrQueryFailed, channels.Quote(string(rsp.Code)), channels.Quote(rsp.SubCode))
	case rsp.OutTradeNo == "":
		return a, true, fmt.Errorf("%w: alipay: out_trade_no missing", channels.ErrMalformed)
	}
	return a, false, nil
}

// alipayQueryEvent is the trade a successful answer states, before its kind is known; paid
// tells a TRADE_CLOSED after a payment (send_pay_date set) from one closed unpaid.
func alipayQueryEvent(asked string, rsp *alipay.TradeQueryRsp, body []byte) (ev payment.Event, paid bool, err error) {
	status := string(rsp.TradeStatus)
	ev = payment.Event{
		Channel:      "alipay",
		TradeNo:      asked,
		ChannelTxnID: rsp.TradeNo,
		Status:       status,
		Currency:     "CNY", // total_amount is yuan, always
		Subject:      rsp.Subject,
		Raw:          bytes.Clone(body),
	}
	paid = status != "TRADE_CLOSED" || rsp.SendPayDate != ""
	if paid || rsp.TotalAmount != "" { // a trade closed unpaid may leave it out
		if ev.AmountFen, err = ParseYuan(rsp.TotalAmount); err != nil {
			return payment.Event{}, false, fmt.Errorf("alipay: total_amount: %w", err)
		}
	}
	if rsp.SendPayDate != "" {
		if ev.PaidAt, err = time.ParseInLocation(alipayTimeLayout, rsp.SendPayDate, bills.ChinaTime); err != nil {
			return payment.Event{}, false, fmt.Errorf("%w: alipay: send_pay_date is not %q", channels.ErrMalformed, alipayTimeLayout)
		}
	}
	return ev, paid, nil
}

// alipayStateAnswer turns the trade into the answer its status means: paid, refunded in full, or
// closed unpaid.
func alipayStateAnswer(asked string, ev payment.Event, paid bool) (channels.TradeAnswer, error) {
	status := ev.Status
	switch {
	case status == "TRADE_SUCCESS" || status == "TRADE_FINISHED":
		if ev.ChannelTxnID == "" {
			return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: trade_no missing", channels.ErrMalformed)
		}
		ev.Kind, ev.NotifyID = payment.KindPaid, channels.QueryNotifyID(ev.ChannelTxnID)
		return channels.TradeAnswer{State: channels.TradePaid, Status: status, Events: []payment.Event{ev}}, nil
	case paid:
		// TRADE_CLOSED after a payment: refunded in full. The answer names no refund: it states
		// the payment's running total (RefundIsTotal), which the refund ledger counts once with
		// whatever else states the same refunds.
		if ev.ChannelTxnID == "" {
			return channels.TradeAnswer{}, fmt.Errorf("%w: alipay: trade_no missing", channels.ErrMalformed)
		}
		payEv := ev
		payEv.Kind, payEv.NotifyID = payment.KindPaid, channels.QueryNotifyID(ev.ChannelTxnID)
		refund := ev
		refund.Kind, refund.NotifyID = payment.KindRefund, "query:refund:"+ev.ChannelTxnID
		refund.RefundFen, refund.RefundIsTotal = ev.AmountFen, true
		return channels.TradeAnswer{State: channels.TradeRefunded, Status: status, Events: []payment.Event{payEv, refund}}, nil
	default: // TRADE_CLOSED, never paid
		ev.Kind, ev.NotifyID = payment.KindClosed, "query:close:"+asked
		return channels.TradeAnswer{State: channels.TradeClosed, Status: status, Events: []payment.Event{ev}}, nil
	}
}
