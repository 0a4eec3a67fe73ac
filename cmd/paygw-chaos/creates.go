package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

const createSKU = "CHAOS-SKU"

// createBody is the same from every client of a key, so every one of them is a replay.
const createBody = `{"user_id":7,"sku":"` + createSKU + `","num":1}`

// createResult is what the idempotent create path did during one fault.
type createResult struct {
	keys, requests, agreed int
	problems               []string
}

// createStorm sends every key's create to every replica at once and retries each (409 in
// flight, 5xx, no answer) until a 201, for at most limit. Every client of a key must end with
// the same trade_no, and the database must hold one order per key.
func createStorm(ctx context.Context, db *sql.DB, urls []string, token string, keys []string, limit time.Duration) createResult {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 10 * time.Second}
	res := createResult{keys: len(keys)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := make(map[string][]string, len(keys))
	for _, key := range keys {
		for r, u := range urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					code, tradeNo := postOrder(ctx, client, u, token, key, createBody)
					mu.Lock()
					res.requests++
					mu.Unlock()
					if code == http.StatusCreated {
						mu.Lock()
						got[key] = append(got[key], tradeNo)
						mu.Unlock()
						return
					}
					if code != 0 && code != http.StatusConflict && code < 500 {
						mu.Lock()
						res.problems = append(res.problems, fmt.Sprintf("create %s via replica %d: final %d", key, r, code))
						mu.Unlock()
						return
					}
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, key := range keys {
		nos := got[key]
		switch {
		case len(nos) != len(urls):
			res.problems = append(res.problems, fmt.Sprintf("create %s: %d of %d clients got a 201 within %s", key, len(nos), len(urls), limit))
		case strings.Count(strings.Join(nos, ",")+",", nos[0]+",") != len(nos):
			res.problems = append(res.problems, fmt.Sprintf("create %s: clients got different orders %v", key, nos))
		default:
			res.agreed++
		}
		var n int
		if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM orders WHERE idem_key = ?`, key).Scan(&n); err != nil {
			res.problems = append(res.problems, err.Error())
		} else if n != 1 {
			res.problems = append(res.problems, fmt.Sprintf("create %s: %d orders in the database, want 1", key, n))
		}
	}
	return res
}

func postOrder(ctx context.Context, client *http.Client, base, token, key, body string) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/orders", strings.NewReader(body))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	var out struct {
		TradeNo string `json:"trade_no"`
	}
	_ = json.Unmarshal(b, &out)
	return res.StatusCode, out.TradeNo
}

func putStock(ctx context.Context, base, token string, num int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/stock/"+createSKU,
		strings.NewReader(fmt.Sprintf(`{"num":%d,"price_fen":500}`, num)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return fmt.Errorf("PUT /v1/stock: %d %s", res.StatusCode, b)
	}
	return nil
}
