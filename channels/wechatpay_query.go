package channels

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

	"github.com/paygw/paygw/config"
	"github.com/paygw/paygw/payment"
)

// WeChatPayQuerier asks WeChat Pay about trades with the official SDK's payments service
// (QueryOrderByOutTradeNo): the SDK signs the request with the merchant API key and calls the
// response validator below, which checks the response exactly as WeChatPay.Verify checks a
// notification, with the same platform keys.
//
// The SDK's ready-made validators (option.WithWechatPayPublicKeyAuthCipher, WithWechatPayCertificate)
// are not used: they skip every response that is not 2xx, so WeChat's 404 ORDER_NOT_EXIST would
// be believed unsigned; they describe failures in free text only; and they would be a second
// copy of the trust the verifier already holds in whichever mode it is configured (platform
// public key, certificates, or both during the switch-over).
type WeChatPayQuerier struct {
	svc native.NativeApiService
	v   *WeChatPay
}

var _ Querier = (*WeChatPayQuerier)(nil)

// NewWeChatPayQuerier builds the trade query for the merchant v verifies, with the merchant API
// key, its certificate serial and the API address of c. hc carries the timeout; nil is a client
// with a 15 s timeout. The services address https://api.mch.weixin.qq.com; a transport sends
// them to api_base_url's scheme and host instead (the request signature covers only the path
// and query, which stay as they are).
//
// Errors: ErrNoCredentials naming channels.wechatpay.merchant_private_key_file or
// merchant_serial_no when one is not set; an error naming the key when the file cannot be read,
// the key does not parse (never its contents), or api_base_url is not scheme and host.
func NewWeChatPayQuerier(c config.WeChatPay, v *WeChatPay, hc *http.Client) (Querier, error) {
	if v == nil {
		return nil, errors.New("channels: wechatpay: NewWeChatPayQuerier: nil verifier")
	}
	client, err := wechatMerchantClient(c, v, hc, wechatResponseValidator{v: v})
	if err != nil {
		return nil, err
	}
	return &WeChatPayQuerier{svc: native.NativeApiService{Client: client}, v: v}, nil
}

// wechatMerchantClient is the SDK client that calls WeChat Pay as the merchant: requests signed
// with the merchant API key and serial, sent to api_base_url, answers checked by validator.
// Errors: ErrNoCredentials naming the missing key; otherwise errors naming the key at fault,
// never a key's contents.
func wechatMerchantClient(c config.WeChatPay, v *WeChatPay, hc *http.Client, validator auth.Validator) (*core.Client, error) {
	const p = "channels: wechatpay: "
	switch {
	case c.MerchantPrivateKeyFile == "":
		return nil, fmt.Errorf("%w: channels.wechatpay.merchant_private_key_file is not set", ErrNoCredentials)
	case strings.TrimSpace(c.MerchantSerialNo) == "":
		return nil, fmt.Errorf("%w: channels.wechatpay.merchant_serial_no is not set", ErrNoCredentials)
	case strings.TrimSpace(c.MerchantSerialNo) != c.MerchantSerialNo:
		return nil, errors.New(p + "channels.wechatpay.merchant_serial_no: surrounding white space")
	}
	if err := checkBaseURL(c.APIBaseURL, false); err != nil {
		return nil, fmt.Errorf(p+"channels.wechatpay.api_base_url: %w", err)
	}
	base, _ := url.Parse(c.APIBaseURL) // checked above
	b, err := os.ReadFile(c.MerchantPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf(p+"channels.wechatpay.merchant_private_key_file: %w", err)
	}
	key, err := parseRSAPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf(p+"channels.wechatpay.merchant_private_key_file: %w", err)
	}
	client, err := core.NewClientWithDialSettings(context.Background(), &core.DialSettings{
		HTTPClient: capturingClient(hc, base),
		Signer:     &signers.SHA256WithRSASigner{MchID: v.mchID, CertificateSerialNo: c.MerchantSerialNo, PrivateKey: key},
		Validator:  validator,
	})
	if err != nil {
		return nil, fmt.Errorf(p+"building the SDK client: %w", err)
	}
	return client, nil
}

