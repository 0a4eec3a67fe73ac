package apply_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/paygw/paygw/apply"
	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/metrics"
	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// retries reads paygw_apply_retries_total by reason from m.
func retries(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	testenv.Series(t, m, "paygw_apply_retries_total", func(labels map[string]string, v float64) {
		for _, value := range labels {
			out[value] += v
		}
	})
	return out
}

// TestGaleraTwinsOnTwoNodes applies the same payment at the same moment through two Appliers on
// two Galera nodes (multi-primary), Redis down so nothing but the database orders them. Both
// insert the same record key; one node's commit wins certification and the other's transaction
// fails with 1213 at COMMIT (or meets the winner's replicated row as a duplicate key). InTx retries
// the 1213, the retry or the causal re-read sees the winner's record, and the reply is REPEAT:
// one APPLIED, one REPEAT, one PAID order, one record, one journal row, on all three nodes.
func TestGaleraTwinsOnTwoNodes(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	dbs := make([]*repository.DB, len(dsns))
	mets := make([]*metrics.Metrics, len(dsns))
	for i, dsn := range dsns {
		dbs[i] = testenv.Open(t, dsn)
		mets[i] = metrics.New("test")
		dbs[i].Metrics = mets[i]
		if !dbs[i].Galera() {
			t.Fatalf("node %d: Open did not detect Galera (wsrep_on)", i+1)
		}
	}
	appliers := []*apply.Applier{
		apply.New(dbs[0], testenv.DeadGuard(t), 5*time.Second, testenv.Logger(t)),
		apply.New(dbs[1], testenv.DeadGuard(t), 5*time.Second, testenv.Logger(t)),
	}

	const events = 100
	trades := make([]string, events)
	for i := range trades {
		trades[i] = testenv.InsertOrder(t, dbs[2], "G"+testenv.Random(8), 100)
	}
	for _, dsn := range dsns[:2] { // both writers' nodes have every order before the race
		if n := testenv.Count(t, dsn, "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM orders"); n != events {
			t.Fatalf("%d orders replicated, want %d", n, events)
		}
	}

	certBefore := testenv.GaleraCounter(t, "wsrep_local_cert_failures")
	abortsBefore := testenv.GaleraCounter(t, "wsrep_local_bf_aborts")
	start := time.Now()
	for i, tradeNo := range trades {
		ev := paid(tradeNo, fmt.Sprintf("g%02d-%s", i, tradeNo), 100)
		outcomes := make([]payment.Outcome, len(appliers))
		errs := make([]error, len(appliers))
		testenv.AtOnce(len(appliers), func(k int) { outcomes[k], errs[k] = appliers[k].Apply(ctx, ev) })
		for k, err := range errs {
			if err != nil {
				t.Fatalf("event %d on node %d: %v", i, k+1, err)
			}
		}
		got := map[payment.Outcome]int{}
		for _, o := range outcomes {
			got[o]++
		}
		if got[payment.OutcomeApplied] != 1 || got[payment.OutcomeRepeat] != 1 {
			t.Fatalf("event %d: outcomes %v, want one APPLIED and one REPEAT", i, outcomes)
		}
	}
	took := time.Since(start)
	certFailures := testenv.GaleraCounter(t, "wsrep_local_cert_failures") - certBefore
	bfAborts := testenv.GaleraCounter(t, "wsrep_local_bf_aborts") - abortsBefore
	deadlockRetries := retries(t, mets[0])["deadlock"] + retries(t, mets[1])["deadlock"]
	t.Logf("%d twin pairs on two nodes in %s: wsrep_local_cert_failures +%d, wsrep_local_bf_aborts +%d, InTx deadlock retries %v",
		events, took.Round(time.Millisecond), certFailures, bfAborts, deadlockRetries)
	if certFailures+bfAborts == 0 || deadlockRetries == 0 {
		t.Errorf("no certification conflict retried in %d twin pairs: the race between the nodes was not exercised", events)
	}

	for node, dsn := range dsns {
		const causal = "SET STATEMENT wsrep_sync_wait=1 FOR "
		if n := testenv.Count(t, dsn, causal+"SELECT COUNT(*) FROM orders WHERE status = 'PAID'"); n != events {
			t.Errorf("node %d: %d PAID orders, want %d", node+1, n, events)
		}
		if n := testenv.Count(t, dsn, causal+"SELECT COUNT(*) FROM idempotent_record WHERE biz_type = ?", repository.BizPayNotify); n != events {
			t.Errorf("node %d: %d payment records, want %d (one per event)", node+1, n, events)
		}
		if n := testenv.Count(t, dsn, causal+"SELECT COUNT(*) FROM idempotent_record WHERE status <> ?", repository.StatusSuccess); n != 0 {
			t.Errorf("node %d: %d records not successful", node+1, n)
		}
		if n := testenv.Count(t, dsn, causal+"SELECT COUNT(*) FROM notify_journal"); n != events {
			t.Errorf("node %d: %d journal rows, want %d", node+1, n, events)
		}
	}
}

