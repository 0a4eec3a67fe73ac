package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
)

// serve runs the outbox's sequencer under its lease: events committed while it runs reach the
// feed, and a long poll waiting on the feed is answered as soon as they are numbered.
func TestServeSequencesEvents(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	addr := freeAddr(t)
	token := newToken(t)
	path := writeConfig(t, settings{addr: addr, dsn: dsn, token: token, extra: "reconcile:\n  query_interval: 0s\n"})
	s := startServer(t, path, addr)
	defer s.stop()
	got := make(chan []byte, 1)
	start := time.Now()
	go func() {
		r := s.do("GET", "/v1/events?wait=20s", token, nil, "")
		if r.code != http.StatusOK {
			t.Errorf("feed: %d %s", r.code, r.body)
		}
		got <- []byte(r.body)
	}()
	time.Sleep(300 * time.Millisecond)
	testenv.OldEvents(t, dsn, "new", 3, 0, 0) // committed, not numbered
	var page struct {
		Events []struct {
			ID string `json:"id"`
		} `json:"events"`
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(<-got, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Events) == 0 || time.Since(start) > 10*time.Second {
		t.Fatalf("the long poll got %d events after %s, want them within a second or so", len(page.Events), time.Since(start))
	}
	testenv.Until(t, 10*time.Second, "every event numbered", func() bool {
		return testenv.Count(t, dsn, `SELECT COUNT(*) FROM event WHERE seq IS NOT NULL`) == 3
	})
	if n := testenv.Count(t, dsn, `SELECT COUNT(*) FROM job_lease WHERE name = 'outbox' AND holder <> '' AND expires_at > UTC_TIMESTAMP(3)`); n != 1 {
		t.Fatalf("the outbox lease is not held (%d rows)", n)
	}
}