// Name is the channel asked.
func (q *WeChatPayQuerier) Name() string { return "wechatpay" }

// QueryTrade asks WeChat about tq.TradeNo: GET /v3/pay/transactions/out-trade-no/{out_trade_no}.
// The order query is the same for Native, JSAPI, app and H5 payments.
//
// Answers by trade_state: SUCCESS is paid; REFUND is paid, then (partly or wholly) refunded;
// CLOSED and REVOKED are closed; NOTPAY, USERPAYING, PAYERROR and 404 ORDER_NOT_EXIST are not
// paid yet.
//
// Errors: ErrQueryFailed for transport failures and any status but 2xx and a signed 404;
// ErrBadSignature when the response (404 included) is unsigned, stale, or its signature does
// not verify with the configured platform keys; ErrMalformed for a body that does not parse, or
// an answer about another merchant, appid or out_trade_no.
func (q *WeChatPayQuerier) QueryTrade(ctx context.Context, tq TradeQuery) (TradeAnswer, error) {
	if !payment.ValidTradeNo(tq.TradeNo) {
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: the trade_no to ask about is not 1-%d of [A-Za-z0-9_-]", ErrMalformed, payment.MaxTradeNo)
	}
	var got capture
	_, _, err := q.svc.QueryOrderByOutTradeNo(withCapture(ctx, &got), native.QueryOrderByOutTradeNoRequest{
		OutTradeNo: core.String(tq.TradeNo),
		Mchid:      core.String(q.v.mchID),
	})
	var apiErr *core.APIError
	switch {
	case got.status == 0:
		// The client's url.Error names the SDK's host, not the one asked: keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: %w", ErrQueryFailed, err)
	case errors.As(err, &apiErr) && got.status == http.StatusNotFound:
		// The SDK checks no signature on a non-2xx response: this is done here.
		if err := q.v.verifyResponse(got.header, got.body, time.Now()); err != nil {
			return TradeAnswer{}, err
		}
		return wechatNotFound(got.body)
	case errors.As(err, &apiErr):
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: HTTP %d", ErrQueryFailed, got.status)
	case errors.Is(err, ErrBadSignature):
		return TradeAnswer{}, err // from wechatResponseValidator
	case !got.verified:
		// Not reachable through the SDK as it is: a 2xx response passes the validator or fails.
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: response not verified", ErrBadSignature)
	}
	// Verified. The SDK may have failed to decode it (err): the parser below says why.
	return q.v.queryAnswer(tq.TradeNo, got.body)
}

// wechatResponseValidator is the SDK's response validation hook, done as notifications are.
type wechatResponseValidator struct{ v *WeChatPay }

