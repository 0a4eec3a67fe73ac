package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/paygw/paygw/orders"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// The hot-SKU create: every client creates an order of the same SKU, each request under an
// Idempotency-Key of its own, so each takes the claim, the stock row's lock, the order insert
// and the record's completion. The stock row serialises the bare client's creates one by one;
// the gateway's share it by group (orders/group.go).

const (
	hotSKU      = "HOT-1"
	hotBody     = `{"user_id":7,"sku":"` + hotSKU + `","num":1}`
	benchToken  = "bench-token-0123456789abcdef0123"
	createScope = "bench"
)

// runCreates POSTs n creates of the hot SKU with c.concurrency in flight; a 201 is a success.
func (c *client) runCreates(ctx context.Context, base string, n int, keyPrefix string) result {
	return timed(ctx, n, c.concurrency, func(i int) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/orders", bytes.NewReader([]byte(hotBody)))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+benchToken)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%07d", keyPrefix, i))
		return c.status(req) == http.StatusCreated
	})
}

// rawCreates runs the create's own statements for n keys from a bare client at the given
// concurrency: the claim (committed alone), then one transaction reading the hot SKU's price,
// inserting the order, completing the record and taking one unit last, as orders.Service does.
func rawCreates(ctx context.Context, dsn string, n, concurrency int, keyPrefix string) (result, error) {
	db, err := repository.Open(ctx, dsn, concurrency)
	if err != nil {
		return result{}, err
	}
	defer db.Close()
	_ = parallel(concurrency, concurrency, func(int) error { return db.Ping(ctx) })
	hash := sha256.Sum256([]byte(hotBody))
	reqHash := hex.EncodeToString(hash[:])
	return timed(ctx, n, concurrency, func(i int) bool {
		return rawCreate(ctx, db, fmt.Sprintf("%s-%07d", keyPrefix, i), reqHash) == nil
	}), nil
}

func rawCreate(ctx context.Context, db *repository.DB, key, reqHash string) error {
	token := make([]byte, 16)
	_, _ = rand.Read(token)
	tok := hex.EncodeToString(token)
	id, err := db.Claim(ctx, repository.BizOrderCreate, createScope, key, reqHash, tok)
	if err != nil {
		return err
	}
	return db.InTx(ctx, func(tx *repository.Tx) error {
		st, err := tx.ReadStock(ctx, hotSKU)
		if err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		o := payment.Order{TradeNo: orders.NewTradeNo(now), UserID: 7, SKU: hotSKU, Num: 1, AmountFen: st.PriceFen,
			Currency: "CNY", Status: payment.OrderWaitPay, CreateTime: now}
		if err := tx.InsertOrder(ctx, o, createScope, key, reqHash); err != nil {
			return err
		}
		body, _ := json.Marshal(o) // cannot fail; about the size of the gateway's rendered body
		if err := tx.CompleteRecord(ctx, id, tok, http.StatusCreated, body); err != nil {
			return err
		}
		return tx.TakeStock(ctx, hotSKU, 1, st.PriceFen)
	})
}

// stockHot sets the hot SKU's stock (enough for every create of the run).
func (a *admin) stockHot(ctx context.Context, db string, num int) error {
	d, err := repository.Open(ctx, a.dsn(db), 1)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.PutStock(ctx, payment.Stock{SKU: hotSKU, Num: num, PriceFen: 500})
}
