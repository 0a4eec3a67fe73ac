package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/paygw/paygw/lease"
	"github.com/paygw/paygw/repository"
	"github.com/paygw/paygw/simulate"
)

// What the outbox costs the pay path. Every payment's transaction inserts its event row, and the
// sequencer (lease.Outbox) numbers the committed rows ten times a second. Beside unique and raw,
// in the same rounds:
//   - unique_unsequenced and raw_unsequenced: the same binary and transaction on a database whose
//     sequencer lease the load tool holds, so the rows are written and never numbered: the
//     sequencer's share;
//   - unique_b (with --gateway-b): another build of the gateway on a database of its own, e.g. one
//     built without the event writes, for the outbox's whole share.

// The databases of the variants; set with benchDB (main.go).
var (
	unseqDB = "paygw_bench_unseq"
	bDB     = "paygw_bench_b"
)

// outboxLeaseHolder is the load tool's name in unseqDB's outbox lease.
const outboxLeaseHolder = "paygw-load (no sequencer)"

// startVariants holds unseqDB's sequencer lease for the run and starts the gateways of the
// variants (unique_b's only with --gateway-b).
func (b *bench) startVariants(ctx context.Context, keys simulate.Manifest) error {
	repo, err := repository.Open(ctx, b.admin.dsn(unseqDB), 2)
	if err != nil {
		return err
	}
	_, release, err := lease.Hold(ctx, repo, lease.Outbox, outboxLeaseHolder, time.Hour)
	if err != nil {
		_ = repo.Close() // the Hold error is the one to report
		return fmt.Errorf("holding %s's outbox lease: %w", unseqDB, err)
	}
	b.unseqRelease = func() { release(); _ = repo.Close() }
	if b.gwUnseq, err = b.startGatewayBin(ctx, keys, unseqDB, "unsequenced", b.opts.groupLanes, b.opts.gatewayBin); err != nil {
		return err
	}
	if b.opts.gatewayB == "" {
		return nil
	}
	if err := b.runBSQL(ctx); err != nil {
		return err
	}
	b.gwB, err = b.startGatewayBin(ctx, keys, bDB, "b", b.opts.groupLanes, b.opts.gatewayB)
	return err
}

// warmVariants sends each variant's gateway its few hundred payments (connections, caches).
func (b *bench) warmVariants(ctx context.Context) {
	b.cl.run(ctx, b.gwUnseq.url+"/notify/alipay", b.sets["warmunseq"].msgs)
	if b.gwB != nil {
		b.cl.run(ctx, b.gwB.url+"/notify/alipay", b.sets["warmb"].msgs)
	}
}

// stopVariants stops what startVariants started (nil-safe).
func (b *bench) stopVariants() {
	b.gwB.stop()
	b.gwUnseq.stop()
	if b.unseqRelease != nil {
		b.unseqRelease()
		b.unseqRelease = nil
	}
}

// unsequenced counts the event rows of unseqDB that have a seq: none, if the lease held the
// sequencer off as it should.
func (b *bench) unsequenced(ctx context.Context) (numbered, all int64, err error) {
	err = b.admin.db.QueryRowContext(ctx, "SELECT COUNT(seq), COUNT(*) FROM "+unseqDB+".event").Scan(&numbered, &all)
	return numbered, all, err
}

// variantSteps are the throughput phase's steps beside raw and unique.
func (b *bench) variantSteps(ctx context.Context) []step {
	steps := []step{
		{name: "raw_unsequenced", fn: func(r int) result {
			res, err := rawCeiling(ctx, b.admin.dsn(unseqDB), chunk(b.sets["rawunseq"].events, r, rounds), b.opts.concurrency)
			if err != nil {
				b.logf("raw ceiling without the sequencer: %v", err)
			}
			return res
		}},
		{name: "unique_unsequenced", fn: func(r int) result {
			return b.cl.run(ctx, b.gwUnseq.url+"/notify/alipay", chunk(b.sets["unseq"].msgs, r, rounds))
		}},
	}
	if b.gwB != nil {
		steps = append(steps, step{name: "unique_b", fn: func(r int) result {
			return b.cl.run(ctx, b.gwB.url+"/notify/alipay", chunk(b.sets["uniqueb"].msgs, r, rounds))
		}})
	}
	return steps
}

// variantSets are the order sets of the variants.
func (b *bench) variantSets() []setSpec {
	sets := []setSpec{{name: "warmunseq", db: unseqDB, n: 300}, {name: "unseq", db: unseqDB, n: b.n(10000)},
		{name: "rawunseq", db: unseqDB, n: b.n(10000)}}
	if b.opts.gatewayB != "" {
		sets = append(sets, setSpec{name: "warmb", db: bDB, n: 300}, setSpec{name: "uniqueb", db: bDB, n: b.n(10000)})
	}
	return sets
}

// runBSQL runs --b-sql's statements on unique_b's database.
func (b *bench) runBSQL(ctx context.Context) error {
	if strings.TrimSpace(b.opts.bSQL) == "" {
		return nil
	}
	db, err := sql.Open("mysql", b.admin.dsn(bDB))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range strings.Split(b.opts.bSQL, ";") {
		if strings.TrimSpace(q) == "" {
			continue
		}
		b.logf("on %s: %s", bDB, strings.TrimSpace(q))
		if _, err := db.ExecContext(ctx, q); err != nil { // #nosec G701 -- the operator's own --b-sql
			return fmt.Errorf("--b-sql on %s: %s: %w", bDB, q, err)
		}
	}
	return nil
}