// TestGaleraLeaseOneHolder has two replicas on two nodes take the same job lease at the same
// moment, round after round: the lease is a conditional UPDATE, certified cluster-wide, so at
// most one of them holds it, and every node agrees on who.
func TestGaleraLeaseOneHolder(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	dbs := []*repository.DB{testenv.Open(t, dsns[0]), testenv.Open(t, dsns[1])}
	const job = "galera_test"
	if err := dbs[0].EnsureLease(ctx, job); err != nil {
		t.Fatal(err)
	}
	testenv.Count(t, dsns[1], "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM job_lease")

	const rounds = 30
	won := 0
	for r := range rounds {
		holders := []string{fmt.Sprintf("a%d", r), fmt.Sprintf("b%d", r)}
		ok := make([]bool, 2)
		errs := make([]error, 2)
		testenv.AtOnce(len(dbs), func(k int) { ok[k], errs[k] = dbs[k].TakeLease(ctx, job, holders[k], time.Minute) })
		// A certification failure the node's autocommit retry did not absorb reaches the caller
		// as 1213: that replica does not hold the lease, which is the safe answer.
		if ok[0] && ok[1] {
			t.Fatalf("round %d: both replicas hold the lease (errors %v)", r, errs)
		}
		want := ""
		for k := range ok {
			if ok[k] {
				want = holders[k]
				won++
			}
		}
		for node, dsn := range dsns {
			n := testenv.Count(t, dsn, "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM job_lease WHERE name = ? AND holder = ?", job, want)
			if want != "" && n != 1 {
				t.Fatalf("round %d: node %d does not show %s holding the lease", r, node+1, want)
			}
		}
		// Free it for the next round.
		if want != "" {
			if err := dbs[0].ReleaseLease(ctx, job, want); err != nil {
				t.Fatal(err)
			}
			testenv.Count(t, dsns[1], "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM job_lease")
		}
	}
	t.Logf("%d rounds: the lease was taken by exactly one replica in %d, by none in %d", rounds, won, rounds-won)
	if won < rounds/2 {
		t.Errorf("the lease was taken in only %d of %d rounds", won, rounds)
	}
}

// TestGaleraRefundRightAfterPayment applies a payment on node 1 and, the moment it has
// committed, its refund on node 2, round after round. Node 2 may not have applied node 1's write
// set yet: a plain read there finds no paid order and keeps the refund pending for a payment
// that has already applied, which nothing counts again (found by make chaos-cluster). The
// refund's lookup is a causal read: every refund applies, every order ends refunded.
func TestGaleraRefundRightAfterPayment(t *testing.T) {
	dsns := testenv.GaleraDatabase(t)
	ctx := context.Background()
	payer := apply.New(testenv.Open(t, dsns[0]), testenv.DeadGuard(t), 5*time.Second, testenv.Logger(t))
	refunder := apply.New(testenv.Open(t, dsns[1]), testenv.DeadGuard(t), 5*time.Second, testenv.Logger(t))
	seed := testenv.Open(t, dsns[0])
	const rounds = 60
	for i := range rounds {
		tradeNo := testenv.InsertOrder(t, seed, "R"+testenv.Random(8), 100)
		txn := "rt-" + tradeNo
		if out, err := payer.Apply(ctx, paid(tradeNo, txn, 100)); err != nil || out != payment.OutcomeApplied {
			t.Fatalf("round %d: payment %s, %v", i, out, err)
		}
		if out, err := refunder.Apply(ctx, refunded(tradeNo, txn, "rf-"+tradeNo, 40, false)); err != nil || out != payment.OutcomeRefunded {
			t.Fatalf("round %d: the refund on the other node right after the payment: %s, %v; want REFUNDED", i, out, err)
		}
	}
	if n := testenv.Count(t, dsns[2], "SET STATEMENT wsrep_sync_wait=1 FOR SELECT COUNT(*) FROM orders WHERE refunded_fen = 40"); n != rounds {
		t.Fatalf("%d orders refunded 40, want %d", n, rounds)
	}
}
