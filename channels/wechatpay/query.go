package wechatpay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/signers"
	"github.com/wechatpay-apiv3/wechatpay-go/services/payments/native"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/outbound"
	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
)

// Querier asks WeChat Pay about trades with the official SDK's payments service
// (QueryOrderByOutTradeNo): the SDK signs the request with the merchant API key and calls the
// response validator below, which checks the response exactly as WeChatPay.Verify checks a
// notification, with the same platform keys.
//
// The SDK's ready-made validators (option.WithWechatPayPublicKeyAuthCipher, WithWechatPayCertificate)
// are not used: they skip every response that is not 2xx, so WeChat's 404 ORDER_NOT_EXIST would
// be believed unsigned; they describe failures in free text only; and they would be a second
// copy of the trust the verifier already holds in whichever mode it is configured (platform
// public key, certificates, or both during the switch-over).
type Querier struct {
	svc native.NativeApiService
	v   *Channel
}

var _ channels.Querier = (*Querier)(nil)

// NewQuerier builds the trade query for the merchant v verifies, with the merchant API
// key, its certificate serial and the API address of c. hc carries the timeout; nil is a client
// with a 15 s timeout. The services address https://api.mch.weixin.qq.com; a transport sends
// them to api_base_url's scheme and host instead (the request signature covers only the path
// and query, which stay as they are).
//
// Errors: channels.ErrNoCredentials naming channels.wechatpay.merchant_private_key_file or
// merchant_serial_no when one is not set; an error naming the key when the file cannot be read,
// the key does not parse (never its contents), or api_base_url is not scheme and host.
func NewQuerier(c config.WeChatPay, v *Channel, hc *http.Client) (channels.Querier, error) {
	client, err := wechatAPIClient("NewWeChatPayQuerier", c, v, hc)
	if err != nil {
		return nil, err
	}
	return &Querier{svc: native.NativeApiService{Client: client}, v: v}, nil
}

// wechatAPIClient is the merchant client of the trade query and the bill download, whose
// answers v verifies; caller names the constructor in the error for a nil v.
func wechatAPIClient(caller string, c config.WeChatPay, v *Channel, hc *http.Client) (*core.Client, error) {
	if v == nil {
		return nil, errors.New("channels: wechatpay: " + caller + ": nil verifier")
	}
	return wechatMerchantClient(c, v, hc, wechatResponseValidator{v: v})
}

// wechatMerchantClient is the SDK client that calls WeChat Pay as the merchant: requests signed
// with the merchant API key and serial, sent to api_base_url, answers checked by validator.
// Errors: channels.ErrNoCredentials naming the missing key; otherwise errors naming the key at fault,
// never a key's contents.
func wechatMerchantClient(c config.WeChatPay, v *Channel, hc *http.Client, validator auth.Validator) (*core.Client, error) {
	const p = "channels: wechatpay: "
	switch {
	case c.MerchantPrivateKeyFile == "":
		return nil, fmt.Errorf("%w: channels.wechatpay.merchant_private_key_file is not set", channels.ErrNoCredentials)
	case strings.TrimSpace(c.MerchantSerialNo) == "":
		return nil, fmt.Errorf("%w: channels.wechatpay.merchant_serial_no is not set", channels.ErrNoCredentials)
	case strings.TrimSpace(c.MerchantSerialNo) != c.MerchantSerialNo:
		return nil, errors.New(p + "channels.wechatpay.merchant_serial_no: surrounding white space")
	}
	if err := outbound.CheckBaseURL(c.APIBaseURL, false); err != nil {
		return nil, fmt.Errorf(p+"channels.wechatpay.api_base_url: %w", err)
	}
	base, _ := url.Parse(c.APIBaseURL) // checked above
	b, err := os.ReadFile(c.MerchantPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf(p+"channels.wechatpay.merchant_private_key_file: %w", err)
	}
	key, err := channels.ParseRSAPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf(p+"channels.wechatpay.merchant_private_key_file: %w", err)
	}
	client, err := core.NewClientWithDialSettings(context.Background(), &core.DialSettings{
		HTTPClient: outbound.Client(hc, base),
		Signer:     &signers.SHA256WithRSASigner{MchID: v.mchID, CertificateSerialNo: c.MerchantSerialNo, PrivateKey: key},
		Validator:  validator,
	})
	if err != nil {
		return nil, fmt.Errorf(p+"building the SDK client: %w", err)
	}
	return client, nil
}

