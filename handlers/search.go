package handlers

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Order search: GET /v1/orders?channel_txn_id=&merchant_order_id=&user_id=&status=
// &created_from=&created_to=&cursor=, newest first, pageSize a page.
var orderSearchParams = []string{"channel_txn_id", "merchant_order_id", "user_id", "status", "created_from", "created_to", "cursor"}

// orderCursorPrefix versions the search cursor's inside: base64url("o1:" + the last order's
// create_time in Unix milliseconds + ":" + its id).
const orderCursorPrefix = "o1:"

func encodeOrderCursor(c repository.OrderCursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(orderCursorPrefix +
		strconv.FormatInt(c.CreateTime.UnixMilli(), 10) + ":" + strconv.FormatInt(c.ID, 10)))
}

// decodeOrderCursor reads a next_cursor of the search; one spelling per cursor.
func decodeOrderCursor(s string) (*repository.OrderCursor, error) {
	bad := fmt.Errorf("%w: cursor must be a next_cursor from a previous page", errBadQuery)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(s) > 64 {
		return nil, bad
	}
	ms, id, ok := strings.Cut(strings.TrimPrefix(string(raw), orderCursorPrefix), ":")
	if !ok || !strings.HasPrefix(string(raw), orderCursorPrefix) {
		return nil, bad
	}
	m, err1 := strconv.ParseInt(ms, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || m < 0 || n < 1 {
		return nil, bad
	}
	c := repository.OrderCursor{CreateTime: time.UnixMilli(m).UTC(), ID: n}
	if encodeOrderCursor(c) != s {
		return nil, bad
	}
	return &c, nil
}

// parseOrderSearch checks every parameter; one it does not know, or one given twice, is refused.
func parseOrderSearch(v url.Values) (repository.OrderFilter, error) {
	var f repository.OrderFilter
	for k, vals := range v {
		if !slices.Contains(orderSearchParams, k) {
			return f, fmt.Errorf("%w: unknown parameter %q (%s)", errBadQuery, k, strings.Join(orderSearchParams, ", "))
		}
		if len(vals) != 1 || vals[0] == "" {
			return f, fmt.Errorf("%w: %s must be given once, not empty", errBadQuery, k)
		}
	}
	f.ChannelTxnID, f.MerchantOrderID, f.Status = v.Get("channel_txn_id"), v.Get("merchant_order_id"), v.Get("status")
	if len(f.ChannelTxnID) > 128 || len(f.MerchantOrderID) > 64 {
		return f, fmt.Errorf("%w: channel_txn_id is at most 128 characters, merchant_order_id at most 64", errBadQuery)
	}
	if f.Status != "" && !slices.Contains([]string{payment.OrderWaitPay, payment.OrderPaid, payment.OrderClosed}, f.Status) {
		return f, fmt.Errorf("%w: status must be WAIT_PAY, PAID or CLOSED", errBadQuery)
	}
	if s := v.Get("user_id"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return f, fmt.Errorf("%w: user_id must be an integer", errBadQuery)
		}
		f.UserID, f.HasUserID = n, true
	}
	for k, t := range map[string]*time.Time{"created_from": &f.CreatedFrom, "created_to": &f.CreatedTo} {
		if s := v.Get(k); s != "" {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return f, fmt.Errorf("%w: %s must be an RFC 3339 time", errBadQuery, k)
			}
			*t = at.UTC()
		}
	}
	if s := v.Get("cursor"); s != "" {
		c, err := decodeOrderCursor(s)
		if err != nil {
			return f, err
		}
		f.After = c
	}
	return f, nil
}

// searchOrders is GET /v1/orders: the orders matching every filter given, newest first, a page
// at a time; next_cursor is absent on the last page.
func (s *Server) searchOrders(c echo.Context) error {
	f, err := parseOrderSearch(c.QueryParams())
	if err != nil {
		return err
	}
	found, last, err := s.db.SearchOrders(c.Request().Context(), f, pageSize)
	if err != nil {
		return err
	}
	out := struct {
		Orders     []orderView `json:"orders"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}{Orders: make([]orderView, 0, len(found))}
	for _, o := range found {
		out.Orders = append(out.Orders, viewOf(o))
	}
	if len(found) == pageSize {
		out.NextCursor = encodeOrderCursor(last)
	}
	return c.JSON(http.StatusOK, out)
}
