package main

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/paygw/paygw/webhook"
)

// The delivery phase's sink counts an event once it verified its signature: a bad signature is
// refused and not counted, a second copy is a duplicate, and done closes at the want-th event.
func TestSinkVerifies(t *testing.T) {
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	other, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startSink(secret, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	post := func(id string, signWith string) int {
		t.Helper()
		body := []byte(`{"id":"` + id + `","type":"order.paid","data":{}}`)
		req, err := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range webhook.Headers(id, time.Now(), body, webhook.MustParseSecret(signWith)) {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("evt_a", other); code != http.StatusBadRequest {
		t.Fatalf("signed with another secret: %d, want 400", code)
	}
	if code := post("evt_a", secret); code/100 != 2 {
		t.Fatalf("signed: %d, want 2xx", code)
	}
	if code := post("evt_a", secret); code/100 != 2 {
		t.Fatalf("again: %d, want 2xx", code)
	}
	select {
	case <-s.done:
		t.Fatal("done after one distinct event of two")
	default:
	}
	post("evt_b", secret)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("not done after two distinct events")
	}
	if got, bad, dups := s.received(), s.bad.Load(), s.dups.Load(); got != 2 || bad != 1 || dups != 1 {
		t.Fatalf("received %d, bad %d, duplicates %d; want 2, 1, 1", got, bad, dups)
	}
}
