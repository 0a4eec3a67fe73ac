package handlers

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestAnomaliesListAndResolve(t *testing.T) {
	h := newHarness(t, options{})
	// 150 anomalies of two kinds, straight into the table.
	for i := range 150 {
		kind := "AMOUNT_MISMATCH"
		if i%3 == 0 {
			kind = "DUPLICATE_PAYMENT"
		}
		h.exec(`INSERT INTO anomaly (kind, trade_no, channel, channel_txn_id, amount_fen, currency, detail, created_time)
			VALUES (?, ?, 'alipay', ?, 1, 'CNY', 'seeded', NOW(3))`, kind, fmt.Sprintf("T%03d", i), fmt.Sprintf("X%03d", i))
	}
	type page struct {
		Anomalies []struct {
			ID         int64  `json:"id"`
			Kind       string `json:"kind"`
			ResolvedBy string `json:"resolved_by"`
		} `json:"anomalies"`
		NextCursor string `json:"next_cursor"`
	}
	get := func(query string) page {
		t.Helper()
		r := h.do("GET", "/v1/anomalies"+query, testToken, nil, "")
		var p page
		if r.code != 200 || json.Unmarshal([]byte(r.body), &p) != nil {
			t.Fatalf("GET /v1/anomalies%s: %d %s", query, r.code, r.body)
		}
		return p
	}
	first := get("?kind=AMOUNT_MISMATCH&resolved=false")
	if len(first.Anomalies) != 100 || first.NextCursor == "" {
		t.Fatalf("first page: %d rows, cursor %q; want 100 and a cursor", len(first.Anomalies), first.NextCursor)
	}
	second := get("?kind=AMOUNT_MISMATCH&resolved=false&cursor=" + first.NextCursor)
	if len(second.Anomalies) != 0 || second.NextCursor != "" {
		t.Fatalf("second page: %d rows (want 0: exactly 100 AMOUNT_MISMATCH), cursor %q", len(second.Anomalies), second.NextCursor)
	}
	seen := map[int64]bool{}
	for _, a := range first.Anomalies {
		if a.Kind != "AMOUNT_MISMATCH" || seen[a.ID] {
			t.Fatalf("row %+v: wrong kind or seen twice", a)
		}
		seen[a.ID] = true
	}
	all := get("")
	rest := get("?cursor=" + all.NextCursor)
	if len(all.Anomalies)+len(rest.Anomalies) != 150 {
		t.Fatalf("all pages hold %d, want 150", len(all.Anomalies)+len(rest.Anomalies))
	}

	id := fmt.Sprint(first.Anomalies[0].ID)
	r := h.do("POST", "/v1/anomalies/"+id+"/resolve", testToken, map[string]string{"Content-Type": "application/json"}, `{"note":"refunded by hand, ticket 42"}`)
	wantCode(t, "resolve", r, 200)
	var resolved struct {
		ResolvedBy, ResolveNote string
		ResolvedAt              *string `json:"resolved_at"`
	}
	_ = json.Unmarshal([]byte(r.body), &resolved)
	if n := h.count(`SELECT COUNT(*) FROM anomaly WHERE id = ? AND resolved_by = 'order-service' AND resolve_note = 'refunded by hand, ticket 42' AND resolved_at IS NOT NULL`, id); n != 1 || resolved.ResolvedAt == nil {
		t.Fatalf("the resolution was not recorded with its token name and note: %s", r.body)
	}
	if r := h.do("POST", "/v1/anomalies/"+id+"/resolve", testToken, nil, `{"note":"again"}`); r.code != 409 || problemType(t, r) != "urn:paygw:problem:already-resolved" {
		t.Fatalf("resolve twice: %d %s", r.code, r.body)
	}
	if p := get("?kind=AMOUNT_MISMATCH&resolved=false"); len(p.Anomalies) != 99 {
		t.Fatalf("unresolved after one resolve: %d, want 99", len(p.Anomalies))
	}
	for name, c := range map[string]struct {
		path, body string
		code       int
	}{
		"unknown id":   {"/v1/anomalies/999999/resolve", `{"note":"x"}`, 404},
		"no note":      {"/v1/anomalies/" + id + "/resolve", `{}`, 400},
		"bad id":       {"/v1/anomalies/abc/resolve", `{"note":"x"}`, 404},
		"bad resolved": {"/v1/anomalies?resolved=maybe", "", 400},
		"bad cursor":   {"/v1/anomalies?cursor=-1", "", 400},
	} {
		method := "POST"
		if c.body == "" {
			method = "GET"
		}
		if r := h.do(method, c.path, testToken, nil, c.body); r.code != c.code {
			t.Errorf("%s: %d %s, want %d", name, r.code, r.body, c.code)
		}
	}
}
