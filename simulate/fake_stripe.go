package simulate

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
)

// stripeRoutes serves the two calls of Stripe's API that paygw's trade query makes, for the
// trades in the fake's store, authenticated with the sandbox secret key as Stripe authenticates:
//   - GET /v1/payment_intents/search?query=metadata['trade_no']:'T' -> a search_result;
//   - GET /v1/payment_intents/{id} -> the PaymentIntent, or 404 resource_missing.
//
// Each trade is one PaymentIntent, shaped as the Stripe signer's events show it: paid is
// succeeded, pending processing, closed canceled, refunded succeeded with a latest charge that
// has amount_refunded (RefundFen, or the whole amount when 0). expand[]=latest_charge (or
// data.latest_charge in a search) gives the charge object instead of its id.
func (f *Fake) stripeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/payment_intents/search", f.stripeSearch)
	mux.HandleFunc("GET /v1/payment_intents/{id}", f.stripeRetrieve)
}

func (f *Fake) stripeSearch(w http.ResponseWriter, r *http.Request) {
	if !f.stripeAuthorized(w, r) {
		return
	}
	tradeNo, ok := stripeTradeNoQuery(r.URL.Query().Get("query"))
	if !ok {
		stripeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_invalid_string",
			"This fake understands only the query metadata['trade_no']:'<trade_no>'.")
		return
	}
	data := []any{}
	if t, found := f.Trade("stripe", tradeNo); found {
		data = append(data, stripePaymentIntent(t, stripeExpands(r, "data.latest_charge")))
	}
	writeStripeJSON(w, http.StatusOK, map[string]any{
		"object": "search_result", "data": data, "has_more": false, "next_page": nil,
		"url": "/v1/payment_intents/search",
	})
}

func (f *Fake) stripeRetrieve(w http.ResponseWriter, r *http.Request) {
	if !f.stripeAuthorized(w, r) {
		return
	}
	id := r.PathValue("id")
	tradeNo := ""
	f.mu.Lock()
	for _, t := range f.trades {
		if t.Channel == "stripe" && stripeIntentID(t) == id {
			tradeNo = t.TradeNo
			break
		}
	}
	f.mu.Unlock()
	t, found := FakeTrade{}, false
	if tradeNo != "" {
		t, found = f.Trade("stripe", tradeNo) // counts the question
	}
	if !found || stripeIntentID(t) != id {
		stripeError(w, http.StatusNotFound, "invalid_request_error", "resource_missing", "No such payment_intent: '"+id+"'")
		return
	}
	writeStripeJSON(w, http.StatusOK, stripePaymentIntent(t, stripeExpands(r, "latest_charge")))
}

// stripeAuthorized checks the Bearer key as Stripe does (401 otherwise) and answers the fault
// Break("stripe") switched on.
func (f *Fake) stripeAuthorized(w http.ResponseWriter, r *http.Request) bool {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(f.manifest.Stripe.APIKey)) != 1 {
		stripeError(w, http.StatusUnauthorized, "invalid_request_error", "", "Invalid API Key provided.")
		return false
	}
	if f.broken("stripe") {
		stripeError(w, http.StatusInternalServerError, "api_error", "", "An unknown error occurred (the fake was told to break).")
		return false
	}
	return true
}

// stripeTradeNoQuery reads the one search paygw makes: metadata['trade_no']:'T', with \' and \\
// escapes inside the quotes.
func stripeTradeNoQuery(q string) (string, bool) {
	inner, ok := strings.CutPrefix(q, "metadata['trade_no']:'")
	if !ok || !strings.HasSuffix(inner, "'") {
		return "", false
	}
	inner = inner[:len(inner)-1]
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\' && i+1 < len(inner):
			i++
			b.WriteByte(inner[i])
		case c == '\\' || c == '\'':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), b.Len() > 0
}

// stripeExpands reports whether the request asks to expand field (expand[]=, expand[0]=, ...).
func stripeExpands(r *http.Request, field string) bool {
	for k, vs := range r.URL.Query() {
		if k == "expand" || strings.HasPrefix(k, "expand[") {
			for _, v := range vs {
				if v == field {
					return true
				}
			}
		}
	}
	return false
}

// stripeIntentID is the trade's PaymentIntent id, as the Stripe signer derives it.
func stripeIntentID(t FakeTrade) string {
	if strings.HasPrefix(t.TxnID, "pi_") {
		return t.TxnID
	}
	return "pi_" + t.TxnID
}

// stripePaymentIntent renders t as the PaymentIntent object Stripe returns.
func stripePaymentIntent(t FakeTrade, expandCharge bool) map[string]any {
	id := stripeIntentID(t)
	currency := strings.ToLower(t.Currency)
	pi := map[string]any{
		"id": id, "object": "payment_intent", "amount": t.AmountFen, "amount_capturable": 0,
		"amount_received": 0, "capture_method": "automatic_async", "created": t.PaidAt.Unix(),
		"currency": currency, "latest_charge": nil, "livemode": false,
		"metadata": map[string]string{"trade_no": t.TradeNo}, "payment_method_types": []string{"card"},
	}
	switch t.Status {
	case FakePaid, FakeRefunded:
		pi["status"], pi["amount_received"] = "succeeded", t.AmountFen
		refunded := int64(0)
		if t.Status == FakeRefunded {
			refunded = t.RefundFen
			if refunded == 0 {
				refunded = t.AmountFen
			}
		}
		charge := "ch_" + strings.TrimPrefix(id, "pi_")
		pi["latest_charge"] = charge
		if expandCharge {
			pi["latest_charge"] = map[string]any{
				"id": charge, "object": "charge", "amount": t.AmountFen, "amount_captured": t.AmountFen,
				"amount_refunded": refunded, "captured": true, "created": t.PaidAt.Unix(), "currency": currency,
				"livemode": false, "metadata": map[string]string{"trade_no": t.TradeNo}, "paid": true,
				"payment_intent": id, "refunded": refunded >= t.AmountFen, "status": "succeeded",
			}
		}
	case FakeClosed:
		pi["status"], pi["canceled_at"], pi["cancellation_reason"] = "canceled", t.PaidAt.Unix(), "abandoned"
	default: // pending
		pi["status"] = "processing"
	}
	return pi
}

func stripeError(w http.ResponseWriter, status int, typ, code, message string) {
	e := map[string]any{"type": typ, "message": message}
	if code != "" {
		e["code"] = code
	}
	writeStripeJSON(w, status, map[string]any{"error": e})
}

func writeStripeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_fake")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