// Name is the channel asked.
func (q *Querier) Name() string { return "wechatpay" }

// QueryTrade asks WeChat about tq.TradeNo: GET /v3/pay/transactions/out-trade-no/{out_trade_no}.
// The order query is the same for Native, JSAPI, app and H5 payments.
//
// Answers by trade_state: SUCCESS is paid; REFUND is paid, then (partly or wholly) refunded;
// CLOSED and REVOKED are closed; NOTPAY, USERPAYING, PAYERROR and 404 ORDER_NOT_EXIST are not
// paid yet.
//
// Errors: channels.ErrQueryFailed for transport failures and any status but 2xx and a signed 404;
// channels.ErrBadSignature when the response (404 included) is unsigned, stale, or its signature does
// not verify with the configured platform keys; channels.ErrMalformed for a body that does not parse, or
// an answer about another merchant, appid or out_trade_no.
func (q *Querier) QueryTrade(ctx context.Context, tq channels.TradeQuery) (channels.TradeAnswer, error) {
	if !payment.ValidTradeNo(tq.TradeNo) {
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: the trade_no to ask about is not 1-%d of [A-Za-z0-9_-]", channels.ErrMalformed, payment.MaxTradeNo)
	}
	var got outbound.Capture
	_, _, err := q.svc.QueryOrderByOutTradeNo(outbound.With(ctx, &got), native.QueryOrderByOutTradeNoRequest{
		OutTradeNo: core.String(tq.TradeNo),
		Mchid:      core.String(q.v.mchID),
	})
	var apiErr *core.APIError
	switch {
	case got.Status == 0:
		// The client's url.Error names the SDK's host, not the one asked: keep only its cause.
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: %w", channels.ErrQueryFailed, channels.URLCause(err))
	case errors.As(err, &apiErr) && got.Status == http.StatusNotFound:
		// The SDK checks no signature on a non-2xx response: this is done here.
		if err := q.v.verifyResponse(got.Header, got.Body, time.Now()); err != nil {
			return channels.TradeAnswer{}, err
		}
		return wechatNotFound(got.Body)
	case errors.As(err, &apiErr):
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: HTTP %d", channels.ErrQueryFailed, got.Status)
	case errors.Is(err, channels.ErrBadSignature):
		return channels.TradeAnswer{}, err // from wechatResponseValidator
	case !got.Verified:
		// Not reachable through the SDK as it is: a 2xx response passes the validator or fails.
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: response not verified", channels.ErrBadSignature)
	}
	// Verified. The SDK may have failed to decode it (err): the parser below says why.
	return q.v.queryAnswer(tq.TradeNo, got.Body)
}

// wechatResponseValidator is the SDK's response validation hook, done as notifications are.
type wechatResponseValidator struct{ v *Channel }

