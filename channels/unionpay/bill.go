package unionpay

import (
	"compress/zlib"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/paygw/paygw/bills"
	"github.com/paygw/paygw/channels"
	"github.com/paygw/paygw/config"
)

// unionPayBills downloads UnionPay ACP's transaction detail file (fileType 00): a form signed
// with the merchant certificate of the trade querier, answered by a message UnionPay signs as
// it signs notifications, checked by the same verifier; its fileContent is base64 of the
// zlib-deflated zip that holds the ZM file.
type unionPayBills struct {
	q   *unionPayQuerier // the merchant key, certId, verifier and client of the trade query
	url string
}

var _ channels.BillDownloader = (*unionPayBills)(nil)

// unionPayMaxBillResponse bounds the file download's answer, held in memory until its signature
// is checked. Deflated and zipped, it holds a bill many times its size.
const unionPayMaxBillResponse = 256 << 20

// NewBillDownloader builds the file download for the merchant v verifies, with the merchant
// certificate of c, as NewQuerier does (same errors, channels.ErrNoCredentials included). The
// address is UnionPay's file download host beside the configured query_url's gateway:
// gateway.<env>.95516.com becomes filedownload.<env>.95516.com, path "/"; any other host (a
// test double) is asked at its own root. hc nil is a client with a 30 s timeout.
func NewBillDownloader(c config.UnionPay, v *Channel, hc *http.Client) (channels.BillDownloader, error) {
	q, err := NewQuerier(c, v, hc)
	if err != nil {
		return nil, err
	}
	return &unionPayBills{q: q.(*unionPayQuerier), url: unionPayFileURL(c.QueryURL)}, nil
}

// unionPayFileURL is the file download address beside a query URL (already checked).
func unionPayFileURL(queryURL string) string {
	u, _ := url.Parse(queryURL)
	host := u.Host
	if rest, ok := strings.CutPrefix(host, "gateway."); ok && strings.HasSuffix(u.Hostname(), "95516.com") {
		host = "filedownload." + rest
	}
	return (&url.URL{Scheme: u.Scheme, Host: host, Path: "/"}).String()
}

func (u *unionPayBills) Name() string { return "unionpay" }

// DownloadBill asks for the file of settlement day day (settleDate MMDD) and keeps the zip.
//
// Errors: channels.ErrQueryFailed for transport failures, HTTP statuses and any respCode but 00 (98: no
// file for that day yet); channels.ErrBadSignature when the verifier refuses the answer; channels.ErrMalformed
// for an answer that does not parse, is not for our merId, or whose fileContent is not base64
// of zlib data.
func (u *unionPayBills) DownloadBill(ctx context.Context, day time.Time) (*channels.BillFile, error) {
	form, err := u.request(day, u.q.now())
	if err != nil {
		return nil, err
	}
	body, err := u.post(ctx, form)
	if err != nil {
		return nil, err
	}
	params, err := parseUnionPayResponse(body)
	if err != nil {
		return nil, err
	}
	if err := u.q.v.checkSignature(params, u.q.now()); err != nil {
		if rc := params["respCode"]; rc != "" {
			return nil, fmt.Errorf("%w (unverified respCode %s)", err, channels.Quote(rc))
		}
		return nil, err
	}
	content, err := unionPayFileContent(u.q.v.merID, params)
	if err != nil {
		return nil, err
	}
	zr, err := zlib.NewReader(base64.NewDecoder(base64.StdEncoding, strings.NewReader(content)))
	if err != nil {
		return nil, fmt.Errorf("%w: unionpay: fileContent is not base64 of zlib data", channels.ErrMalformed)
	}
	b, err := channels.SpoolBill("unionpay", bills.FormatUnionPayZip, day, zr)
	switch {
	case errors.Is(err, channels.ErrBillTooLarge):
		return nil, fmt.Errorf("%w: unionpay: the bill is %w", channels.ErrMalformed, err)
	case errors.Is(err, channels.ErrBillSource):
		return nil, fmt.Errorf("%w: unionpay: fileContent is not base64 of zlib data", channels.ErrMalformed)
	case err != nil:
		return nil, fmt.Errorf("%w: unionpay: spooling the bill: %w", channels.ErrQueryFailed, err)
	}
	return b, nil
}

// request is the signed file download form.
func (u *unionPayBills) request(day, now time.Time) (url.Values, error) {
	params := map[string]string{
		"version":    "5.1.0",
		"encoding":   "UTF-8",
		"signMethod": "01",
		"txnType":    "76",
		"txnSubType": "01",
		"bizType":    "000000",
		"accessType": "0",
		"fileType":   "00",
		"merId":      u.q.v.merID,
		"settleDate": day.Format("0102"),
		"txnTime":    now.In(bills.ChinaTime).Format(unionPayTimeLayout),
		"certId":     u.q.certID,
	}
	return u.q.signedForm(params)
}

func (u *unionPayBills) post(ctx context.Context, form url.Values) ([]byte, error) {
	return unionPayPost(ctx, u.q.hc, u.url, form, unionPayMaxBillResponse)
}

// unionPayFileContent reads a verified file download answer: respCode 00, our merId, and a
// fileContent, returned as sent (base64).
func unionPayFileContent(merID string, params map[string]string) (string, error) {
	respCode, err := channels.RequiredField("unionpay", params, "respCode", 2)
	if err != nil {
		return "", err
	}
	if m, ok := params["merId"]; (ok || respCode == "00") && !channels.EqualConstantTime(m, merID) {
		return "", fmt.Errorf("%w: unionpay: response merId differs from ours", channels.ErrMalformed)
	}
	if respCode != "00" {
		return "", fmt.Errorf("%w: unionpay: file download respCode %s", channels.ErrQueryFailed, channels.Quote(respCode))
	}
	if t := params["txnType"]; t != "" && t != "76" {
		return "", fmt.Errorf("%w: unionpay: response txnType %s is not a file download", channels.ErrMalformed, channels.Quote(t))
	}
	content := params["fileContent"]
	if content == "" {
		return "", fmt.Errorf("%w: unionpay: fileContent missing", channels.ErrMalformed)
	}
	return content, nil
}
