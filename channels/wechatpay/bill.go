package wechatpay

import (
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha1" // #nosec G505 -- WeChat Pay states the bill's digest as SHA1; it is checked, not relied on for secrecy
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth"
	"github.com/wechatpay-apiv3/wechatpay-go/core/auth/credentials"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/outbound"
	"github.com/paygw/paygw/config"
)

// wechatBills downloads WeChat Pay's trade bill: GET /v3/bill/tradebill through the querier's SDK
// client (signed with the merchant API key, the answer verified with the verifier's platform
// keys exactly as a trade query's), then a GET of the download_url it names. The download is
// signed by the same SDK client's signer, but its answer carries no Wechatpay-* headers and is
// not verified; its integrity is the SHA1 of the decompressed bill, which the verified
// tradebill answer states.
type wechatBills struct {
	client *core.Client // tradebill: signed, answers verified
	v      *Channel
	base   *url.URL     // api_base_url: the download is sent there too
	hc     *http.Client // the download: hc as given, no response size bound but channels.MaxBillBytes
}

var _ channels.BillDownloader = (*wechatBills)(nil)

// wechatAPIHost is the address the SDK's services write into URLs; a transport sends every
// request to api_base_url instead.
const wechatAPIHost = "https://api.mch.weixin.qq.com"

// NewBillDownloader builds the bill download for the merchant v verifies, with the merchant API
// key and serial of c, as NewQuerier does (same errors, channels.ErrNoCredentials included).
// hc carries the timeout; nil is a client with a 15 s timeout.
func NewBillDownloader(c config.WeChatPay, v *Channel, hc *http.Client) (channels.BillDownloader, error) {
	client, err := wechatAPIClient("NewWeChatPayBills", c, v, hc)
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(c.APIBaseURL) // checked by wechatMerchantClient
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	return &wechatBills{client: client, v: v, base: base, hc: hc}, nil
}

func (w *wechatBills) Name() string { return "wechatpay" }

// DownloadBill fetches the ALL trade bill of day, gzip-compressed, and checks its SHA1.
//
// A verified 400 NO_STATEMENT_EXIST is a day without trades: an empty bill, no error.
// Errors: channels.ErrQueryFailed for transport failures, STATEMENT_CREATING (the bill is being made:
// ask again later) and any other refusal; channels.ErrBadSignature for a tradebill answer that does not
// verify, or a download whose SHA1 differs from the stated hash_value; channels.ErrMalformed for an
// answer that does not parse, or a download that is not gzip.
func (w *wechatBills) DownloadBill(ctx context.Context, day time.Time) (*channels.BillFile, error) {
	q := url.Values{"bill_date": {channels.BillDate(day)}, "bill_type": {"ALL"}, "tar_type": {"GZIP"}}
	var got outbound.Capture
	_, err := w.client.Get(outbound.With(ctx, &got), wechatAPIHost+"/v3/bill/tradebill?"+q.Encode())
	var apiErr *core.APIError
	switch {
	case got.Status == 0:
		return nil, fmt.Errorf("%w: wechatpay: %w", channels.ErrQueryFailed, channels.URLCause(err))
	case errors.As(err, &apiErr):
		// Not 2xx: the SDK checked no signature. A refusal is believed only once verified.
		if err := w.v.verifyResponse(got.Header, got.Body, time.Now()); err != nil {
			return nil, err
		}
		code, err := wechatErrorCode(got.Body)
		if err != nil {
			return nil, err
		}
		if got.Status == http.StatusBadRequest && code == "NO_STATEMENT_EXIST" {
			return channels.NoBill("wechatpay", day), nil
		}
		if code == "STATEMENT_CREATING" {
			return nil, fmt.Errorf("%w: wechatpay: the bill of this day is being made (STATEMENT_CREATING): WeChat Pay makes a day's bill after 10:00 Beijing time the next day; ask again later", channels.ErrQueryFailed)
		}
		return nil, fmt.Errorf("%w: wechatpay: tradebill: HTTP %d %s", channels.ErrQueryFailed, got.Status, channels.Quote(code))
	case errors.Is(err, channels.ErrBadSignature):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: wechatpay: tradebill: %w", channels.ErrQueryFailed, err)
	case !got.Verified:
		return nil, fmt.Errorf("%w: wechatpay: response not verified", channels.ErrBadSignature)
	}
	tb, err := parseWeChatTradeBill(got.Body)
	if err != nil {
		return nil, err
	}
	b, err := w.download(ctx, day, tb.DownloadURL)
	if err != nil {
		return nil, err
	}
	if err := checkWeChatBillHash(b, tb.HashValue); err != nil {
		_ = b.Close()
		return nil, err
	}
	return b, nil
}

