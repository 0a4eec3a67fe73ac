// Package wechatpay is everything paygw does with WeChat Pay API v3: it verifies and decrypts
// notifications, asks about orders, downloads the daily trade bill, and keeps the platform
// certificates (or the platform public key) it verifies with, refreshed from WeChat.
package wechatpay

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core/auth"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/verifiers"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/payment"
)

// Config is what New needs. Platform keys come in two modes that WeChat runs
// side by side during its switch-over: the platform public key (PublicKeyID "PUB_KEY_ID_...")
// and platform certificates, whose serials are read from the certificates themselves. Several
// certificates are all trusted at once, as during a certificate rotation.
type Config struct {
	MchID        string   // channels.wechatpay.mch_id
	AppID        string   // channels.wechatpay.app_id: one appid, kept for older configurations
	AppIDs       []string // channels.wechatpay.app_ids: every appid paying to MchID; unioned with AppID
	APIv3Key     string   // channels.wechatpay.api_v3_key: exactly 32 bytes
	PublicKeyID  string   // channels.wechatpay.platform_public_key_id
	PublicKey    *rsa.PublicKey
	Certificates []*x509.Certificate // channels.wechatpay.platform_certificate_files
}

// Channel verifies WeChat Pay API v3 notifications with the official SDK's verifier, then
// decrypts and maps the resource itself, and renders the replies WeChat expects.
type Channel struct {
	mchID, apiV3Key string
	appIDs          []string        // every appid whose payments are ours (one mchid serves several)
	serials         map[string]bool // every Wechatpay-Serial configured at start
	verifier        auth.Verifier   // the SDK's: the platform key(s) by serial
	// certs holds the platform certificates (certificate mode; nil in public-key mode): the
	// configured ones, then those downloaded by a Certificates refresher.
	certs *wechatCertSet
	// refresher, once set, is asked once about a notification's unknown serial.
	refresher atomic.Pointer[Certificates]
}

// MinRSABits is the smallest key this channel accepts, its platform's and the merchant's (paygw
// doctor checks the files with it): the signature type is WECHATPAY2-SHA256-RSA2048, so anything smaller is a
// configuration mistake.
const MinRSABits = channels.MinRSABits2048

// wechatWindow is WeChat's clock window: refuse when |now - Wechatpay-Timestamp| >= 5 min.
const wechatWindow = 300 * time.Second

const wechatSignatureType = "WECHATPAY2-SHA256-RSA2048"

// wechatProbePrefix starts the signature of the notifications WeChat sends, on purpose wrongly
// signed, to check that merchants verify.
const wechatProbePrefix = "WECHATPAY/SIGNTEST/"

