package simulate

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stripeBillRoutes serves GET /v1/balance_transactions for the fake's Stripe trades: a charge
// balance transaction per payment and a refund one per refund, created at the trade's PaidAt,
// filtered by created[gte] / created[lt] (and type when given), paginated by limit and
// starting_after. expand[]=data.source gives the charge or refund object instead of its id, and
// expand[]=data.source.payment_intent the PaymentIntent inside it.
func (f *Fake) stripeBillRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/balance_transactions", f.stripeBalanceTransactions)
}

func (f *Fake) stripeBalanceTransactions(w http.ResponseWriter, r *http.Request) {
	if !f.stripeAuthorized(w, r) {
		return
	}
	q := r.URL.Query()
	bound := func(key string, def int64) (int64, bool) {
		s := q.Get(key)
		if s == "" {
			return def, true
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return n, err == nil
	}
	gte, ok1 := bound("created[gte]", 0)
	lt, ok2 := bound("created[lt]", 1<<62)
	limit, ok3 := bound("limit", 10)
	if !ok1 || !ok2 || !ok3 || limit < 1 || limit > 100 {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_integer", "created[gte], created[lt] and limit (1-100) are integers.")
		return
	}
	expandSource, expandPI := stripeExpands(r, "data.source"), stripeExpands(r, "data.source.payment_intent")
	from := time.Unix(gte, 0)
	var all []map[string]any
	// dayTrades works in days: walk the days the range covers.
	for day := startOfDay(from, time.UTC); day.Unix() < lt; day = day.AddDate(0, 0, 1) {
		for _, t := range f.dayTrades("stripe", day) {
			if t.PaidAt.Unix() < gte || t.PaidAt.Unix() >= lt {
				continue
			}
			all = append(all, stripeChargeBT(t, expandSource, expandPI))
			if t.RefundID != "" {
				all = append(all, stripeRefundBT(t, expandSource, expandPI))
			}
		}
		if day.Sub(from) > 400*24*time.Hour {
			break // the fake lists a year at most
		}
	}
	typ := q.Get("type")
	var data []map[string]any
	started := q.Get("starting_after") == ""
	hasMore := false
	for _, bt := range all {
		if typ != "" && bt["type"] != typ {
			continue
		}
		if !started {
			started = bt["id"] == q.Get("starting_after")
			continue
		}
		if int64(len(data)) == limit {
			hasMore = true
			break
		}
		data = append(data, bt)
	}
	if data == nil {
		data = []map[string]any{}
	}
	writeStripeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "has_more": hasMore, "url": "/v1/balance_transactions"})
}

func stripeChargeBT(t fakeBillTrade, expandSource, expandPI bool) map[string]any {
	pi := stripeIntentID(t.FakeTrade)
	charge := "ch_" + strings.TrimPrefix(pi, "pi_")
	currency := strings.ToLower(t.Currency)
	var source any = charge
	if expandSource {
		var intent any = pi
		if expandPI {
			intent = stripePaymentIntent(t.FakeTrade, false)
		}
		source = map[string]any{
			"id": charge, "object": "charge", "amount": t.AmountFen, "amount_captured": t.AmountFen, "captured": true,
			"created": t.PaidAt.Unix(), "currency": currency, "livemode": false, "paid": true, "status": "succeeded",
			"metadata": map[string]string{"trade_no": t.TradeNo}, "payment_intent": intent,
		}
	}
	return map[string]any{
		"id": "txn_" + strings.TrimPrefix(charge, "ch_"), "object": "balance_transaction", "amount": t.AmountFen,
		"created": t.PaidAt.Unix(), "currency": currency, "fee": 0, "net": t.AmountFen, "reporting_category": "charge",
		"source": source, "status": "available", "type": "charge",
	}
}

func stripeRefundBT(t fakeBillTrade, expandSource, expandPI bool) map[string]any {
	pi := stripeIntentID(t.FakeTrade)
	charge := "ch_" + strings.TrimPrefix(pi, "pi_")
	currency := strings.ToLower(t.Currency)
	var source any = t.RefundID
	if expandSource {
		var intent any = pi
		if expandPI {
			intent = stripePaymentIntent(t.FakeTrade, false)
		}
		source = map[string]any{
			"id": t.RefundID, "object": "refund", "amount": t.RefundAmt, "charge": charge, "created": t.PaidAt.Unix(),
			"currency": currency, "metadata": map[string]string{}, "payment_intent": intent, "status": "succeeded",
		}
	}
	return map[string]any{
		"id": "txn_" + strings.TrimPrefix(t.RefundID, "re_"), "object": "balance_transaction", "amount": -t.RefundAmt,
		"created": t.PaidAt.Unix(), "currency": currency, "fee": 0, "net": -t.RefundAmt, "reporting_category": "refund",
		"source": source, "status": "available", "type": "refund",
	}
}
