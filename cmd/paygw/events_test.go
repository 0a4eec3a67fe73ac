package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paygw/paygw/internal/testenv"
	"github.com/paygw/paygw/webhook"
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

// During a secret rotation (`secrets: [new, old]`) serve signs every delivery with both: a
// receiver that knows only the new secret and one that knows only the old both verify it.
func TestServeDeliversDuringRotation(t *testing.T) {
	newer, older := testenv.WebhookSecret(t), testenv.WebhookSecret(t)
	type receiver struct {
		mu       sync.Mutex
		verified map[string]bool // webhook-id
		sigs     []int           // signatures per request
	}
	listen := func(secret string) (*receiver, string) {
		r := &receiver{verified: map[string]bool{}}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			r.mu.Lock()
			defer r.mu.Unlock()
			r.sigs = append(r.sigs, len(strings.Fields(req.Header.Get("webhook-signature"))))
			if err := webhook.Verify(body, req.Header, []string{secret}, time.Now()); err != nil {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			r.verified[req.Header.Get("webhook-id")] = true
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		return r, srv.URL + "/hooks"
	}
	upgraded, upURL := listen(newer)
	lagging, lagURL := listen(older)
	dsn := testenv.NewDatabase(t)
	addr := freeAddr(t)
	extra := fmt.Sprintf("reconcile:\n  query_interval: 0s\nwebhooks:\n  endpoints:\n"+
		"    - {name: upgraded, url: %q, secrets: [%q, %q]}\n    - {name: lagging, url: %q, secrets: [%q, %q]}\n",
		upURL, newer, older, lagURL, newer, older)
	s := startServer(t, writeConfig(t, settings{addr: addr, dsn: dsn, token: newToken(t), extra: extra}), addr)
	defer s.stop()
	waitFor(t, 10*time.Second, s, "both endpoints registered", func() bool {
		return testenv.Count(t, dsn, `SELECT COUNT(*) FROM webhook_endpoint`) == 2
	})
	testenv.OldEvents(t, dsn, "rot", 3, 0, 0) // committed after the endpoints were added
	for _, r := range []*receiver{upgraded, lagging} {
		waitFor(t, 20*time.Second, s, "three verified deliveries", func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return len(r.verified) == 3
		})
		r.mu.Lock()
		for _, n := range r.sigs {
			if n != 2 {
				t.Errorf("a request carried %d signatures, want 2 (new and old)", n)
			}
		}
		r.mu.Unlock()
	}
}

// A long poll does not hold a shutdown up: SIGINT answers it at once with an empty page, and
// serve exits 0 well within http.shutdown_timeout (a 30 s wait would outlast its 10 s).
func TestShutdownEndsLongPolls(t *testing.T) {
	dsn := testenv.NewDatabase(t)
	addr := freeAddr(t)
	token := newToken(t)
	s := startServer(t, writeConfig(t, settings{addr: addr, dsn: dsn, token: token, extra: "reconcile:\n  query_interval: 0s\n"}), addr)
	s.client.Timeout = 40 * time.Second
	answered := make(chan response, 1)
	go func() { answered <- s.do("GET", "/v1/events?wait=30s", token, nil, "") }()
	time.Sleep(500 * time.Millisecond) // the poll is held
	start := time.Now()
	s.stop()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("serve took %s to stop with a long poll held", took)
	}
	select {
	case r := <-answered:
		if r.code != http.StatusOK || !strings.Contains(r.body, `"events":[]`) {
			t.Errorf("the held poll: %d %s, want 200 and an empty page", r.code, r.body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held poll was not answered at shutdown")
	}
}