// New checks c and builds the SDK verifier that fits it: public key, certificates, or
// both (the SDK's combined verifier). Errors name the configuration key at fault.
func New(c Config) (*Channel, error) {
	const p = "channels: wechatpay: channels.wechatpay."
	switch {
	case c.MchID == "":
		return nil, errors.New(p + "mch_id: empty")
	case c.AppID == "" && len(c.AppIDs) == 0:
		return nil, errors.New(p + "app_id or app_ids: neither is set")
	case len(c.APIv3Key) != 32:
		return nil, fmt.Errorf(p+"api_v3_key: %d bytes, want exactly 32", len(c.APIv3Key))
	case c.PublicKeyID == "" && c.PublicKey == nil && len(c.Certificates) == 0:
		return nil, errors.New(p + "platform_public_key_id/platform_public_key_file or platform_certificate_files: neither is set")
	case c.PublicKeyID != "" && c.PublicKey == nil:
		return nil, errors.New(p + "platform_public_key_file: missing while platform_public_key_id is set")
	case c.PublicKeyID == "" && c.PublicKey != nil:
		return nil, errors.New(p + "platform_public_key_id: missing while platform_public_key_file is set")
	}

	w := &Channel{mchID: c.MchID, apiV3Key: c.APIv3Key, serials: make(map[string]bool)}
	if strings.TrimSpace(c.AppID) != c.AppID {
		return nil, errors.New(p + "app_id: surrounding white space")
	}
	for i, id := range c.AppIDs {
		if id == "" || strings.TrimSpace(id) != id {
			return nil, fmt.Errorf(p+"app_ids[%d]: empty or surrounded by white space", i)
		}
	}
	for _, id := range append([]string{c.AppID}, c.AppIDs...) {
		if id != "" && !slices.Contains(w.appIDs, id) { // one appid under both keys is one appid
			w.appIDs = append(w.appIDs, id)
		}
	}

	if c.PublicKey != nil {
		if err := channels.CheckRSAKey(c.PublicKey, MinRSABits); err != nil {
			return nil, fmt.Errorf(p+"platform_public_key_file: %w", err)
		}
		if strings.TrimSpace(c.PublicKeyID) != c.PublicKeyID {
			return nil, errors.New(p + "platform_public_key_id: surrounding white space")
		}
		w.serials[c.PublicKeyID] = true
	}
	for i, cert := range c.Certificates {
		if cert == nil {
			return nil, fmt.Errorf(p+"platform_certificate_files[%d]: nil certificate", i)
		}
		// The SDK type-asserts *rsa.PublicKey at verification time and would panic on another key.
		key, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf(p+"platform_certificate_files[%d]: %T key, want RSA", i, cert.PublicKey)
		}
		if err := channels.CheckRSAKey(key, MinRSABits); err != nil {
			return nil, fmt.Errorf(p+"platform_certificate_files[%d]: %w", i, err)
		}
		serial := utils.GetCertificateSerialNumber(*cert) // the key core.CertificateMap uses
		switch {
		case cert.SerialNumber == nil || cert.SerialNumber.Sign() <= 0:
			return nil, fmt.Errorf(p+"platform_certificate_files[%d]: serial number is not positive", i)
		case w.serials[serial]:
			return nil, fmt.Errorf(p+"platform_certificate_files[%d]: serial %s appears twice (or equals platform_public_key_id)", i, serial)
		}
		w.serials[serial] = true
	}

	var verifier auth.Verifier
	if len(c.Certificates) > 0 {
		w.certs = newWeChatCertSet(c.Certificates)
	}
	switch {
	case c.PublicKey != nil && len(c.Certificates) > 0:
		verifier = verifiers.NewSHA256WithRSACombinedVerifier(w.certs, c.PublicKeyID, *c.PublicKey)
	case c.PublicKey != nil:
		verifier = verifiers.NewSHA256WithRSAPubkeyVerifier(c.PublicKeyID, *c.PublicKey)
	default:
		verifier = verifiers.NewSHA256WithRSAVerifier(w.certs)
	}
	w.verifier = verifier
	return w, nil
}

// Name is the channel name stored with every event.
func (w *Channel) Name() string { return "wechatpay" }

