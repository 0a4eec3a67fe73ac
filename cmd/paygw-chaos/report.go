package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// docMarkers enclose the figures of one kind of run in its --doc file.
func docMarkers(o options) (begin, end string) {
	name, cmd := "chaos", "scripts/chaos.sh"
	if o.cluster {
		name, cmd = "chaos-cluster", "scripts/chaos.sh --cluster"
	}
	return "<!-- " + name + ":begin (written by " + cmd + "; do not edit by hand) -->", "<!-- " + name + ":end -->"
}

// report renders the figures as markdown: one table row per fault, then the details.
func report(o options, all []*figures, hooks *hookFigures, final *figures, took time.Duration) string {
	var b strings.Builder
	mode := "full"
	if o.short {
		mode = "--short"
	}
	if o.cluster {
		mode += ", 3 Galera nodes and a 6-node Redis Cluster"
	}
	speed := make([]string, 0, 4)
	for _, ch := range channelNames {
		speed = append(speed, fmt.Sprintf("%s %.0fx", ch, speedupOf(o, ch)))
	}
	sort.Strings(speed)
	fmt.Fprintf(&b, "Run %s (%s), %s on %d CPUs, %s in all; schedules compressed: %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), mode, runtime.GOOS+"/"+runtime.GOARCH, runtime.NumCPU(), took.Round(time.Second), strings.Join(speed, ", "))
	b.WriteString("| fault | orders x senders | requests | redeliveries | non-success replies | gave up | double-applies | lost | anomalies | certification failures | retries | time to recover | result |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range all {
		st := f.st
		result := "ok"
		if len(f.problems) > 0 {
			result = fmt.Sprintf("**FAILED (%d)**", len(f.problems))
		}
		cert := "-" // one MariaDB certifies nothing
		if o.cluster {
			cert = fmt.Sprint(f.counts[countCertFailures])
		}
		fmt.Fprintf(&b, "| %s: %s | %d x %d | %d | %d | %d | %d | %d | %d | %d | %s | %.0f | %s | %s |\n",
			f.name, f.fault, len(f.orders), f.dups, st.requests.Load(), st.redeliveries.Load(),
			st.requests.Load()-st.success.Load(), st.gaveUp.Load(), f.v.doubleApplies, f.v.lost, f.g.anomalies,
			cert, f.counts[countDeadlock]+f.counts[countLockWait], f.recover, result)
	}
	b.WriteString("\n")
	for _, f := range all {
		st := f.st
		fmt.Fprintf(&b, "- **%s** (%s): %d senders, %d succeeded; replies: %d success, %d retry (5xx), %d refusal (4xx), %d no answer",
			f.name, f.took.Round(time.Millisecond), st.senders.Load(), st.sendersOK.Load(), st.success.Load(), st.retryReplies.Load(), st.refusals.Load(), st.errs.Load())
		if k := st.kinds(); k != "" {
			fmt.Fprintf(&b, " [%s]", k)
		}
		fmt.Fprintf(&b, "; latency p50 %s p99 %s.", ms(st.percentile(0.5)), ms(st.percentile(0.99)))
		fmt.Fprintf(&b, " Transactions retried by paygw: %.0f after a deadlock or certification failure (1213), %.0f after a lock-wait timeout; the guard fell back to the database %.0f times (Redis down).",
			f.counts[countDeadlock], f.counts[countLockWait], f.counts[countRedisDown])
		if g := f.counts[countGroups]; g > 0 {
			fmt.Fprintf(&b, " Group apply: %.0f groups committed %.0f payments (%.1f per group).", g, f.counts[countGrouped], f.counts[countGrouped]/g)
		}
		fmt.Fprintf(&b, " APPLIED answers (from the replicas' logs): %d payment(s) answered more than once, %d never (the replica stopped between COMMIT and its answer; a redelivery was answered REPEAT).",
			f.v.doubleApplies, f.v.unanswered)
		for _, n := range f.notes {
			fmt.Fprintf(&b, " %s.", n)
		}
		if c := f.creates; c != nil {
			fmt.Fprintf(&b, " Idempotent create during the fault: %d keys x 3 replicas, %d requests, %d/%d keys with one order and one answer.", c.keys, c.requests, c.agreed, c.keys)
			if g := f.counts[countCreateGroups]; g > 0 {
				fmt.Fprintf(&b, " Grouped creates: %.0f groups committed %.0f creates.", g, f.counts[countCreated])
			}
		}
		b.WriteString("\n")
		for _, p := range f.problems {
			fmt.Fprintf(&b, "  - FAILED: %s\n", p)
		}
	}
	hooks.write(&b)
	where := "the whole database holds"
	if o.cluster {
		where = "every Galera node holds the same rows (CHECKSUM TABLE of the business tables), and each holds"
	}
	fmt.Fprintf(&b, "- **end**: every replica exited 0 on SIGTERM; after `paygw sweep` %s no anomaly, no stale `processing` record, no `pay_notify` record without its PAID order; the create path holds one order and one unit of stock per key.\n", where)
	for _, p := range final.problems {
		fmt.Fprintf(&b, "  - FAILED: %s\n", p)
	}
	return b.String()
}

func speedupOf(o options, ch string) float64 {
	var total time.Duration
	for _, d := range scheduleOf(ch) {
		total += d
	}
	return min(o.speedup, float64(total)/float64(o.minSpan))
}

// writeDoc puts the report between the chaos markers of path (appending them if missing).
func writeDoc(o options, path, rep string) error {
	docBegin, docEnd := docMarkers(o)
	old, err := os.ReadFile(path) // #nosec G304 -- the markdown file the operator names with --doc
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	s := string(old)
	block := docBegin + "\n" + rep + docEnd
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i >= 0 && j > i {
		s = s[:i] + block + s[j+len(docEnd):]
	} else {
		s += "\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(s), 0o644) // #nosec G306 G703 -- the operator's --doc, a repository document meant to be readable
}

// write renders the webhook side: one line of figures, then what failed.
func (h *hookFigures) write(b *strings.Builder) {
	v := h.v
	drain := ms(h.drain)
	if !h.drained {
		drain = "not drained after " + drain
	}
	fmt.Fprintf(b, "- **webhooks** (a real `paygw simulate webhook-sink --fail-rate %s`, SIGKILLed and restarted on its port %d times, once per phase; retry schedule %s): "+
		"%d events; %d POSTs recorded by paygw, %d deliveries answered 2xx and recorded by the sink, %d distinct event ids, %d duplicates received, %d deliveries failed (schedule spent); "+
		"time to drain after the faults %s. From the sink's record: %d PAID orders without exactly one distinct `order.paid` id, %d events never received, %d received before an earlier event of their order, %d ids not in the event table.\n",
		sinkFailRate, h.kills, strings.Join(sinkRetrySchedule, " "), v.events, h.attempted, v.received, v.distinct, v.duplicates, h.failed, drain,
		v.paidTwice, v.missing, v.outOfOrder, v.unknown)
	for _, p := range h.problems {
		fmt.Fprintf(b, "  - FAILED: %s\n", p)
	}
}
