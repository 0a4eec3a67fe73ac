package console

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// SearchField names the search box: one field for every key a complaint comes with.
const SearchField = "q"

// maxQuery is the longest key searched: a channel transaction id (128).
const maxQuery = 128

// searchLimit bounds the orders one search lists (a user's).
const searchLimit = 100

var errBadQuery = errors.New("search for a trade_no, a channel transaction id, a merchant order id or a user id (at most 128 printable characters)")

// query is what the search box asks: the key trimmed, and which of the searches it may be.
type query struct {
	Text      string // "" for an empty box
	TradeNo   bool   // it has a trade_no's shape
	UserID    int64  // with HasUserID: it is a decimal integer
	HasUserID bool
}

// parseQuery reads the search box. Surrounding spaces go; anything but printable characters,
// or more than maxQuery bytes, is refused. The same text is tried as every key it can be.
func parseQuery(raw string) (query, error) {
	s := strings.TrimSpace(raw)
	if len(s) > maxQuery || !utf8.ValidString(s) {
		return query{}, errBadQuery
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return query{}, errBadQuery
		}
	}
	q := query{Text: s, TradeNo: payment.ValidTradeNo(s)}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
		q.UserID, q.HasUserID = n, true
	}
	return q, nil
}

// find runs q as each key it may be and merges the orders, newest first, each once.
func (cs *Console) find(ctx context.Context, q query) ([]payment.Order, error) {
	var found []payment.Order
	seen := map[string]bool{}
	add := func(os ...payment.Order) {
		for _, o := range os {
			if !seen[o.TradeNo] {
				seen[o.TradeNo] = true
				found = append(found, o)
			}
		}
	}
	if q.Text == "" {
		return nil, nil
	}
	if q.TradeNo {
		o, err := cs.books.GetOrder(ctx, q.Text)
		switch {
		case err == nil:
			add(o)
		case !errors.Is(err, payment.ErrNotFound):
			return nil, err
		}
	}
	filters := []repository.OrderFilter{{ChannelTxnID: q.Text}}
	if len(q.Text) <= 64 {
		filters = append(filters, repository.OrderFilter{MerchantOrderID: q.Text})
	}
	if q.HasUserID {
		filters = append(filters, repository.OrderFilter{UserID: q.UserID, HasUserID: true})
	}
	for _, f := range filters {
		os, _, err := cs.books.SearchOrders(ctx, f, searchLimit)
		if err != nil {
			return nil, err
		}
		add(os...)
	}
	slices.SortStableFunc(found, func(a, b payment.Order) int { return b.CreateTime.Compare(a.CreateTime) })
	if len(found) > searchLimit {
		found = found[:searchLimit]
	}
	return found, nil
}