// Verify checks the headers and signature of a WeChat Pay notification over the raw body, then
// decrypts its resource and maps it to an event.
//
// Errors: channels.ErrMalformed for a missing, repeated or ill-formed Wechatpay-* header, a body or
// resource that does not parse, or a resource that does not decrypt with the APIv3 key (the
// signature held by then, so it is not a forgery: most likely our api_v3_key is not the one set
// in the merchant console); channels.ErrUnsupported for a Wechatpay-Signature-Type or resource algorithm
// other than WeChat's one; channels.ErrStale when |now - Wechatpay-Timestamp| >= 300 s; channels.ErrBadSignature
// for an unknown Wechatpay-Serial (in certificate mode with a Certificates refresher set,
// only after one refresh: see its forSerial) or a signature that does not verify (WeChat's
// probes with a wrong signature land here); channels.ErrNotOurs when mchid or appid differ. The SDK's own
// error text, which quotes the whole request, never reaches our errors.
func (w *Channel) Verify(body []byte, header http.Header, now time.Time) (payment.Event, error) {
	err := w.checkHeader(header, now)
	if errors.Is(err, errWeChatUnknownSerial) && w.refreshFor(strings.TrimSpace(header.Get("Wechatpay-Serial"))) {
		err = w.checkHeader(header, now)
	}
	if err != nil {
		return payment.Event{}, err
	}

	// The signed message, built as the SDK's notify validator builds it ("%d\n%s\n%s\n" of
	// timestamp, nonce and body; checkHeader made sure the timestamp is in that canonical form).
	// The validator itself is not used: it also checks the timestamp against time.Now, which
	// would make the window the wall clock's rather than now's.
	get := func(key string) string { return strings.TrimSpace(header.Get(key)) }
	message := get("Wechatpay-Timestamp") + "\n" + get("Wechatpay-Nonce") + "\n" + string(body) + "\n"
	if err := w.verifier.Verify(context.Background(), get("Wechatpay-Serial"), message, get("Wechatpay-Signature")); err != nil {
		return payment.Event{}, fmt.Errorf("%w: wechatpay: signature does not verify", channels.ErrBadSignature)
	}
	ev, err := w.eventFromBody(body)
	if err != nil {
		return payment.Event{}, err
	}
	return channels.CheckEvent(ev)
}

// ApplyTimeout is 4 s: WeChat waits 5 s for the reply, verification and network included.
func (w *Channel) ApplyTimeout() time.Duration { return 4 * time.Second }

// AcceptsCurrency refuses every currency but CNY, the one paygw takes through this channel
// (channels.CNYOnly).
func (w *Channel) AcceptsCurrency(code string) error { return channels.CNYOnly(w.Name(), code) }

// checkHeader does, with our clock, the checks that need no key, so that the SDK (which
// describes failures in free text) is only asked whether the signature holds.
func (w *Channel) checkHeader(header http.Header, now time.Time) error {
	get := func(key string) (string, error) {
		vs := header.Values(key)
		switch {
		case len(vs) == 0 || strings.TrimSpace(vs[0]) == "":
			return "", fmt.Errorf("%w: wechatpay: header %s missing", channels.ErrMalformed, key)
		case len(vs) > 1:
			return "", fmt.Errorf("%w: wechatpay: header %s repeated", channels.ErrMalformed, key)
		}
		return strings.TrimSpace(vs[0]), nil // as the SDK reads it
	}
	tsText, err := get("Wechatpay-Timestamp")
	if err != nil {
		return err
	}
	if _, err := get("Wechatpay-Nonce"); err != nil {
		return err
	}
	sig, err := get("Wechatpay-Signature")
	if err != nil {
		return err
	}
	if strings.HasPrefix(sig, wechatProbePrefix) {
		return fmt.Errorf("%w: wechatpay: Wechatpay-Signature is a signature-test probe", channels.ErrProbe)
	}
	serial, err := get("Wechatpay-Serial")
	if err != nil {
		return err
	}
	if st := header.Get("Wechatpay-Signature-Type"); st != "" && st != wechatSignatureType {
		return fmt.Errorf("%w: wechatpay: Wechatpay-Signature-Type %s", channels.ErrUnsupported, channels.Quote(st))
	}

	// The SDK signs-checks strconv of the parsed number, so only its canonical form is accepted:
	// "+17..." or "017..." would verify a different message than the one sent.
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil || !channels.AllDigits(tsText) || strconv.FormatInt(ts, 10) != tsText {
		return fmt.Errorf("%w: wechatpay: Wechatpay-Timestamp is not decimal unix seconds", channels.ErrMalformed)
	}
	// now alone decides: it is the request's arrival on the wall clock in production
	// (handlers pass the time the request started), and a capture's own time in tests.
	if !withinWindow(now, ts) {
		return fmt.Errorf("%w: wechatpay: Wechatpay-Timestamp outside the 300 s window", channels.ErrStale)
	}

	if !w.knownSerial(serial) {
		return errWeChatUnknownSerial
	}
	if _, err := base64.StdEncoding.DecodeString(sig); err != nil {
		return fmt.Errorf("%w: wechatpay: Wechatpay-Signature is not base64", channels.ErrBadSignature)
	}
	return nil
}