func (val wechatResponseValidator) Validate(ctx context.Context, resp *http.Response) error {
	body, err := io.ReadAll(resp.Body) // in memory already: capturingTransport read it
	if err != nil {
		return fmt.Errorf("%w: wechatpay: reading the response: %w", channels.ErrQueryFailed, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := val.v.verifyResponse(resp.Header, body, time.Now()); err != nil {
		return err
	}
	if c := outbound.From(ctx); c != nil && bytes.Equal(c.Body, body) {
		c.Verified = true
	}
	return nil
}

// GetAcceptSerial names the platform key we verify with (the SDK sends it as Wechatpay-Serial).
func (val wechatResponseValidator) GetAcceptSerial(ctx context.Context) (string, error) {
	return val.v.verifier.GetSerial(ctx)
}

var _ auth.Validator = wechatResponseValidator{}

// verifyResponse checks a response's Wechatpay-* headers and signature over the raw body, with
// the same header checks, clock window and keys as a notification. Every refusal is
// channels.ErrBadSignature: an unsigned or stale response is no answer, whatever is wrong with it.
func (w *Channel) verifyResponse(header http.Header, body []byte, now time.Time) error {
	if err := w.checkHeader(header, now); err != nil {
		if errors.Is(err, channels.ErrBadSignature) {
			return err
		}
		return fmt.Errorf("%w: wechatpay: response refused: %s", channels.ErrBadSignature, err.Error())
	}
	get := func(key string) string { return strings.TrimSpace(header.Get(key)) }
	message := get("Wechatpay-Timestamp") + "\n" + get("Wechatpay-Nonce") + "\n" + string(body) + "\n"
	if err := w.verifier.Verify(context.Background(), get("Wechatpay-Serial"), message, get("Wechatpay-Signature")); err != nil {
		return fmt.Errorf("%w: wechatpay: response signature does not verify", channels.ErrBadSignature)
	}
	return nil
}

// wechatNotFound reads a verified 404: ORDER_NOT_EXIST is "not created yet"; any other code is
// WeChat failing to answer.
func wechatNotFound(body []byte) (channels.TradeAnswer, error) {
	if err := channels.StrictJSON("wechatpay", "error response", body); err != nil {
		return channels.TradeAnswer{}, err
	}
	var e struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: error response is not {\"code\":...}", channels.ErrMalformed)
	}
	if e.Code != "ORDER_NOT_EXIST" {
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: HTTP 404 %s", channels.ErrQueryFailed, channels.Quote(e.Code))
	}
	return channels.TradeAnswer{State: channels.TradeNotPaid, Status: e.Code}, nil
}

// queryAnswer maps a verified order (the query's 200 body). A payment comes out as the
// TRANSACTION.SUCCESS notification of the order maps (mapTransaction), with the query's
// notify id.
func (w *Channel) queryAnswer(asked string, body []byte) (channels.TradeAnswer, error) {
	if err := channels.StrictJSON("wechatpay", "query response", body); err != nil {
		return channels.TradeAnswer{}, err
	}
	var res wechatResource
	if err := json.Unmarshal(body, &res); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" { // Field is our struct's path, not input
			return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: field %s has the wrong type", channels.ErrMalformed, te.Field)
		}
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: query response is not a JSON object", channels.ErrMalformed)
	}
	// Signed by WeChat, yet about someone else's order: not an answer to our question.
	switch {
	case !channels.EqualConstantTime(res.MchID, w.mchID):
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: mchid differs from ours", channels.ErrMalformed)
	case !w.ourAppID(res.AppID):
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: appid is not one of ours", channels.ErrMalformed)
	case res.OutTradeNo != asked:
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: the answer is about another out_trade_no", channels.ErrMalformed)
	}

	ev := payment.Event{Channel: "wechatpay", Currency: "CNY", Raw: bytes.Clone(body)}
	var answer channels.TradeAnswer
	switch res.TradeState {
	case "NOTPAY", "USERPAYING":
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: res.TradeState}, nil
	case "PAYERROR":
		// The payment attempt failed (a bank refusal, ...): no money moved, and WeChat has not
		// closed the order. Closing paygw's order on it would end an order the buyer may still
		// pay another way; it stays as it is, and its own expiry closes it.
		return channels.TradeAnswer{State: channels.TradeNotPaid, Status: res.TradeState}, nil
	case "SUCCESS", "REFUND":
		if err := w.mapTransaction(&ev, res); err != nil {
			return channels.TradeAnswer{}, err
		}
		// The order query does not say how much was refunded (REFUND covers partial refunds
		// too): the payment alone is reported, and the refund notification, which carries the
		// amount, records the refund.
		ev.Kind, ev.NotifyID = payment.KindPaid, channels.QueryNotifyID(ev.ChannelTxnID)
		answer.State = channels.TradePaid
		if res.TradeState == "REFUND" {
			answer.State = channels.TradeRefunded
		}
	case "CLOSED", "REVOKED":
		ev.Kind, ev.TradeNo, ev.NotifyID = payment.KindClosed, asked, "query:close:"+asked
		ev.ChannelTxnID = res.TransactionID // an unpaid order has none
		if res.Amount != nil && res.Amount.Total != nil {
			var err error
			if ev.AmountFen, err = wechatFen("amount.total", *res.Amount.Total); err != nil {
				return channels.TradeAnswer{}, err
			}
		}
		if res.Amount != nil {
			var err error
			if ev.Currency, err = wechatCurrency(res.Amount.Currency); err != nil {
				return channels.TradeAnswer{}, err
			}
		}
		answer.State = channels.TradeClosed
	default:
		return channels.TradeAnswer{}, fmt.Errorf("%w: wechatpay: trade_state %s", channels.ErrMalformed, channels.Quote(res.TradeState))
	}
	ev.Status, answer.Status = res.TradeState, res.TradeState
	ev, err := channels.CheckEvent(ev)
	if err != nil {
		return channels.TradeAnswer{}, err
	}
	answer.Events = []payment.Event{ev}
	return answer, nil
}
