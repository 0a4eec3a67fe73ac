package orders

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/paygw/paygw/internal/batch"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// Grouped creates: creates in flight at the same moment share one transaction, as first-time
// payments do in group apply (apply/group.go; the queue is internal/batch).
//
// A SKU's row is the hot spot of creates: every create of the SKU waits for its lock, held from
// the take of the units to COMMIT. A group takes the units of all its creates of a SKU with one
// `num = num - k WHERE num >= k` and one COMMIT, so a hot SKU pays one lock hold and one fsync per
// group instead of per create. At most `lanes` create transactions run at once; a create that
// finds a lane free runs alone at once, exactly as on the single path, so a quiet service adds no
// latency.
//
// Inside a group, each create's order, its first attempt and its record's final result are
// written as on the single path, priced from the stock as last committed. Partial fills: the
// creates are filled in the order they queued while the units read last; the rest get the
// out-of-stock refusal, stored and replayed like the single path's. The SKUs' rows are taken
// last, in SKU order (two groups never lock them in opposite orders).
//
// A group that fails (the units went or the price changed meanwhile, a claim fenced by the
// sweeper, a duplicate key, a deadlock, a lost connection or an ambiguous COMMIT) rolls back
// whole, and each of its creates runs alone on the single path: there the retries, the repricing,
// the refusals and the adoption of an existing order are decided as they always were, and the
// claims' tokens fence whatever the group might have committed. No caller gets its result before
// the COMMIT that holds it was acknowledged.

// groupMax caps a group: about 64 x 4 statements in its transaction.
const groupMax = 64

// groupTimeout bounds a group's transaction; it outlives no caller by much.
const groupTimeout = 10 * time.Second

type createItem struct {
	r Request
	c *claim // nil when the create has no idempotency key
}

// createAnswer is what became of a create in a group: its result, or alone when its caller
// must run it on the single path.
type createAnswer struct {
	res   Result
	err   error
	alone bool
}

// SetGroupLanes sets how many create transactions run at once before creates queue into groups;
// 0 turns grouping off (every create alone). Call it before use.
func (s *Service) SetGroupLanes(n int) {
	s.group = nil
	if n > 0 {
		s.group = batch.New(n, groupMax, s.runAlone, s.runGroup)
	}
}

// Queued is how many creates wait for a lane right now (0 with grouping off).
func (s *Service) Queued() int {
	if s.group == nil {
		return 0
	}
	return s.group.Len()
}

// createGrouped runs the business transaction of r in a group when others are in flight, alone
// otherwise, and alone whatever a group leaves.
func (s *Service) createGrouped(ctx context.Context, r Request, c *claim) (Result, error) {
	if s.group == nil {
		return s.create(ctx, r, c)
	}
	a, err := s.group.Do(ctx, createItem{r: r, c: c})
	switch {
	case err != nil: // the caller gave up; a group may still commit it, fenced on the claim
		return Result{}, err
	case a.alone:
		return s.create(ctx, r, c)
	}
	return a.res, a.err
}

// runAlone runs a lone create on the single path, at once.
func (s *Service) runAlone(it *batch.Item[createItem, createAnswer]) {
	res, err := s.create(it.Ctx, it.Value.r, it.Value.c)
	it.Answer(createAnswer{res: res, err: err})
}

// runGroup runs several creates in one group.
func (s *Service) runGroup(b []*batch.Item[createItem, createAnswer]) {
	s.formed.Add(int64(len(b)))
	results, err := s.commitGroup(b)
	if err == nil {
		s.groups.Add(1)
		s.grouped.Add(int64(len(b)))
		s.db.Metrics.CreateGroup(len(b))
	}
	for i, it := range b {
		if err != nil {
			it.Answer(createAnswer{alone: true})
			continue
		}
		it.Answer(createAnswer{res: results[i]})
	}
}

// skuTake is what a group knows of one SKU: its stock as last committed, and the units its
// creates take.
type skuTake struct {
	stock payment.Stock
	known bool
	taken int
}

// commitGroup runs the group's transaction once and returns each create's result.
func (s *Service) commitGroup(b []*batch.Item[createItem, createAnswer]) ([]Result, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b[0].Ctx), groupTimeout)
	defer cancel()
	results := make([]Result, len(b))
	err := s.db.TryTx(ctx, func(tx *repository.Tx) error {
		skus := map[string]*skuTake{}
		for i, it := range b {
			var err error
			if results[i], err = s.groupOne(ctx, tx, it.Value.r, skus); err != nil {
				return err
			}
			if err := s.complete(ctx, tx, it.Value.c, results[i]); err != nil {
				return err
			}
		}
		s.hookAfterPricing()
		for _, sku := range slices.Sorted(maps.Keys(skus)) { // last: the rows' locks are held to COMMIT
			if t := skus[sku]; t.taken > 0 {
				if err := tx.TakeStockIn(ctx, sku, t.taken, t.stock.PriceFen, t.stock.Currency); err != nil {
					return err
				}
			}
		}
		s.hookBeforeCommit()
		return nil
	})
	return results, err
}

// groupOne places one create of a group: an order without stock as it is, an order from stock
// priced from its SKU as read once per group, filled while the units read last.
func (s *Service) groupOne(ctx context.Context, tx *repository.Tx, r Request, skus map[string]*skuTake) (Result, error) {
	if r.Order.SKU == "" {
		return s.placeOrder(ctx, tx, r, payment.Stock{})
	}
	t, ok := skus[r.Order.SKU]
	if !ok {
		st, err := tx.ReadStock(ctx, r.Order.SKU)
		if err != nil && !errors.Is(err, payment.ErrNotFound) {
			return Result{}, err
		}
		t = &skuTake{stock: st, known: err == nil}
		skus[r.Order.SKU] = t
	}
	switch {
	case !t.known:
		return s.refuse(r, payment.ErrNotFound), nil
	case t.stock.Num-t.taken < r.Order.Num:
		return s.refuse(r, payment.ErrOutOfStock), nil
	}
	res, err := s.placeOrder(ctx, tx, r, t.stock)
	if err == nil {
		t.taken += r.Order.Num
	}
	return res, err
}
