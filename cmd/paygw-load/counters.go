package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// counterNames are the MariaDB status counters each timed round reads before and after, so the
// report can say where a scenario's work goes inside the server: handler calls (rows written,
// updated, looked up), InnoDB rows and redo bytes, row lock waits.
var counterNames = []string{
	"Handler_write", "Handler_update", "Handler_delete", "Handler_read_key", "Handler_read_next",
	"Handler_read_rnd_next", "Innodb_rows_inserted", "Innodb_rows_updated", "Innodb_rows_read",
	"Innodb_os_log_written", "Innodb_data_written", "Innodb_buffer_pool_write_requests",
	"Innodb_row_lock_waits", "Innodb_row_lock_time", "Com_commit", "Com_insert_select", "Com_update",
}

// counters reads counterNames from SHOW GLOBAL STATUS.
func (a *admin) counters(ctx context.Context) (map[string]int64, error) {
	q := "SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(counterNames, "', '") + "')"
	var rows []struct {
		Name  string `db:"Variable_name"`
		Value int64  `db:"Value"`
	}
	if err := a.db.SelectContext(ctx, &rows, q); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Value
	}
	return out, nil
}

// delta is after less before, counter by counter.
func delta(before, after map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(after))
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// counterSteps are the scenarios whose counters the report shows, when they ran.
var counterSteps = []string{"raw", "raw_unsequenced", "unique", "unique_unsequenced", "unique_b"}

// printCounters writes, per scenario of counterSteps that ran, each counter per request (the
// whole server's, other clients included: background_questions_per_s says how many there were).
func (b *bench) printCounters(w io.Writer) {
	var ran []string
	for _, s := range counterSteps {
		if _, ok := b.results[s]; ok {
			ran = append(ran, s)
		}
	}
	if len(ran) == 0 {
		return
	}
	fmt.Fprintf(w, "\nMariaDB counters per request, all rounds (SHOW GLOBAL STATUS deltas)\n%-34s", "counter")
	for _, s := range ran {
		fmt.Fprintf(w, " %18s", s)
	}
	fmt.Fprintln(w)
	for _, c := range counterNames {
		fmt.Fprintf(w, "%-34s", c)
		for _, s := range ran {
			fmt.Fprintf(w, " %18.2f", b.results[s].perRequestOf(c))
		}
		fmt.Fprintln(w)
	}
}

// perRequestOf is a counter's delta per request.
func (r result) perRequestOf(counter string) float64 {
	if r.Requests == 0 {
		return 0
	}
	return float64(r.Counters[counter]) / float64(r.Requests)
}