func withinWindow(now time.Time, ts int64) bool {
	d := now.Unix() - ts
	return d > -int64(wechatWindow/time.Second) && d < int64(wechatWindow/time.Second)
}

// wechatBody is the notification envelope; resource is what WeChat encrypted for us.
type wechatBody struct {
	ID           string `json:"id"`
	CreateTime   string `json:"create_time"`
	EventType    string `json:"event_type"`
	ResourceType string `json:"resource_type"`
	Resource     *struct {
		Algorithm      string `json:"algorithm"`
		Ciphertext     string `json:"ciphertext"`
		Nonce          string `json:"nonce"`
		AssociatedData string `json:"associated_data"`
		OriginalType   string `json:"original_type"`
	} `json:"resource"`
}

// wechatResource covers both plain resources we read: transactions and refunds.
type wechatResource struct {
	AppID         string `json:"appid"`
	MchID         string `json:"mchid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	TradeState    string `json:"trade_state"`
	RefundID      string `json:"refund_id"`
	RefundStatus  string `json:"refund_status"`
	SuccessTime   string `json:"success_time"`
	Amount        *struct {
		Total    *int64 `json:"total"`
		Refund   *int64 `json:"refund"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

// wechatAEADNonceSize is the only nonce length WeChat uses, and the only one cipher.GCM accepts
// without panicking.
const wechatAEADNonceSize = 12

// eventFromBody parses, decrypts and maps a body whose signature already holds. It is apart from
// Verify so that fuzzing reaches it without forging signatures.
func (w *Channel) eventFromBody(body []byte) (payment.Event, error) {
	if err := channels.StrictJSON("wechatpay", "body", body); err != nil {
		return payment.Event{}, err
	}
	var env wechatBody
	if err := json.Unmarshal(body, &env); err != nil {
		return payment.Event{}, fmt.Errorf("%w: wechatpay: body is not the notification JSON", channels.ErrMalformed)
	}
	switch {
	case env.ID == "":
		return payment.Event{}, fmt.Errorf("%w: wechatpay: id missing", channels.ErrMalformed)
	case env.EventType == "":
		return payment.Event{}, fmt.Errorf("%w: wechatpay: event_type missing", channels.ErrMalformed)
	case len(env.EventType) > 64:
		return payment.Event{}, fmt.Errorf("%w: wechatpay: event_type longer than 64 bytes", channels.ErrMalformed)
	case env.Resource == nil:
		return payment.Event{}, fmt.Errorf("%w: wechatpay: resource missing", channels.ErrMalformed)
	case env.Resource.Algorithm != "AEAD_AES_256_GCM":
		return payment.Event{}, fmt.Errorf("%w: wechatpay: resource algorithm %s", channels.ErrUnsupported, channels.Quote(env.Resource.Algorithm))
	case len(env.Resource.Nonce) != wechatAEADNonceSize:
		return payment.Event{}, fmt.Errorf("%w: wechatpay: resource nonce is %d bytes, want %d", channels.ErrMalformed, len(env.Resource.Nonce), wechatAEADNonceSize)
	}
	plain, err := utils.DecryptAES256GCM(w.apiV3Key, env.Resource.AssociatedData, env.Resource.Nonce, env.Resource.Ciphertext)
	if err != nil {
		return payment.Event{}, fmt.Errorf("%w: wechatpay: resource does not decrypt with the APIv3 key", channels.ErrMalformed)
	}
	if err := channels.StrictJSON("wechatpay", "decrypted resource", []byte(plain)); err != nil {
		return payment.Event{}, err
	}
	var res wechatResource
	if err := json.Unmarshal([]byte(plain), &res); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" { // Field is our struct's path, not input
			return payment.Event{}, fmt.Errorf("%w: wechatpay: resource field %s has the wrong type", channels.ErrMalformed, te.Field)
		}
		return payment.Event{}, fmt.Errorf("%w: wechatpay: decrypted resource is not JSON", channels.ErrMalformed)
	}

	ev := payment.Event{
		Channel:  "wechatpay",
		NotifyID: env.ID,
		Status:   env.EventType,
		Currency: "CNY",
		Raw:      bytes.Clone(body),
	}
	switch env.EventType {
	case "TRANSACTION.SUCCESS":
		err = w.mapTransaction(&ev, res)
	case "REFUND.SUCCESS", "REFUND.ABNORMAL", "REFUND.CLOSED":
		err = w.mapRefund(&ev, res, env.EventType == "REFUND.SUCCESS")
	default:
		err = w.mapOther(&ev, res)
	}
	if err != nil {
		return payment.Event{}, err
	}
	return ev, nil
}