func (val wechatResponseValidator) Validate(ctx context.Context, resp *http.Response) error {
	body, err := io.ReadAll(resp.Body) // in memory already: capturingTransport read it
	if err != nil {
		return fmt.Errorf("%w: wechatpay: reading the response: %w", ErrQueryFailed, err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := val.v.verifyResponse(resp.Header, body, time.Now()); err != nil {
		return err
	}
	if c := captureOf(ctx); c != nil && bytes.Equal(c.body, body) {
		c.verified = true
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
// ErrBadSignature: an unsigned or stale response is no answer, whatever is wrong with it.
func (w *WeChatPay) verifyResponse(header http.Header, body []byte, now time.Time) error {
	if err := w.checkHeader(header, now); err != nil {
		if errors.Is(err, ErrBadSignature) {
			return err
		}
		return fmt.Errorf("%w: wechatpay: response refused: %s", ErrBadSignature, err.Error())
	}
	get := func(key string) string { return strings.TrimSpace(header.Get(key)) }
	message := get("Wechatpay-Timestamp") + "\n" + get("Wechatpay-Nonce") + "\n" + string(body) + "\n"
	if err := w.verifier.Verify(context.Background(), get("Wechatpay-Serial"), message, get("Wechatpay-Signature")); err != nil {
		return fmt.Errorf("%w: wechatpay: response signature does not verify", ErrBadSignature)
	}
	return nil
}

// wechatNotFound reads a verified 404: ORDER_NOT_EXIST is "not created yet"; any other code is
// WeChat failing to answer.
func wechatNotFound(body []byte) (TradeAnswer, error) {
	if err := strictJSON("wechatpay", "error response", body); err != nil {
		return TradeAnswer{}, err
	}
	var e struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: error response is not {\"code\":...}", ErrMalformed)
	}
	if e.Code != "ORDER_NOT_EXIST" {
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: HTTP 404 %s", ErrQueryFailed, quote(e.Code))
	}
	return TradeAnswer{State: TradeNotPaid, Status: e.Code}, nil
}

// queryAnswer maps a verified order (the query's 200 body). A payment comes out as the
// TRANSACTION.SUCCESS notification of the order maps (mapTransaction), with the query's
// notify id.
func (w *WeChatPay) queryAnswer(asked string, body []byte) (TradeAnswer, error) {
	if err := strictJSON("wechatpay", "query response", body); err != nil {
		return TradeAnswer{}, err
	}
	var res wechatResource
	if err := json.Unmarshal(body, &res); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" { // Field is our struct's path, not input
			return TradeAnswer{}, fmt.Errorf("%w: wechatpay: field %s has the wrong type", ErrMalformed, te.Field)
		}
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: query response is not a JSON object", ErrMalformed)
	}
	// Signed by WeChat, yet about someone else's order: not an answer to our question.
	switch {
	case !equalConstantTime(res.MchID, w.mchID):
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: mchid differs from ours", ErrMalformed)
	case !w.ourAppID(res.AppID):
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: appid is not one of ours", ErrMalformed)
	case res.OutTradeNo != asked:
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: the answer is about another out_trade_no", ErrMalformed)
	}

	ev := payment.Event{Channel: "wechatpay", Currency: "CNY", Raw: bytes.Clone(body)}
	var answer TradeAnswer
	switch res.TradeState {
	case "NOTPAY", "USERPAYING":
		return TradeAnswer{State: TradeNotPaid, Status: res.TradeState}, nil
	case "PAYERROR":
		// The payment attempt failed (a bank refusal, ...): no money moved, and WeChat has not
		// closed the order. Closing paygw's order on it would end an order the buyer may still
		// pay another way; it stays as it is, and its own expiry closes it.
		return TradeAnswer{State: TradeNotPaid, Status: res.TradeState}, nil
	case "SUCCESS", "REFUND":
		if err := w.mapTransaction(&ev, res); err != nil {
			return TradeAnswer{}, err
		}
		// The order query does not say how much was refunded (REFUND covers partial refunds
		// too): the payment alone is reported, and the refund notification, which carries the
		// amount, records the refund.
		ev.Kind, ev.NotifyID = payment.KindPaid, QueryNotifyID(ev.ChannelTxnID)
		answer.State = TradePaid
		if res.TradeState == "REFUND" {
			answer.State = TradeRefunded
		}
	case "CLOSED", "REVOKED":
		ev.Kind, ev.TradeNo, ev.NotifyID = payment.KindClosed, asked, "query:close:"+asked
		ev.ChannelTxnID = res.TransactionID // an unpaid order has none
		if res.Amount != nil && res.Amount.Total != nil {
			var err error
			if ev.AmountFen, err = wechatFen("amount.total", *res.Amount.Total); err != nil {
				return TradeAnswer{}, err
			}
		}
		if res.Amount != nil {
			var err error
			if ev.Currency, err = wechatCurrency(res.Amount.Currency); err != nil {
				return TradeAnswer{}, err
			}
		}
		answer.State = TradeClosed
	default:
		return TradeAnswer{}, fmt.Errorf("%w: wechatpay: trade_state %s", ErrMalformed, quote(res.TradeState))
	}
	ev.Status, answer.Status = res.TradeState, res.TradeState
	ev, err := checkEvent(ev)
	if err != nil {
		return TradeAnswer{}, err
	}
	answer.Events = []payment.Event{ev}
	return answer, nil
}
