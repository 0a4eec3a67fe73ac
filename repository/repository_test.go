package repository_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Two transactions take the same two stock rows in opposite orders: MariaDB kills one with a
// deadlock (1213), and InTx must run that one again so both commit.
func TestInTxRetriesDeadlocks(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	for _, sku := range []string{"A", "B"} {
		if err := db.PutStock(ctx, payment.Stock{SKU: sku, Num: 10, PriceFen: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var attempts atomic.Int32
	firstLocked := make(chan struct{}, 2)
	var wg sync.WaitGroup
	run := func(first, second string) {
		defer wg.Done()
		err := db.InTx(ctx, func(tx *repository.Tx) error {
			n := attempts.Add(1)
			if err := tx.TakeStock(ctx, first, 1, 1); err != nil {
				return err
			}
			if n <= 2 { // only the first round waits for the other, so a retry runs free
				firstLocked <- struct{}{}
				for len(firstLocked) < 2 && attempts.Load() < 3 {
					time.Sleep(time.Millisecond)
				}
			}
			return tx.TakeStock(ctx, second, 1, 1)
		})
		if err != nil {
			t.Errorf("InTx(%s then %s): %v", first, second, err)
		}
	}
	wg.Add(2)
	go run("A", "B")
	go run("B", "A")
	wg.Wait()
	if attempts.Load() < 3 {
		t.Fatalf("attempts = %d: no deadlock was retried", attempts.Load())
	}
	for _, sku := range []string{"A", "B"} {
		if s, err := db.GetStock(ctx, sku); err != nil || s.Num != 8 {
			t.Fatalf("stock %s = %+v, %v; want 8 (both transactions committed once)", sku, s, err)
		}
	}
}

func TestConditionalUpdatesReportRepeats(t *testing.T) {
	db := testenv.DB(t)
	ctx := context.Background()
	if err := db.PutStock(ctx, payment.Stock{SKU: "A", Num: 1, PriceFen: 5}); err != nil {
		t.Fatal(err)
	}
	err := db.InTx(ctx, func(tx *repository.Tx) error {
		if err := tx.TakeStock(ctx, "A", 1, 4); !errors.Is(err, repository.ErrStockChanged) {
			t.Fatalf("take at another price: %v, want ErrStockChanged", err)
		}
		if err := tx.TakeStock(ctx, "A", 1, 5); err != nil {
			t.Fatalf("take: %v", err)
		}
		if err := tx.TakeStock(ctx, "A", 1, 5); !errors.Is(err, payment.ErrOutOfStock) {
			t.Fatalf("take past zero: %v, want ErrOutOfStock", err)
		}
		if err := tx.TakeStock(ctx, "NOPE", 1, 5); !errors.Is(err, payment.ErrNotFound) {
			t.Fatalf("unknown sku: %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetOrder(ctx, "NOPE"); !errors.Is(err, payment.ErrNotFound) {
		t.Fatalf("unknown order: %v", err)
	}
	if _, err := db.Claim(ctx, "b", "s", "k", "h", "t1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Claim(ctx, "b", "s", "k", "h", "t2"); !errors.Is(err, payment.ErrConflict) {
		t.Fatalf("second claim: %v, want ErrDuplicate", err)
	}
	// Keys are case-sensitive: "K" is not "k".
	if _, err := db.Claim(ctx, "b", "s", "K", "h", "t3"); err != nil {
		t.Fatalf("claim of K: %v", err)
	}
}