func (w *Channel) mapTransaction(ev *payment.Event, res wechatResource) error {
	if !channels.EqualConstantTime(res.MchID, w.mchID) {
		return fmt.Errorf("%w: wechatpay: mchid differs from ours", channels.ErrNotOurs)
	}
	if !w.ourAppID(res.AppID) {
		return fmt.Errorf("%w: wechatpay: appid is not one of ours", channels.ErrNotOurs)
	}
	if err := wechatIDs(ev, res); err != nil {
		return err
	}
	if res.TradeState == "" || len(res.TradeState) > 32 {
		return fmt.Errorf("%w: wechatpay: trade_state missing or longer than 32 bytes", channels.ErrMalformed)
	}
	ev.Status += ":" + res.TradeState
	ev.Kind = payment.KindPending
	if res.TradeState == "SUCCESS" {
		ev.Kind = payment.KindPaid
	}
	if res.Amount == nil || res.Amount.Total == nil {
		return fmt.Errorf("%w: wechatpay: amount.total missing", channels.ErrMalformed)
	}
	var err error
	if ev.AmountFen, err = wechatFen("amount.total", *res.Amount.Total); err != nil {
		return err
	}
	if ev.Currency, err = wechatCurrency(res.Amount.Currency); err != nil {
		return err
	}
	return wechatSuccessTime(ev, res)
}

// ourAppID reports whether appid is one of the configured ones, comparing with every one.
func (w *Channel) ourAppID(appid string) bool {
	ours := false
	for _, id := range w.appIDs {
		ours = channels.EqualConstantTime(appid, id) || ours
	}
	return ours
}

// mapRefund maps a refund notice. Only REFUND.SUCCESS (succeeded) moved money: it is a refund,
// keyed by WeChat's refund_id, of amount.refund (this refund alone, not a running total).
// REFUND.ABNORMAL and REFUND.CLOSED say a refund did not go through: acknowledged and journalled.
func (w *Channel) mapRefund(ev *payment.Event, res wechatResource, succeeded bool) error {
	if !channels.EqualConstantTime(res.MchID, w.mchID) {
		return fmt.Errorf("%w: wechatpay: mchid differs from ours", channels.ErrNotOurs)
	}
	if err := wechatIDs(ev, res); err != nil {
		return err
	}
	if res.RefundStatus != "" {
		if len(res.RefundStatus) > 32 {
			return fmt.Errorf("%w: wechatpay: refund_status longer than 32 bytes", channels.ErrMalformed)
		}
		ev.Status += ":" + res.RefundStatus
	}
	ev.Kind = payment.KindOther
	if succeeded {
		if res.RefundID == "" {
			return fmt.Errorf("%w: wechatpay: refund_id missing", channels.ErrMalformed)
		}
		if res.Amount == nil || res.Amount.Refund == nil {
			return fmt.Errorf("%w: wechatpay: amount.refund missing", channels.ErrMalformed)
		}
		ev.Kind, ev.RefundID = payment.KindRefund, res.RefundID
	}
	var err error
	if res.Amount != nil && res.Amount.Refund != nil {
		if ev.AmountFen, err = wechatFen("amount.refund", *res.Amount.Refund); err != nil {
			return err
		}
		if succeeded {
			ev.RefundFen = ev.AmountFen
		}
	}
	currency := ""
	if res.Amount != nil {
		currency = res.Amount.Currency
	}
	if ev.Currency, err = wechatCurrency(currency); err != nil {
		return err
	}
	return wechatSuccessTime(ev, res)
}

