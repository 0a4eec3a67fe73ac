package alipay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/smartwalle/alipay/v3"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/channels/internal/outbound"
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

var _ channels.BillDownloader = (*alipayBills)(nil)

// NewBillDownloader builds the bill download of the channel v verifies, over the same SDK client
// as NewQuerier (whose errors it returns, channels.ErrNoCredentials included). hc carries the
// timeout of both requests; nil is a client with a 15 s timeout.
func NewBillDownloader(c config.Alipay, v *Channel, hc *http.Client) (channels.BillDownloader, error) {
	q, err := NewQuerier(c, v, hc)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	return &alipayBills{client: q.(*Querier).client, hc: hc}, nil
}

func (a *alipayBills) Name() string { return "alipay" }

// DownloadBill asks for the trade bill URL of day (bill_type trade) and downloads the zip.
//
// Errors: channels.ErrQueryFailed for transport failures, a status other than 200, and any code but
// 10000 (isp.bill_not_exist included: the bill is made after 10:00 Beijing time the next day);
// channels.ErrBadSignature for an unsigned or wrongly signed answer; channels.ErrMalformed for an answer without
// a usable URL, or a zip larger than the bound.
func (a *alipayBills) DownloadBill(ctx context.Context, day time.Time) (*channels.BillFile, error) {
	var got outbound.Capture
	rsp, err := a.client.BillDownloadURLQuery(outbound.With(ctx, &got), alipay.BillDownloadURLQuery{BillType: "trade", BillDate: channels.BillDate(day)})
	switch {
	case got.Status == 0:
		return nil, fmt.Errorf("%w: alipay: %w", channels.ErrQueryFailed, err)
	case got.Status != http.StatusOK:
		return nil, fmt.Errorf("%w: alipay: HTTP %d", channels.ErrQueryFailed, got.Status)
	case err != nil:
		if e := alipaySDKError(err); !errors.Is(e, channels.ErrMalformed) {
			return nil, e
		}
		return nil, fmt.Errorf("%w: alipay: response is not the bill.downloadurl.query JSON", channels.ErrMalformed)
	}
	link, err := alipayBillURL(rsp, got.Body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: alipay: bill_download_url: %w", channels.ErrMalformed, err)
	}
	return channels.FetchBill(a.hc, req, "alipay", "bill zip", bills.FormatAlipayZip, day)
}

// alipayBillURL reads the URL out of a verified answer, whose raw body is body.
func alipayBillURL(rsp *alipay.BillDownloadURLQueryRsp, body []byte) (string, error) {
	if err := channels.StrictJSON("alipay", "bill URL response", body); err != nil {
		return "", err
	}
	switch {
	case rsp == nil:
		return "", fmt.Errorf("%w: alipay: alipay_data_dataservice_bill_downloadurl_query_response is null", channels.ErrMalformed)
	case rsp.Code != alipay.CodeSuccess && rsp.SubCode == "isp.bill_not_exist":
		return "", fmt.Errorf("%w: alipay: no bill for this day yet (isp.bill_not_exist): Alipay makes a day's bill after 10:00 Beijing time the next day", channels.ErrQueryFailed)
	case rsp.Code != alipay.CodeSuccess:
		return "", fmt.Errorf("%w: alipay: code %s, sub_code %s", channels.ErrQueryFailed, channels.Quote(string(rsp.Code)), channels.Quote(rsp.SubCode))
	}
	u, err := url.Parse(rsp.BillDownloadURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return "", fmt.Errorf("%w: alipay: bill_download_url is not an http(s) URL", channels.ErrMalformed)
	}
	return u.String(), nil
}