// wechatTradeBill is the tradebill answer.
type wechatTradeBill struct {
	HashType    string `json:"hash_type"`
	HashValue   string `json:"hash_value"`
	DownloadURL string `json:"download_url"`
}

// parseWeChatTradeBill reads a verified tradebill answer: hash_type SHA1, hash_value 40 hex
// digits, download_url an absolute http(s) URL whose path and query are what the download signs.
func parseWeChatTradeBill(body []byte) (wechatTradeBill, error) {
	var tb wechatTradeBill
	if err := channels.StrictJSON("wechatpay", "tradebill response", body); err != nil {
		return tb, err
	}
	if err := json.Unmarshal(body, &tb); err != nil {
		return tb, fmt.Errorf("%w: wechatpay: tradebill response is not {hash_type, hash_value, download_url}", channels.ErrMalformed)
	}
	if tb.HashType != "SHA1" {
		return tb, fmt.Errorf("%w: wechatpay: hash_type %s, want SHA1", channels.ErrMalformed, channels.Quote(tb.HashType))
	}
	if _, err := hex.DecodeString(tb.HashValue); err != nil || len(tb.HashValue) != 2*sha1.Size {
		return tb, fmt.Errorf("%w: wechatpay: hash_value is not a SHA1 in hex", channels.ErrMalformed)
	}
	u, err := url.Parse(tb.DownloadURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Path == "" {
		return tb, fmt.Errorf("%w: wechatpay: download_url is not an http(s) URL", channels.ErrMalformed)
	}
	return tb, nil
}

// wechatErrorCode reads a verified error answer's code.
func wechatErrorCode(body []byte) (string, error) {
	if err := channels.StrictJSON("wechatpay", "error response", body); err != nil {
		return "", err
	}
	var e struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code == "" {
		return "", fmt.Errorf("%w: wechatpay: error response is not {\"code\":...}", channels.ErrMalformed)
	}
	return e.Code, nil
}

// download GETs the bill: the download_url's path and query, at api_base_url, signed as every
// merchant request is (by the SDK client's signer), and spools the answer.
func (w *wechatBills) download(ctx context.Context, day time.Time, link string) (*channels.BillFile, error) {
	u, _ := url.Parse(link) // checked by parseWeChatTradeBill
	target := *w.base
	target.Path, target.RawPath, target.RawQuery = u.Path, u.RawPath, u.RawQuery
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: wechatpay: download_url: %w", channels.ErrMalformed, err)
	}
	cred := credentials.WechatPayCredentials{Signer: sdkSigner{w.client}}
	authz, err := cred.GenerateAuthorizationHeader(ctx, http.MethodGet, req.URL.RequestURI(), "")
	if err != nil {
		return nil, fmt.Errorf("%w: wechatpay: signing the download failed", channels.ErrQueryFailed)
	}
	req.Header.Set("Authorization", authz)
	req.Header.Set("Accept", "*/*")
	return channels.FetchBill(w.hc, req, "wechatpay", "bill", bills.FormatWeChat, day)
}

// checkWeChatBillHash compares the SHA1 of the decompressed bill with the stated one. The bill
// was asked for as gzip; an uncompressed one is hashed as it is.
func checkWeChatBillHash(b *channels.BillFile, want string) error {
	br := bufio.NewReader(b.Stored())
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("%w: wechatpay: the bill is not valid gzip", channels.ErrMalformed)
		}
		r = zr
	}
	h := sha1.New() // #nosec G401 -- the channel's stated digest
	if _, err := io.Copy(h, r); err != nil {
		return fmt.Errorf("%w: wechatpay: the bill does not decompress (cut short?)", channels.ErrMalformed)
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, want) {
		return fmt.Errorf("%w: wechatpay: the bill's SHA1 differs from the tradebill answer's hash_value", channels.ErrBadSignature)
	}
	return nil
}

// sdkSigner is the SDK client's own signer (the merchant API key it was built with), as an
// auth.Signer for the download request the SDK cannot make without a validator.
type sdkSigner struct{ c *core.Client }

func (s sdkSigner) Sign(ctx context.Context, message string) (*auth.SignatureResult, error) {
	return s.c.Sign(ctx, message)
}

func (s sdkSigner) Algorithm() string { return "SHA256-RSA2048" }