// mapOther journals an event type we do not act on; it still has to name one of our orders.
func (w *Channel) mapOther(ev *payment.Event, res wechatResource) error {
	if res.MchID != "" && !channels.EqualConstantTime(res.MchID, w.mchID) {
		return fmt.Errorf("%w: wechatpay: mchid differs from ours", channels.ErrNotOurs)
	}
	ev.Kind = payment.KindOther
	ev.TradeNo = res.OutTradeNo
	if !payment.ValidTradeNo(ev.TradeNo) {
		return fmt.Errorf("%w: wechatpay: out_trade_no missing or not 1-%d of [A-Za-z0-9_-]", channels.ErrMalformed, payment.MaxTradeNo)
	}
	if len(res.TransactionID) <= channels.MaxChannelTxnID { // journalled only: a longer one is left out
		ev.ChannelTxnID = res.TransactionID
	}
	return nil
}

func wechatIDs(ev *payment.Event, res wechatResource) error {
	ev.TradeNo = res.OutTradeNo
	if !payment.ValidTradeNo(ev.TradeNo) {
		return fmt.Errorf("%w: wechatpay: out_trade_no missing or not 1-%d of [A-Za-z0-9_-]", channels.ErrMalformed, payment.MaxTradeNo)
	}
	if res.TransactionID == "" {
		return fmt.Errorf("%w: wechatpay: transaction_id missing", channels.ErrMalformed)
	}
	ev.ChannelTxnID = res.TransactionID
	return nil
}

func wechatFen(field string, fen int64) (int64, error) {
	if fen < 0 || fen > channels.MaxFen {
		return 0, fmt.Errorf("%w: wechatpay: %s out of range", channels.ErrMalformed, field)
	}
	return fen, nil
}

// wechatCurrency upper-cases an ISO 4217 code; WeChat leaves it out for CNY at times.
func wechatCurrency(s string) (string, error) {
	if s == "" {
		return "CNY", nil
	}
	s = strings.ToUpper(s)
	if len(s) != 3 || strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return "", fmt.Errorf("%w: wechatpay: amount.currency %s is not an ISO 4217 code", channels.ErrMalformed, channels.Quote(s))
	}
	return s, nil
}

func wechatSuccessTime(ev *payment.Event, res wechatResource) error {
	if res.SuccessTime == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, res.SuccessTime)
	if err != nil {
		return fmt.Errorf("%w: wechatpay: success_time is not RFC 3339", channels.ErrMalformed)
	}
	ev.PaidAt = t
	return nil
}

// Reply renders the answer WeChat understands: 200 with no body stops its retries; a failure is
// any 4xx/5xx with a FAIL body, and WeChat redelivers either way (the status code is for our logs
// and for WeChat's merchant console).
func (w *Channel) Reply(r payment.Reply) channels.Response {
	const contentType = "application/json"
	switch r {
	case payment.ReplySuccess:
		return channels.Response{Status: http.StatusOK}
	case payment.ReplyRefuse:
		return channels.Response{Status: http.StatusBadRequest, ContentType: contentType,
			Body: []byte(`{"code":"FAIL","message":"verification failed"}`)}
	default: // ReplyRetry, and anything unknown: a redelivery is never lost money
		return channels.Response{Status: http.StatusInternalServerError, ContentType: contentType,
			Body: []byte(`{"code":"FAIL","message":"temporarily unavailable, retry"}`)}
	}
}
