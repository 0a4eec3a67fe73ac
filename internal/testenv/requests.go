package testenv

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Reply is an HTTP answer, its body read whole.
type Reply struct {
	Code   int
	Body   string
	Header http.Header
}

// Send sends req with client and reads the whole answer; a request that gets no answer, or
// whose body cannot be read, fails tb.
func Send(tb testing.TB, client *http.Client, req *http.Request) Reply {
	tb.Helper()
	res, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading the body: %v", req.Method, req.URL.Path, err)
	}
	return Reply{Code: res.StatusCode, Body: string(b), Header: res.Header}
}

// Cookie is the cookie of that name among cookies (a response's Cookies(), a jar's), nil if
// there is none; the last one wins, as in a browser.
func Cookie(cookies []*http.Cookie, name string) *http.Cookie {
	var found *http.Cookie
	for _, c := range cookies {
		if c.Name == name {
			found = c
		}
	}
	return found
}

// SeedOrder inserts a WAIT_PAY order of fen CNY for user 1 straight into db, as the order
// service would have created it (no stock is taken).
func SeedOrder(tb testing.TB, db *repository.DB, tradeNo, sku string, fen int64) {
	tb.Helper()
	err := db.InTx(context.Background(), func(tx *repository.Tx) error {
		return tx.InsertOrder(context.Background(), payment.Order{
			TradeNo: tradeNo, UserID: 1, SKU: sku, Num: 1, AmountFen: fen, Currency: "CNY",
			CreateTime: time.Now().UTC().Truncate(time.Millisecond),
		}, "", "", "")
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// APIRequest is a request to url as an API client sends it: the body, the bearer token (none for
// ""), a JSON content type when there is a body, and then header's fields, which may replace
// any of those.
func APIRequest(tb testing.TB, method, url, token, body string, header map[string]string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}
