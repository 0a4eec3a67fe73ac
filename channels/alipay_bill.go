package channels

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/smartwalle/alipay/v3"

	"github.com/paygw/paygw/config"
)

// alipayBills downloads Alipay's trade bill: alipay.data.dataservice.bill.downloadurl.query
// through the trade querier's SDK client (signed request, response sign verified against the
// configured Alipay public key), then a GET of the bill_download_url that verified answer names
// (a short-lived URL carrying its own token: the zip itself is not signed).
type alipayBills struct {
	client *alipay.Client
	hc     *http.Client
}

var _ BillDownloader = (*alipayBills)(nil)

// NewAlipayBills builds the bill download of the channel v verifies, over the same SDK client
// as NewAlipayQuerier (whose errors it returns, ErrNoCredentials included). hc carries the
// timeout of both requests; nil is a client with a 15 s timeout.
func NewAlipayBills(c config.Alipay, v *Alipay, hc *http.Client) (BillDownloader, error) {
	q, err := NewAlipayQuerier(c, v, hc)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	return &alipayBills{client: q.(*AlipayQuerier).client, hc: hc}, nil
}

func (a *alipayBills) Name() string { return "alipay" }

// DownloadBill asks for the trade bill URL of day (bill_type trade) and downloads the zip.
//
// Errors: ErrQueryFailed for transport failures, a status other than 200, and any code but
// 10000 (isp.bill_not_exist included: the bill is made after 10:00 Beijing time the next day);
// ErrBadSignature for an unsigned or wrongly signed answer; ErrMalformed for an answer without
// a usable URL, or a zip larger than the bound.
func (a *alipayBills) DownloadBill(ctx context.Context, day time.Time) (*BillFile, error) {
	var got capture
	rsp, err := a.client.BillDownloadURLQuery(withCapture(ctx, &got), alipay.BillDownloadURLQuery{BillType: "trade", BillDate: billDate(day)})
	switch {
	case got.status == 0:
		return nil, fmt.Errorf("%w: alipay: %w", ErrQueryFailed, err)
	case got.status != http.StatusOK:
		return nil, fmt.Errorf("%w: alipay: HTTP %d", ErrQueryFailed, got.status)
	case err != nil:
		if e := alipaySDKError(err); !errors.Is(e, ErrMalformed) {
			return nil, e
		}
		return nil, fmt.Errorf("%w: alipay: response is not the bill.downloadurl.query JSON", ErrMalformed)
	}
	link, err := alipayBillURL(rsp, got.body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: alipay: bill_download_url: %w", ErrMalformed, err)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL carries a download token: not for the log
		}
		return nil, fmt.Errorf("%w: alipay: downloading the bill: %w", ErrQueryFailed, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: alipay: downloading the bill: HTTP %d", ErrQueryFailed, resp.StatusCode)
	}
	b, err := spoolBill("alipay", billAlipayZip, day, resp.Body)
	switch {
	case errors.Is(err, errBillTooLarge):
		return nil, fmt.Errorf("%w: alipay: the bill zip is %w", ErrMalformed, err)
	case err != nil:
		return nil, fmt.Errorf("%w: alipay: downloading the bill: %w", ErrQueryFailed, err)
	}
	return b, nil
}

// alipayBillURL reads the URL out of a verified answer, whose raw body is body.
func alipayBillURL(rsp *alipay.BillDownloadURLQueryRsp, body []byte) (string, error) {
	if err := strictJSON("alipay", "bill URL response", body); err != nil {
		return "", err
	}
	switch {
	case rsp == nil:
		return "", fmt.Errorf("%w: alipay: alipay_data_dataservice_bill_downloadurl_query_response is null", ErrMalformed)
	case rsp.Code != alipay.CodeSuccess:
		return "", fmt.Errorf("%w: alipay: code %s, sub_code %s", ErrQueryFailed, quote(string(rsp.Code)), quote(rsp.SubCode))
	}
	u, err := url.Parse(rsp.BillDownloadURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("%w: alipay: bill_download_url is not an http(s) URL", ErrMalformed)
	}
	return u.String(), nil
}
